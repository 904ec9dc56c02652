//! FOREIGN KEY constraints as InnoDB has them: the model kept in the
//! dictionary, the DDL checks, and the text SHOW CREATE TABLE prints.
//! Enforcement is `fk_enforce`.
//!
//! Where they live: a child table's `SqlTableMeta::fk.foreign_keys` holds its
//! constraints; the parent's `fk.referenced_by` names every (child table,
//! constraint) that references it. Both are in `TableDef::extra`, so in the
//! data node's dictionary: every SQL node sees them and they survive
//! restarts. Linking a child to its parent rewrites the parent's `extra`
//! (`Client::alter_table` with the same layout: no row is copied), which
//! bumps the parent's table version: a SQL node that cached the parent
//! before gets 1412 on its next write to it, reloads, and so learns about the
//! new child before it deletes a parent row.
//!
//! Decisions (InnoDB differs where noted):
//! * The referenced columns must be the parent's PRIMARY KEY or a UNIQUE
//!   key, exactly and in order (MySQL 8.4's default,
//!   `restrict_fk_on_non_standard_key`: 6125 otherwise; 1822 when no index
//!   starts with them). A parent row is then found by one key lookup.
//! * Tables with user partitioning cannot have or be referenced by foreign
//!   keys (1506), as InnoDB.
//! * ON ... SET DEFAULT is refused (1215), as InnoDB.

use crate::engine::catalog::{quote_ident, SqlIndexKind, SqlIndexMeta, SqlTable};
use crate::types::SqlError;
use norr_signals::ColumnType;
use serde::{Deserialize, Serialize};
use sqlparser::ast::{ForeignKeyConstraint, ReferentialAction};

/// What a parent delete / key update does to referencing rows. NO ACTION
/// and RESTRICT behave the same (InnoDB checks immediately); an action not
/// given is NO ACTION, which SHOW CREATE TABLE does not print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum FkAction {
    #[default]
    NoAction,
    Restrict,
    Cascade,
    SetNull,
}

impl FkAction {
    fn from_ast(a: Option<ReferentialAction>) -> Result<FkAction, SqlError> {
        Ok(match a {
            None | Some(ReferentialAction::NoAction) => FkAction::NoAction,
            Some(ReferentialAction::Restrict) => FkAction::Restrict,
            Some(ReferentialAction::Cascade) => FkAction::Cascade,
            Some(ReferentialAction::SetNull) => FkAction::SetNull,
            // InnoDB refuses the definition.
            Some(ReferentialAction::SetDefault) => return Err(cannot_add()),
        })
    }

    /// information_schema.REFERENTIAL_CONSTRAINTS' UPDATE_RULE / DELETE_RULE.
    pub fn rule_name(self) -> &'static str {
        match self {
            FkAction::NoAction => "NO ACTION",
            FkAction::Restrict => "RESTRICT",
            FkAction::Cascade => "CASCADE",
            FkAction::SetNull => "SET NULL",
        }
    }
}

/// One constraint of a child table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForeignKey {
    pub name: String,
    /// Referencing columns of the child, in order.
    pub columns: Vec<String>,
    pub ref_db: String,
    pub ref_table: String,
    /// Referenced columns of the parent, parallel to `columns`.
    pub ref_columns: Vec<String>,
    pub on_delete: FkAction,
    pub on_update: FkAction,
}

/// A constraint that references this table (kept on the parent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FkRef {
    pub db: String,
    pub table: String,
    pub name: String,
}

/// The foreign-key part of `SqlTableMeta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct FkMeta {
    pub foreign_keys: Vec<ForeignKey>,
    pub referenced_by: Vec<FkRef>,
}

impl FkMeta {
    pub fn is_empty(&self) -> bool {
        self.foreign_keys.is_empty() && self.referenced_by.is_empty()
    }
}

impl ForeignKey {
    /// The constraint as SHOW CREATE TABLE prints it (without indentation);
    /// `db` is the child's database (the parent's is printed only if it
    /// differs).
    pub fn to_sql(&self, db: &str) -> String {
        let q = |cols: &[String]| cols.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", ");
        let parent = if self.ref_db == db {
            quote_ident(&self.ref_table)
        } else {
            format!("{}.{}", quote_ident(&self.ref_db), quote_ident(&self.ref_table))
        };
        let mut s = format!(
            "CONSTRAINT {} FOREIGN KEY ({}) REFERENCES {} ({})",
            quote_ident(&self.name),
            q(&self.columns),
            parent,
            q(&self.ref_columns)
        );
        if self.on_delete != FkAction::NoAction {
            s.push_str(" ON DELETE ");
            s.push_str(self.on_delete.rule_name());
        }
        if self.on_update != FkAction::NoAction {
            s.push_str(" ON UPDATE ");
            s.push_str(self.on_update.rule_name());
        }
        s
    }

    /// The text inside the parentheses of 1451 / 1452.
    pub fn error_detail(&self, child_db: &str, child: &str) -> String {
        format!("{}.{}, {}", quote_ident(child_db), quote_ident(child), self.to_sql(child_db))
    }

    pub fn references(&self, db: &str, table: &str) -> bool {
        self.ref_db == db && self.ref_table == table
    }
}

