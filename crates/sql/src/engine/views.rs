//! SQL views: their stored definitions.
//!
//! A view `db.v` is a row of the native table `norr_sys/views`, keyed by
//! (db, name), next to the databases table `norr_sys/schemata`: the data
//! nodes keep it (so every SQL node sees the view and it survives restarts)
//! and no native table is made for it. The row's `def` column holds a
//! `ViewMeta`:
//!
//! ```text
//! byte 0      format (VIEW_FORMAT = 1)
//! bytes 1..5  CRC-32 (IEEE, little endian) of the payload
//! bytes 5..   payload: postcard ViewMeta
//! ```
//!
//! Views are not cached: a statement that names one reads its row (one
//! committed read) when it is compiled. A statement over tables only never
//! comes here: the view lookup runs only after a name missed the table
//! cache and the dictionary (1146), so the table path keeps its single hash
//! lookup. See `view_expand` (queries), `view_dml` (writes through a view)
//! and `view_ddl` (CREATE / ALTER / DROP / SHOW).

use crate::engine::error_map;
use crate::types::SqlError;
use norr_client::{Client, ClientError};
use norr_signals::{Collation, ColumnDef, ColumnType, ErrorCode, ExecType, KeyOp, OpResult, ScanSpec, TableDef, Value};
use serde::{Deserialize, Serialize};

/// Native name of the views table.
pub const VIEWS_TABLE: &str = "norr_sys/views";
/// Version of the `ViewMeta` encoding in the `def` column.
pub const VIEW_FORMAT: u8 = 1;
/// Nesting bound for views over views: deeper (or a cycle made by
/// CREATE OR REPLACE) is refused with 1462 instead of recursing without end.
pub const MAX_VIEW_DEPTH: usize = 32;

/// WITH [CASCADED | LOCAL] CHECK OPTION.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CheckOption {
    None,
    Local,
    Cascaded,
}

impl CheckOption {
    /// information_schema.VIEWS.CHECK_OPTION.
    pub fn name(self) -> &'static str {
        match self {
            CheckOption::None => "NONE",
            CheckOption::Local => "LOCAL",
            CheckOption::Cascaded => "CASCADED",
        }
    }
}

/// A view as stored. DEFINER and SQL SECURITY are kept and shown, not
/// enforced (NorrDB has no privileges).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViewMeta {
    /// UNDEFINED, MERGE or TEMPTABLE (as written; only shown).
    pub algorithm: String,
    /// `root`@`%`, quoted as SHOW CREATE VIEW prints it.
    pub definer: String,
    /// DEFINER or INVOKER.
    pub security: String,
    pub check: CheckOption,
    /// The view's column names, in order: the explicit column list, or the
    /// SELECT's result names at CREATE time.
    pub columns: Vec<String>,
    /// The column list was written in CREATE VIEW.
    pub explicit_columns: bool,
    /// The SELECT, table names qualified with their database, as rendered by
    /// the SQL parser (it parses again to the same statement).
    pub select_sql: String,
    pub charset_client: String,
    pub collation_connection: String,
}

impl ViewMeta {
    pub fn encode(&self) -> Vec<u8> {
        let payload = postcard::to_allocvec(self).expect("ViewMeta serializes");
        let mut out = Vec::with_capacity(payload.len() + 5);
        out.push(VIEW_FORMAT);
        out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        out.extend_from_slice(&payload);
        out
    }

    /// None for bytes that are not a `ViewMeta` of a known format or fail
    /// their checksum.
    pub fn decode(b: &[u8]) -> Option<ViewMeta> {
        let (&format, rest) = b.split_first()?;
        if format != VIEW_FORMAT || rest.len() < 4 {
            return None;
        }
        let crc = u32::from_le_bytes(rest[..4].try_into().ok()?);
        let payload = &rest[4..];
        if crc32fast::hash(payload) != crc {
            return None;
        }
        postcard::from_bytes(payload).ok()
    }
}

/// A stored view.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    pub db: String,
    pub name: String,
    pub meta: ViewMeta,
}

