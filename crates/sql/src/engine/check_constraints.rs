//! CHECK constraints (MySQL 8.0.16+): `[CONSTRAINT [name]] CHECK (expr)
//! [[NOT] ENFORCED]`, on a column or on the table. Owner: query engineer.
//!
//! A constraint is a row expression, like a generated column's (the same
//! parser, scope and compiler: `generated::{parse, row_scope, compile}`).
//! Every writer completes a new row with `complete_row`: the generated
//! columns are computed first (a check may read them), then each enforced
//! constraint is evaluated over the row. A constraint is violated only when
//! it is FALSE; NULL passes, as in SQL. A violation is 3819, or under
//! INSERT IGNORE / UPDATE IGNORE a warning 3819 and the row is skipped.
//!
//! The writers are those `generated` lists; a table without enforced
//! constraints has `SqlTable::checks` None and they test only that.
//!
//! Names: a constraint without one is called `<table>_chk_<n>`. Names are
//! unique in a database (3822), checked against the catalog when a table
//! is created or altered; two SQL nodes creating the same name at the same
//! moment are not caught (no lock spans the check and the create).
//!
//! The metadata (`catalog::CheckConstraint`) is format 4 of `SqlTableMeta`.

use crate::engine::catalog::{expr_columns, quote_ident, CheckConstraint, SqlColumnMeta, SqlTable};
use crate::engine::expr::value::to_bool;
use crate::engine::expr::{eval, CExpr, EvalCtx};
use crate::engine::fk::{FkAction, ForeignKey};
use crate::engine::generated::{self, RowExprOwner};
use crate::engine::Engine;
use crate::types::SqlError;
use norr_signals::{ColumnDef, Value};
use sqlparser::ast::{self, BinaryOperator, Expr, UnaryOperator};

/// One enforced constraint, compiled over the table's row.
#[derive(Debug)]
struct Compiled {
    name: String,
    /// Compiled when the table is loaded. The DDL checked it, so an error
    /// here means metadata written by another version; writes report it.
    expr: Result<CExpr, SqlError>,
}

/// The enforced CHECK constraints of a table.
#[derive(Debug)]
pub struct Checks {
    list: Vec<Compiled>,
}

impl Checks {
    /// Compile the enforced constraints of a table; None if it has none.
    pub fn build(columns: &[ColumnDef], metas: &[SqlColumnMeta], defs: &[CheckConstraint]) -> Option<Checks> {
        if !defs.iter().any(|c| c.enforced) {
            return None;
        }
        let scope = generated::row_scope(columns, metas);
        let list = defs
            .iter()
            .filter(|c| c.enforced)
            .map(|c| Compiled {
                name: c.name.clone(),
                expr: generated::parse(&c.expr)
                    .and_then(|e| generated::compile(&e, &scope, RowExprOwner::Check(&c.name))),
            })
            .collect();
        Some(Checks { list })
    }

    /// 3819 for the first constraint `row` (a full row of the table) makes
    /// FALSE.
    pub fn verify(&self, row: &[Value], ctx: &mut EvalCtx<'_>) -> Result<(), SqlError> {
        for c in &self.list {
            let e = c.expr.as_ref().map_err(|e| e.clone())?;
            let v = eval(e, row, ctx)?;
            if to_bool(&v, &mut ctx.warnings) == Some(false) {
                return Err(violated(&c.name));
            }
        }
        Ok(())
    }
}

/// The last step of every write of a row of `t`: compute its generated
/// columns, then verify its CHECK constraints (`row_no` for messages).
pub fn complete_row(t: &SqlTable, row: &mut [Value], ctx: &mut EvalCtx<'_>, row_no: u64) -> Result<(), SqlError> {
    generated::fill(t, row, ctx, row_no)?;
    match &t.checks {
        Some(c) => c.verify(row, ctx),
        None => Ok(()),
    }
}

/// 3819 ER_CHECK_CONSTRAINT_VIOLATED.
pub fn violated(name: &str) -> SqlError {
    SqlError::new(3819, "HY000", format!("Check constraint '{name}' is violated."))
}