// ---------------------------------------------------------------- errors

/// 1215 ER_CANNOT_ADD_FOREIGN.
pub fn cannot_add() -> SqlError {
    SqlError::new(1215, "HY000", "Cannot add foreign key constraint")
}

/// 1451 ER_ROW_IS_REFERENCED_2.
pub fn row_is_referenced(fk: &ForeignKey, child_db: &str, child: &str) -> SqlError {
    SqlError::new(
        1451,
        "23000",
        format!(
            "Cannot delete or update a parent row: a foreign key constraint fails ({})",
            fk.error_detail(child_db, child)
        ),
    )
}

/// 1452 ER_NO_REFERENCED_ROW_2.
pub fn no_referenced_row(fk: &ForeignKey, child_db: &str, child: &str) -> SqlError {
    SqlError::new(
        1452,
        "23000",
        format!(
            "Cannot add or update a child row: a foreign key constraint fails ({})",
            fk.error_detail(child_db, child)
        ),
    )
}

/// 1824 ER_FK_CANNOT_OPEN_PARENT.
pub fn cannot_open_parent(table: &str) -> SqlError {
    SqlError::new(1824, "HY000", format!("Failed to open the referenced table '{table}'"))
}

/// 3008 ER_FK_DEPTH_EXCEEDED.
pub fn depth_exceeded() -> SqlError {
    SqlError::new(3008, "HY000", format!("Foreign key cascade delete/update exceeds max depth of {MAX_CASCADE_DEPTH}."))
}

/// 3730 ER_FK_DROP_TABLE... : a DROP TABLE of a referenced parent.
pub fn drop_referenced(table: &str, r: &FkRef) -> SqlError {
    SqlError::new(
        3730,
        "HY000",
        format!(
            "Cannot drop table '{table}' referenced by a foreign key constraint '{}' on table '{}'.",
            r.name, r.table
        ),
    )
}

/// 1701 ER_TRUNCATE_ILLEGAL_FK.
pub fn truncate_referenced(r: &FkRef) -> SqlError {
    SqlError::new(
        1701,
        "42000",
        format!(
            "Cannot truncate a table referenced in a foreign key constraint ({}.{}, CONSTRAINT {})",
            quote_ident(&r.db),
            quote_ident(&r.table),
            quote_ident(&r.name)
        ),
    )
}

/// 1553 ER_DROP_INDEX_FK.
pub fn drop_index_needed(index: &str) -> SqlError {
    SqlError::new(1553, "HY000", format!("Cannot drop index '{index}': needed in a foreign key constraint"))
}

/// InnoDB's limit on nested cascades.
pub const MAX_CASCADE_DEPTH: usize = 15;

// ---------------------------------------------------------------- DDL

/// A FOREIGN KEY clause of CREATE / ALTER TABLE turned into a constraint.
/// `existing`: names of the table's generated constraints so far (for
/// `<table>_ibfk_<n>`). Returns the constraint and the name of the index
/// InnoDB would create for it if the child has none (None: named after the
/// first column).
pub fn from_ast(
    fk: &ForeignKeyConstraint,
    db: &str,
    table: &str,
    next_generated: &mut u32,
) -> Result<(ForeignKey, Option<String>), SqlError> {
    let name = match &fk.name {
        Some(n) => n.value.clone(),
        None => {
            *next_generated += 1;
            format!("{table}_ibfk_{}", *next_generated)
        }
    };
    crate::engine::ddl::check_name(&name, "constraint")?;
    let parts = crate::engine::ddl::ident_of(&fk.foreign_table);
    let (ref_db, ref_table) = match parts.as_slice() {
        [t] => (db.to_string(), t.clone()),
        [d, t] => (d.clone(), t.clone()),
        _ => return Err(crate::engine::error_map::wrong_table_name(&fk.foreign_table.to_string())),
    };
    let columns: Vec<String> = fk.columns.iter().map(|i| i.value.clone()).collect();
    let ref_columns: Vec<String> = fk.referred_columns.iter().map(|i| i.value.clone()).collect();
    if columns.len() != ref_columns.len() || columns.is_empty() {
        let shown = fk.name.as_ref().map(|n| n.value.as_str()).unwrap_or("foreign key without name");
        return Err(SqlError::new(
            1239,
            "42000",
            format!("Incorrect foreign key definition for '{shown}': Key reference and table reference don't match"),
        ));
    }
    let index_name = fk.name.as_ref().or(fk.index_name.as_ref()).map(|i| i.value.clone());
    Ok((
        ForeignKey {
            name,
            columns,
            ref_db,
            ref_table,
            ref_columns,
            on_delete: FkAction::from_ast(fk.on_delete)?,
            on_update: FkAction::from_ast(fk.on_update)?,
        },
        index_name,
    ))
}