/// A view a compiled plan was made from, with the definition it had then.
/// A plan kept between executions (a prepared SELECT) is run only while
/// every view it read still has that definition (`ViewStore::all_current`):
/// views are rows of a native table, so unlike a table's, their changes
/// give no schema-version error on execution (1412) to notice them by.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewStamp {
    pub db: String,
    pub name: String,
    pub meta: ViewMeta,
}

fn corrupt(db: &str, name: &str) -> SqlError {
    SqlError::new(
        1356,
        "HY000",
        format!("View '{db}.{name}' references invalid table(s) or column(s) or function(s) or definer/invoker of view lack rights to use them"),
    )
}

/// Create `norr_sys/views` if missing (at engine start).
pub async fn bootstrap(client: &Client) -> Result<TableDef, SqlError> {
    match client.get_table(VIEWS_TABLE).await {
        Ok(d) => return Ok(d),
        Err(e) if e.code() == Some(ErrorCode::NoSuchTable) => {}
        Err(e) => return Err(error_map::from_client_plain(e)),
    }
    let name = |n: &str| ColumnDef::new(n, ColumnType::Varchar { len: 64, collation: Collation::Binary }).not_null();
    let t = norr_client::table_def(
        VIEWS_TABLE,
        vec![name("db"), name("name"), ColumnDef::new("def", ColumnType::Blob).not_null()],
        vec![0, 1],
    );
    match client.create_table(t).await {
        Ok(d) => Ok(d),
        Err(e) if e.code() == Some(ErrorCode::TableExists) => {
            client.get_table(VIEWS_TABLE).await.map_err(error_map::from_client_plain)
        }
        Err(e) => Err(error_map::from_client_plain(e)),
    }
}

/// The views table's operations, on the catalog's client.
pub struct ViewStore<'a> {
    pub client: &'a Client,
    pub def: TableDef,
}

fn text(v: &Value) -> String {
    v.as_bytes().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default()
}

