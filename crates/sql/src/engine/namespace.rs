//! Tables and views share one namespace per database (MySQL's rule: a name
//! is a table or a view, never both; 1050 otherwise).
//!
//! The two live in different places: a table is an object of the data
//! nodes' dictionary, a view a row of the native table `norr_sys/views`, and
//! no transaction spans both. So every statement that makes a name of one
//! kind (CREATE TABLE [LIKE | AS SELECT], CREATE VIEW, RENAME TABLE, ALTER
//! TABLE ... RENAME) follows one order:
//!
//! 1. look for the other kind under the name (the common refusal, cheap);
//! 2. make its own object;
//! 3. look for the other kind again, fresh from the data nodes, and if it
//!    is there now, undo step 2 and answer 1050.
//!
//! Two SQL nodes racing to make `db.x` as a table (T) and as a view (V)
//! cannot both succeed: each one's step-3 read comes after its own write,
//! so if T's read missed V, V was written after that read, hence after T
//! was made, and V's own step-3 read (after its write) finds T. Both may
//! fail (each sees the other before its undo); neither result is wrong.
//!
//! A SQL node that dies between steps 2 and 3 (or during an undo) may leave
//! both, and only when a statement of the other kind for the same name ran
//! on another node at that moment. The table then wins everywhere: every
//! statement resolves a name as a table first and looks for a view only
//! after 1146 (`view_expand`, `view_dml`), so no read or write goes through
//! the shadowed view. SHOW FULL TABLES lists both and DROP VIEW removes the
//! leftover row, so the state is visible and repaired by hand. Reserving the
//! name in one place first would close that window too, but needs a row per
//! table in `norr_sys/views` (or a dictionary object per view) kept in step
//! with every table DDL, which this does not add.

use crate::engine::{error_map, Engine};
use crate::types::SqlError;

/// Whether `db.name` is a view (a committed read of its row).
pub async fn is_view(e: &Engine, db: &str, name: &str) -> Result<bool, SqlError> {
    Ok(e.catalog().views()?.get(db, name).await?.is_some())
}

/// Whether `db.name` is a table, asked of the dictionary (not this SQL
/// node's cache, which may still hold a table another node dropped).
pub async fn is_table_fresh(e: &Engine, db: &str, name: &str) -> Result<bool, SqlError> {
    e.catalog().invalidate(db, name);
    Ok(e.catalog().try_get(db, name).await?.is_some())
}

/// Step 1 / 3 for a table name: 1050 if `db.name` is a view.
pub async fn refuse_view(e: &Engine, db: &str, name: &str) -> Result<(), SqlError> {
    if is_view(e, db, name).await? {
        return Err(error_map::table_exists(name));
    }
    Ok(())
}