/// Highest n of the `<table>_ibfk_<n>` names among `fks`.
pub fn max_generated(table: &str, fks: &[ForeignKey]) -> u32 {
    let prefix = format!("{}_ibfk_", table.to_lowercase());
    fks.iter().filter_map(|f| f.name.to_lowercase().strip_prefix(&prefix)?.parse::<u32>().ok()).max().unwrap_or(0)
}

/// True if an index of `indexes` starts with `cols` (in order): it can find
/// the rows of one key value.
pub fn has_leading_index(indexes: &[SqlIndexMeta], cols: &[String]) -> bool {
    indexes
        .iter()
        .any(|ix| ix.columns.len() >= cols.len() && ix.columns.iter().zip(cols).all(|(a, b)| a.eq_ignore_ascii_case(b)))
}

/// Child-side checks that need only the child: columns exist, are not
/// TEXT/BLOB, and are nullable where SET NULL is asked.
pub fn check_child_columns(fk: &ForeignKey, cols: &[(String, ColumnType, bool)]) -> Result<(), SqlError> {
    for c in &fk.columns {
        let Some((name, ty, nullable)) = cols.iter().find(|(n, _, _)| n.eq_ignore_ascii_case(c)) else {
            return Err(crate::engine::error_map::key_column_missing(c));
        };
        if matches!(ty, ColumnType::Text { .. } | ColumnType::Blob) {
            return Err(SqlError::new(
                1170,
                "42000",
                format!("BLOB/TEXT column '{name}' used in key specification without a key length"),
            ));
        }
        if !nullable && (fk.on_delete == FkAction::SetNull || fk.on_update == FkAction::SetNull) {
            return Err(SqlError::new(
                1830,
                "HY000",
                format!(
                    "Column '{name}' cannot be NOT NULL: needed in a foreign key constraint '{}' SET NULL",
                    fk.name
                ),
            ));
        }
    }
    Ok(())
}

/// Can a column of type `a` reference one of type `b`? As InnoDB: integers
/// of the same size and sign, decimals of the same precision and scale,
/// strings of either length in the same collation, the same temporal type.
fn compatible(a: &ColumnType, b: &ColumnType) -> bool {
    use ColumnType as T;
    match (a, b) {
        (T::Char { collation: x, .. } | T::Varchar { collation: x, .. }, T::Char { collation: y, .. })
        | (T::Char { collation: x, .. } | T::Varchar { collation: x, .. }, T::Varchar { collation: y, .. }) => x == y,
        (T::Binary { .. } | T::Varbinary { .. }, T::Binary { .. } | T::Varbinary { .. }) => true,
        _ => a == b,
    }
}

/// Which key of the parent the constraint uses.
#[derive(Debug, Clone, PartialEq)]
pub enum ParentKey {
    Primary,
    Unique(norr_signals::IndexId),
}