impl ViewStore<'_> {
    /// The view `db.name`, if there is one (a committed read).
    pub async fn get(&self, db: &str, name: &str) -> Result<Option<View>, SqlError> {
        let mut op = KeyOp::read(self.def.id, vec![Value::str(db), Value::str(name)]);
        op.abort_on_error = false;
        op.projection = vec![2];
        let mut txn = self.client.begin();
        let r = txn.execute(vec![op], ExecType::Commit).await.map_err(error_map::from_client_plain)?;
        match r.into_iter().next() {
            Some(OpResult::Ok(Some(row))) => {
                let meta = row
                    .first()
                    .and_then(|v| v.as_bytes())
                    .and_then(ViewMeta::decode)
                    .ok_or_else(|| corrupt(db, name))?;
                Ok(Some(View { db: db.to_string(), name: name.to_string(), meta }))
            }
            Some(OpResult::Err(e)) if e.code == ErrorCode::NoSuchRow => Ok(None),
            Some(OpResult::Err(e)) => Err(error_map::from_client_plain(ClientError::Node(e))),
            _ => Ok(None),
        }
    }

    /// Whether every view of `stamps` is still stored with the definition
    /// it has there: one committed read of all of them, in one batch.
    /// A view dropped (or a row that no longer decodes) is not current.
    pub async fn all_current(&self, stamps: &[ViewStamp]) -> Result<bool, SqlError> {
        debug_assert!(!stamps.is_empty(), "only plans over views are checked");
        let ops = stamps
            .iter()
            .map(|st| {
                let mut op = KeyOp::read(self.def.id, vec![Value::str(&st.db), Value::str(&st.name)]);
                op.abort_on_error = false;
                op.projection = vec![2];
                op
            })
            .collect();
        let mut txn = self.client.begin();
        let r = txn.execute(ops, ExecType::Commit).await.map_err(error_map::from_client_plain)?;
        if r.len() != stamps.len() {
            return Ok(false);
        }
        for (res, st) in r.into_iter().zip(stamps) {
            match res {
                OpResult::Ok(Some(row)) => {
                    let now = row.first().and_then(|v| v.as_bytes()).and_then(ViewMeta::decode);
                    if now.as_ref() != Some(&st.meta) {
                        return Ok(false);
                    }
                }
                OpResult::Ok(None) => return Ok(false),
                OpResult::Err(e) if e.code == ErrorCode::NoSuchRow => return Ok(false),
                OpResult::Err(e) => return Err(error_map::from_client_plain(ClientError::Node(e))),
            }
        }
        Ok(true)
    }

    /// Every view (of every database), sorted by (db, name). Rows that do
    /// not decode are left out (reading them names the view: 1356).
    pub async fn list(&self) -> Result<Vec<View>, SqlError> {
        let rows = self
            .client
            .scan(ScanSpec::full(self.def.id))
            .await
            .map_err(error_map::from_client_plain)?
            .collect_all()
            .await
            .map_err(error_map::from_client_plain)?;
        let mut out: Vec<View> = rows
            .iter()
            .filter(|r| r.len() >= 3)
            .filter_map(|r| {
                let meta = ViewMeta::decode(r[2].as_bytes()?)?;
                Some(View { db: text(&r[0]), name: text(&r[1]), meta })
            })
            .collect();
        out.sort_by(|a, b| (&a.db, &a.name).cmp(&(&b.db, &b.name)));
        Ok(out)
    }

    /// The views of `db`, sorted by name.
    pub async fn list_db(&self, db: &str) -> Result<Vec<View>, SqlError> {
        let mut all = self.list().await?;
        all.retain(|v| v.db == db);
        Ok(all)
    }

    /// Store a view: insert (false if one exists already) or, with
    /// `replace`, insert or overwrite.
    pub async fn put(&self, v: &View, replace: bool) -> Result<bool, SqlError> {
        let key = vec![Value::str(&v.db), Value::str(&v.name)];
        let vals = vec![(2, Value::Bytes(v.meta.encode()))];
        let op = if replace { KeyOp::write(self.def.id, key, vals) } else { KeyOp::insert(self.def.id, key, vals) };
        let mut txn = self.client.begin();
        match txn.execute(vec![op], ExecType::Commit).await {
            Ok(_) => Ok(true),
            Err(ClientError::Node(e)) if e.code == ErrorCode::DuplicateKey => Ok(false),
            Err(e) => Err(error_map::from_client_plain(e)),
        }
    }

    /// Delete a view; false if there was none.
    pub async fn delete(&self, db: &str, name: &str) -> Result<bool, SqlError> {
        let mut txn = self.client.begin();
        let op = KeyOp::delete(self.def.id, vec![Value::str(db), Value::str(name)]);
        match txn.execute(vec![op], ExecType::Commit).await {
            Ok(_) => Ok(true),
            Err(ClientError::Node(e)) if e.code == ErrorCode::NoSuchRow => Ok(false),
            Err(e) => Err(error_map::from_client_plain(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> ViewMeta {
        ViewMeta {
            algorithm: "UNDEFINED".into(),
            definer: "`root`@`%`".into(),
            security: "DEFINER".into(),
            check: CheckOption::Cascaded,
            columns: vec!["a".into(), "b".into()],
            explicit_columns: true,
            select_sql: "SELECT a, b FROM d.t".into(),
            charset_client: "utf8mb4".into(),
            collation_connection: "utf8mb4_0900_ai_ci".into(),
        }
    }

    #[test]
    fn meta_roundtrips_and_checks_its_bytes() {
        let m = meta();
        let b = m.encode();
        assert_eq!(b[0], VIEW_FORMAT);
        assert_eq!(ViewMeta::decode(&b), Some(m));
        let mut flipped = b.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(ViewMeta::decode(&flipped), None, "checksum mismatch is refused");
        let mut future = b.clone();
        future[0] = VIEW_FORMAT + 1;
        assert_eq!(ViewMeta::decode(&future), None, "unknown format is refused");
        assert_eq!(ViewMeta::decode(&[]), None);
        assert_eq!(ViewMeta::decode(&b[..3]), None);
    }

    /// The bytes of format 1 as written today: a later format must still read them.
    #[test]
    fn format_1_bytes_are_stable() {
        let b = meta().encode();
        assert_eq!(&b[..1], &[1]);
        let crc = u32::from_le_bytes(b[1..5].try_into().unwrap());
        assert_eq!(crc, crc32fast::hash(&b[5..]));
        // postcard: strings are a varint length then bytes; "UNDEFINED" first.
        assert_eq!(&b[5..15], b"\x09UNDEFINED");
    }
}