/// `complete_row` for a statement that may skip rows: under IGNORE a
/// violated constraint becomes warning 3819 and Ok(false) (skip the row).
pub fn complete_row_or_skip(
    t: &SqlTable,
    row: &mut [Value],
    ctx: &mut EvalCtx<'_>,
    row_no: u64,
    ignore: bool,
) -> Result<bool, SqlError> {
    match complete_row(t, row, ctx, row_no) {
        Ok(()) => Ok(true),
        Err(e) if ignore && e.code == 3819 => {
            ctx.warnings.push(e.code, e.message);
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// A constraint as SHOW CREATE TABLE prints it (MySQL's form, re-executable).
pub fn to_sql(c: &CheckConstraint) -> String {
    let mut s = format!("CONSTRAINT {} CHECK ({})", quote_ident(&c.name), c.expr);
    if !c.enforced {
        s.push_str(" /*!80016 NOT ENFORCED */");
    }
    s
}

// ---------------------------------------------------------------- DDL

/// A constraint as a CREATE / ALTER TABLE statement declares it.
pub struct Declared<'a> {
    pub name: Option<String>,
    pub expr: &'a Expr,
    pub enforced: bool,
    /// The column a column-level constraint is declared on.
    pub column: Option<String>,
}

impl<'a> Declared<'a> {
    /// `[CONSTRAINT name] CHECK (...)` at table level.
    pub fn table_level(c: &'a ast::CheckConstraint) -> Declared<'a> {
        Declared {
            name: c.name.as_ref().map(|n| n.value.clone()),
            expr: &c.expr,
            enforced: c.enforced != Some(false),
            column: None,
        }
    }
    /// `col type [CONSTRAINT name] CHECK (...)`.
    pub fn column_level(column: &str, name: Option<&ast::Ident>, c: &'a ast::CheckConstraint) -> Declared<'a> {
        Declared {
            name: name.or(c.name.as_ref()).map(|n| n.value.clone()),
            expr: &c.expr,
            enforced: c.enforced != Some(false),
            column: Some(column.to_string()),
        }
    }
}

/// The number n of a generated name `<table>_chk_<n>`.
fn generated_number(name: &str, table: &str) -> Option<u32> {
    let prefix = format!("{}_chk_", table.to_lowercase());
    let lower = name.to_lowercase();
    let digits = lower.strip_prefix(&prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// MySQL's checks of the constraints of table `table` (`columns` / `metas`:
/// its columns, the hidden primary key included or not; `fks`: its foreign
/// keys): names (3822 for a repeat in the table), functions (3814 / 3815),
/// variables (3816), columns (3820 unknown, 3813 another column from a
/// column-level constraint, 3818 AUTO_INCREMENT, 3823 changed by a foreign
/// key's action), and a condition that is not boolean (3812). Gives the
/// constraints in canonical form, sorted by name.
pub fn define(
    table: &str,
    columns: &[ColumnDef],
    metas: &[SqlColumnMeta],
    fks: &[ForeignKey],
    declared: &[Declared<'_>],
) -> Result<Vec<CheckConstraint>, SqlError> {
    let mut next =
        declared.iter().filter_map(|d| d.name.as_deref().and_then(|n| generated_number(n, table))).max().unwrap_or(0);
    let scope = generated::row_scope(columns, metas);
    let mut out: Vec<CheckConstraint> = Vec::with_capacity(declared.len());
    for d in declared {
        let name = match &d.name {
            Some(n) => n.clone(),
            None => {
                next += 1;
                format!("{table}_chk_{next}")
            }
        };
        crate::engine::ddl::check_name(&name, "constraint")?;
        if out.iter().any(|c| c.name.eq_ignore_ascii_case(&name)) {
            return Err(dup_name(&name));
        }
        generated::disallowed_functions(d.expr, RowExprOwner::Check(&name))?;
        let text = generated::canonical(d.expr);
        let parsed = generated::parse(&text)?;
        // `@x` / `@@x` are variables (3816, from `compile`), not columns.
        for col in expr_columns(&text).into_iter().filter(|c| !c.starts_with('@')) {
            let Some(i) = columns.iter().zip(metas).position(|(c, m)| !m.hidden && c.name.eq_ignore_ascii_case(&col))
            else {
                return Err(SqlError::new(
                    3820,
                    "HY000",
                    format!("Check constraint '{name}' refers to non-existing column '{col}'."),
                ));
            };
            if d.column.as_deref().is_some_and(|own| !own.eq_ignore_ascii_case(&col)) {
                return Err(SqlError::new(
                    3813,
                    "HY000",
                    format!("Column check constraint '{name}' references other column."),
                ));
            }
            if columns[i].auto_increment {
                return Err(SqlError::new(
                    3818,
                    "HY000",
                    format!("Check constraint '{name}' cannot refer to an auto-increment column."),
                ));
            }
            if let Some(f) =
                fks.iter().find(|f| changes_columns(f) && f.columns.iter().any(|c| c.eq_ignore_ascii_case(&col)))
            {
                return Err(fk_action_column(&columns[i].name, &name, &f.name));
            }
        }
        if !is_boolean(&parsed) {
            return Err(SqlError::new(
                3812,
                "HY000",
                format!("An expression of non-boolean type specified to a check constraint '{name}'."),
            ));
        }
        generated::compile(&parsed, &scope, RowExprOwner::Check(&name))?;
        out.push(CheckConstraint { name, expr: text, enforced: d.enforced });
    }
    sort(&mut out);
    Ok(out)
}

/// SHOW CREATE TABLE's order.
fn sort(checks: &mut [CheckConstraint]) {
    checks.sort_by_key(|c| c.name.to_lowercase());
}

/// 3822 ER_CHECK_CONSTRAINT_DUP_NAME.
fn dup_name(name: &str) -> SqlError {
    SqlError::new(3822, "HY000", format!("Duplicate check constraint name '{name}'."))
}

/// A foreign key whose referential action writes the child's columns:
/// those columns may not be read by a CHECK constraint (3823), MySQL's rule.
fn changes_columns(f: &ForeignKey) -> bool {
    !matches!(f.on_update, FkAction::NoAction | FkAction::Restrict) || f.on_delete == FkAction::SetNull
}

/// 3823 ER_CHECK_CONSTRAINT_CLAUSE_USING_FK_REFER_ACTION_COLUMN.
pub fn fk_action_column(column: &str, check: &str, fk: &str) -> SqlError {
    SqlError::new(
        3823,
        "HY000",
        format!("Column '{column}' cannot be used in a check constraint '{check}': needed in a foreign key constraint '{fk}' referential action."),
    )
}

/// The foreign-key side of 3823: a new foreign key `f` with a referential
/// action on columns a constraint of the table reads.
pub fn check_fk_columns(checks: &[CheckConstraint], f: &ForeignKey) -> Result<(), SqlError> {
    if !changes_columns(f) {
        return Ok(());
    }
    for c in checks {
        for col in expr_columns(&c.expr) {
            if let Some(fc) = f.columns.iter().find(|fc| fc.eq_ignore_ascii_case(&col)) {
                return Err(fk_action_column(fc, &c.name, &f.name));
            }
        }
    }
    Ok(())
}

/// A condition MySQL takes as boolean. Functions are taken (their type is
/// not known here); column references, literals other than TRUE / FALSE,
/// arithmetic and CAST are not (3812).
fn is_boolean(e: &Expr) -> bool {
    match e {
        Expr::Nested(inner) => is_boolean(inner),
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Cast { .. } => false,
        Expr::Value(v) => matches!(v.value, ast::Value::Boolean(_)),
        Expr::UnaryOp { op, .. } => matches!(op, UnaryOperator::Not),
        Expr::BinaryOp { op, .. } => matches!(
            op,
            BinaryOperator::Eq
                | BinaryOperator::NotEq
                | BinaryOperator::Lt
                | BinaryOperator::LtEq
                | BinaryOperator::Gt
                | BinaryOperator::GtEq
                | BinaryOperator::Spaceship
                | BinaryOperator::And
                | BinaryOperator::Or
                | BinaryOperator::Xor
        ),
        _ => true,
    }
}

/// 3822 if another table of `db` (not `table`) has a constraint named as
/// one of `checks`.
pub async fn check_unique_in_db(e: &Engine, db: &str, table: &str, checks: &[CheckConstraint]) -> Result<(), SqlError> {
    if checks.is_empty() {
        return Ok(());
    }
    for other in e.catalog().list(db).await? {
        if other.name.eq_ignore_ascii_case(table) {
            continue;
        }
        for c in checks {
            if other.meta.checks.iter().any(|o| o.name.eq_ignore_ascii_case(&c.name)) {
                return Err(dup_name(&c.name));
            }
        }
    }
    Ok(())
}

/// A table renamed from `old` to `new` takes its generated constraint
/// names along (`old_chk_2` -> `new_chk_2`), as MySQL does: the new name
/// of constraint `name`, if it is a generated one.
pub fn renamed_generated(name: &str, old: &str, new: &str) -> Option<String> {
    generated_number(name, old).map(|n| format!("{new}_chk_{n}"))
}

/// `renamed_generated` over a table's constraints, kept sorted.
pub fn rename_generated(checks: &mut [CheckConstraint], old: &str, new: &str) {
    for c in checks.iter_mut() {
        if let Some(n) = renamed_generated(&c.name, old, new) {
            c.name = n;
        }
    }
    sort(checks);
}

/// 3959 ER_DEPENDENT_BY_CHECK_CONSTRAINT: a constraint kept by an ALTER
/// reads an old column that the new table no longer has by that name
/// (dropped or renamed). `kept_cols`: the new table's column names.
pub fn check_dependencies(
    checks: &[CheckConstraint],
    old_cols: &[String],
    kept_cols: &[String],
) -> Result<(), SqlError> {
    for c in checks {
        for col in expr_columns(&c.expr) {
            let gone = old_cols.iter().any(|o| o.eq_ignore_ascii_case(&col))
                && !kept_cols.iter().any(|k| k.eq_ignore_ascii_case(&col));
            if gone {
                return Err(SqlError::new(
                    3959,
                    "HY000",
                    format!(
                        "Check constraint '{}' uses column '{col}', hence column cannot be dropped or renamed.",
                        c.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use norr_signals::ColumnType;

    fn cols() -> (Vec<ColumnDef>, Vec<SqlColumnMeta>) {
        let mut id = ColumnDef::new("id", ColumnType::Int { unsigned: false });
        id.auto_increment = true;
        let a = ColumnDef::new("a", ColumnType::Int { unsigned: false });
        let b = ColumnDef::new("b", ColumnType::Int { unsigned: false });
        let metas = ["int", "int", "int"]
            .iter()
            .map(|t| SqlColumnMeta {
                sql_type: t.to_string(),
                fsp: 0,
                default: crate::engine::catalog::SqlDefault::None,
                on_update_now: false,
                comment: String::new(),
                collation: None,
                hidden: false,
            })
            .collect();
        (vec![id, a, b], metas)
    }

    fn define_one(sql: &str, column: Option<&str>) -> Result<Vec<CheckConstraint>, (u16, String)> {
        let e = generated::parse(sql).expect("parses");
        let (c, m) = cols();
        let d = Declared { name: None, expr: &e, enforced: true, column: column.map(String::from) };
        define("t", &c, &m, &[], &[d]).map_err(|e| (e.code, e.message))
    }

    #[test]
    fn definitions_get_mysqls_errors() {
        let ok = define_one("a > 0 AND b <> a", None).expect("valid");
        assert_eq!(ok[0].name, "t_chk_1");
        assert_eq!(ok[0].expr, "((`a` > 0) AND (`b` <> `a`))");
        assert_eq!(define_one("c > 0", None).unwrap_err().0, 3820);
        assert_eq!(define_one("b > 0", Some("a")).unwrap_err().0, 3813);
        assert!(define_one("a > 0", Some("a")).is_ok());
        assert_eq!(define_one("id > 0", None).unwrap_err().0, 3818);
        assert_eq!(define_one("a > RAND()", None).unwrap_err().0, 3814);
        assert_eq!(define_one("a > (SELECT 1)", None).unwrap_err().0, 3815);
        assert_eq!(define_one("a > @x", None).unwrap_err().0, 3816);
        assert_eq!(define_one("a + 1", None).unwrap_err().0, 3812);
        assert_eq!(define_one("a", None).unwrap_err().0, 3812);
        assert!(define_one("a IS NOT NULL", None).is_ok());
        assert!(define_one("a IN (1, 2)", None).is_ok());
        assert!(define_one("JSON_VALID(b)", None).is_ok());
    }

    #[test]
    fn names_are_numbered_sorted_and_renamed() {
        let (c, m) = cols();
        let e1 = generated::parse("a > 0").unwrap();
        let e2 = generated::parse("b > 0").unwrap();
        let d =
            |name: Option<&str>, e| Declared { name: name.map(String::from), expr: e, enforced: true, column: None };
        let mut got = define("t", &c, &m, &[], &[d(None, &e1), d(Some("a_first"), &e2), d(None, &e2)]).unwrap();
        let names: Vec<&str> = got.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a_first", "t_chk_1", "t_chk_2"]);
        // ALTER ... ADD CHECK continues after the highest generated number.
        let more = define("t", &c, &m, &[], &[d(Some("t_chk_7"), &e1), d(None, &e2)]).unwrap();
        assert_eq!(more[1].name, "t_chk_8");
        let err = define("t", &c, &m, &[], &[d(Some("x"), &e1), d(Some("X"), &e2)]).unwrap_err();
        assert_eq!(err.code, 3822);
        rename_generated(&mut got, "t", "u");
        let names: Vec<&str> = got.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a_first", "u_chk_1", "u_chk_2"]);
    }

    #[test]
    fn dropped_or_renamed_columns_are_refused_while_a_check_reads_them() {
        let checks = vec![CheckConstraint { name: "t_chk_1".into(), expr: "(`a` > 0)".into(), enforced: true }];
        let old = vec!["a".to_string(), "b".to_string()];
        assert!(check_dependencies(&checks, &old, &["A".into(), "c".into()]).is_ok());
        let err = check_dependencies(&checks, &old, &["b".into(), "z".into()]).unwrap_err();
        assert_eq!(err.code, 3959);
        assert_eq!(
            err.message,
            "Check constraint 't_chk_1' uses column 'a', hence column cannot be dropped or renamed."
        );
    }

    #[test]
    fn not_enforced_is_printed_as_mysql_prints_it() {
        let c = CheckConstraint { name: "t_chk_1".into(), expr: "(`a` > 0)".into(), enforced: false };
        assert_eq!(to_sql(&c), "CONSTRAINT `t_chk_1` CHECK ((`a` > 0)) /*!80016 NOT ENFORCED */");
    }
}