/// Check a constraint against its parent (which may be the child itself):
/// columns exist (3734), types match (3780), a PRIMARY or UNIQUE key is
/// exactly the referenced columns (1822 / 6125), no user partitioning (1506).
pub fn check_parent(
    fk: &ForeignKey,
    child_cols: &[(String, ColumnType, bool)],
    parent: &SqlTable,
) -> Result<ParentKey, SqlError> {
    if parent.meta.partition.is_some() {
        return Err(partitioned());
    }
    for (c, r) in fk.columns.iter().zip(&fk.ref_columns) {
        let Some((_, pc, _)) = parent.column(r) else {
            return Err(SqlError::new(
                3734,
                "HY000",
                format!(
                    "Failed to add the foreign key constraint. Missing column '{r}' for constraint '{}' in the referenced table '{}'",
                    fk.name, parent.name
                ),
            ));
        };
        let (cname, cty, _) = child_cols.iter().find(|(n, _, _)| n.eq_ignore_ascii_case(c)).expect("checked");
        if !compatible(cty, &pc.ty) {
            return Err(SqlError::new(
                3780,
                "HY000",
                format!(
                    "Referencing column '{cname}' and referenced column '{}' in foreign key constraint '{}' are incompatible.",
                    pc.name, fk.name
                ),
            ));
        }
    }
    parent_key(fk, parent).ok_or_else(|| {
        if has_leading_index(&parent.meta.indexes, &fk.ref_columns) {
            SqlError::new(
                6125,
                "HY000",
                format!(
                    "Failed to add the foreign key constraint. Missing unique key for constraint '{}' in the referenced table '{}'",
                    fk.name, parent.name
                ),
            )
        } else {
            SqlError::new(
                1822,
                "HY000",
                format!(
                    "Failed to add the foreign key constraint. Missing index for constraint '{}' in the referenced table '{}'",
                    fk.name, parent.name
                ),
            )
        }
    })
}

/// The parent's PRIMARY or UNIQUE key made of exactly the referenced columns.
pub fn parent_key(fk: &ForeignKey, parent: &SqlTable) -> Option<ParentKey> {
    let same = |cols: &[String]| {
        cols.len() == fk.ref_columns.len() && cols.iter().zip(&fk.ref_columns).all(|(a, b)| a.eq_ignore_ascii_case(b))
    };
    for ix in &parent.meta.indexes {
        if !same(&ix.columns) {
            continue;
        }
        match ix.kind {
            SqlIndexKind::Primary => return Some(ParentKey::Primary),
            SqlIndexKind::Unique => {
                let native = parent.def.indexes.iter().find(|n| n.name.eq_ignore_ascii_case(&ix.name))?;
                return Some(ParentKey::Unique(native.id));
            }
            SqlIndexKind::Index => {}
        }
    }
    None
}

/// 1506 ER_FOREIGN_KEY_ON_PARTITIONED.
pub fn partitioned() -> SqlError {
    SqlError::new(1506, "HY000", "Foreign keys are not yet supported in conjunction with partitioning")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fk(on_delete: FkAction, on_update: FkAction, ref_db: &str) -> ForeignKey {
        ForeignKey {
            name: "c_ibfk_1".into(),
            columns: vec!["a".into(), "b".into()],
            ref_db: ref_db.into(),
            ref_table: "p".into(),
            ref_columns: vec!["x".into(), "y".into()],
            on_delete,
            on_update,
        }
    }

    #[test]
    fn shows_as_mysql() {
        assert_eq!(
            fk(FkAction::NoAction, FkAction::NoAction, "d").to_sql("d"),
            "CONSTRAINT `c_ibfk_1` FOREIGN KEY (`a`, `b`) REFERENCES `p` (`x`, `y`)"
        );
        assert_eq!(
            fk(FkAction::Cascade, FkAction::SetNull, "o").to_sql("d"),
            "CONSTRAINT `c_ibfk_1` FOREIGN KEY (`a`, `b`) REFERENCES `o`.`p` (`x`, `y`) ON DELETE CASCADE ON UPDATE SET NULL"
        );
        assert_eq!(
            fk(FkAction::Restrict, FkAction::NoAction, "d").error_detail("d", "c"),
            "`d`.`c`, CONSTRAINT `c_ibfk_1` FOREIGN KEY (`a`, `b`) REFERENCES `p` (`x`, `y`) ON DELETE RESTRICT"
        );
    }

    #[test]
    fn generated_names_continue_after_the_highest() {
        let mut a = fk(FkAction::NoAction, FkAction::NoAction, "d");
        a.name = "c_ibfk_7".into();
        let mut b = a.clone();
        b.name = "other".into();
        assert_eq!(max_generated("c", &[a, b]), 7);
        assert_eq!(max_generated("c", &[]), 0);
    }

    #[test]
    fn type_compatibility() {
        use norr_signals::Collation;
        let int = ColumnType::Int { unsigned: false };
        assert!(compatible(&int, &int));
        assert!(!compatible(&int, &ColumnType::Int { unsigned: true }));
        assert!(!compatible(&int, &ColumnType::BigInt { unsigned: false }));
        let vc = |len, collation| ColumnType::Varchar { len, collation };
        assert!(compatible(&vc(10, Collation::Binary), &ColumnType::Char { len: 3, collation: Collation::Binary }));
        assert!(!compatible(&vc(10, Collation::Binary), &vc(10, Collation::CaseInsensitive)));
    }
}
