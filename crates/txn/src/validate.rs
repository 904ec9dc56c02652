//! Checks DICT runs on table and index definitions before accepting them. The
//! messages name the offending part so the user can fix the definition.

use norr_signals::api::ColumnSource;
use norr_signals::coerce::coerce_value;
use norr_signals::schema::{
    ColumnId, IndexDef, IndexKind, PartitionScheme, TableDef, MAX_COLUMNS, MAX_KEY_COLUMNS, MAX_NAME_LEN,
    MAX_PARTITIONS,
};
use norr_signals::value::{ColumnType, MAX_CHAR_LEN, MAX_DECIMAL_PRECISION, MAX_VARCHAR_LEN};
use std::collections::BTreeSet;

fn check_name(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!("{what} name '{name}' must be 1..={MAX_NAME_LEN} bytes"));
    }
    Ok(())
}

fn check_type(col: &str, ty: &ColumnType) -> Result<(), String> {
    match ty {
        ColumnType::Decimal { precision, scale }
            if *precision == 0 || *precision > MAX_DECIMAL_PRECISION || scale > precision =>
        {
            return Err(format!(
                "column {col}: DECIMAL({precision},{scale}) needs precision 1..={MAX_DECIMAL_PRECISION} and scale <= precision"
            ));
        }
        ColumnType::Char { len, .. } | ColumnType::Binary { len } if *len > MAX_CHAR_LEN => {
            return Err(format!("column {col}: length {len} exceeds {MAX_CHAR_LEN}"));
        }
        ColumnType::Varchar { len, .. } | ColumnType::Varbinary { len } if *len > MAX_VARCHAR_LEN => {
            return Err(format!("column {col}: length {len} exceeds {MAX_VARCHAR_LEN}"));
        }
        _ => {}
    }
    Ok(())
}

pub fn validate_index(def: &TableDef, idx: &IndexDef) -> Result<(), String> {
    check_name("index", &idx.name)?;
    if idx.columns.is_empty() || idx.columns.len() > MAX_KEY_COLUMNS {
        return Err(format!("index {}: needs 1..={MAX_KEY_COLUMNS} columns", idx.name));
    }
    let mut seen = BTreeSet::new();
    for c in &idx.columns {
        if def.column(*c).is_none() {
            return Err(format!("index {}: no column id {c}", idx.name));
        }
        if !seen.insert(*c) {
            return Err(format!("index {}: column id {c} listed twice", idx.name));
        }
    }
    if idx.kind == IndexKind::UniqueHash && !idx.unique {
        return Err(format!("index {}: a hash index must be unique", idx.name));
    }
    Ok(())
}

pub fn validate_table(def: &TableDef) -> Result<(), String> {
    check_name("table", &def.name)?;
    if def.columns.is_empty() || def.columns.len() > MAX_COLUMNS {
        return Err(format!("a table needs 1..={MAX_COLUMNS} columns"));
    }
    let mut names = BTreeSet::new();
    let mut auto_inc = 0;
    for c in &def.columns {
        check_name("column", &c.name)?;
        if !names.insert(c.name.to_ascii_lowercase()) {
            return Err(format!("column {} defined twice", c.name));
        }
        check_type(&c.name, &c.ty)?;
        if c.auto_increment {
            auto_inc += 1;
            if c.ty.int_range().is_none() {
                return Err(format!("column {}: AUTO_INCREMENT needs an integer type", c.name));
            }
        }
        if let Some(d) = &c.default {
            coerce_value(d.clone(), &c.ty, c.nullable).map_err(|e| format!("column {}: bad default: {e}", c.name))?;
        }
    }
    if auto_inc > 1 {
        return Err("at most one AUTO_INCREMENT column".into());
    }
    if def.primary_key.is_empty() || def.primary_key.len() > MAX_KEY_COLUMNS {
        return Err(format!("the primary key needs 1..={MAX_KEY_COLUMNS} columns"));
    }
    let mut pk = BTreeSet::new();
    for c in &def.primary_key {
        let col = def.column(*c).ok_or_else(|| format!("primary key: no column id {c}"))?;
        if col.nullable {
            return Err(format!("primary key column {} must be NOT NULL", col.name));
        }
        if !pk.insert(*c) {
            return Err(format!("primary key lists column {} twice", col.name));
        }
    }
    if def.partitions == 0 || def.partitions > MAX_PARTITIONS {
        return Err(format!("partitions must be 1..={MAX_PARTITIONS}"));
    }
    if let PartitionScheme::Key { columns } = &def.partitioning {
        if let Some(c) = columns.iter().find(|c| !pk.contains(c)) {
            return Err(format!("partition key column id {c} is not part of the primary key"));
        }
    }
    let mut inames = BTreeSet::new();
    for idx in &def.indexes {
        validate_index(def, idx)?;
        if !inames.insert(idx.name.to_ascii_lowercase()) {
            return Err(format!("index {} defined twice", idx.name));
        }
    }
    Ok(())
}

/// Checks of an ALTER TABLE (`DictOp::AlterTable`) beyond `validate_table`
/// of the new definition: the column sources are sound, and every row keeps
/// its primary-key encoding and its partition (the rebuild keeps each row in
/// its partition, and locks and TC routing are keyed by the encoded key).
pub fn validate_alter(old: &TableDef, new: &TableDef, sources: &[ColumnSource]) -> Result<(), String> {
    if sources.len() != new.columns.len() {
        return Err(format!("{} column sources for {} columns", sources.len(), new.columns.len()));
    }
    let mut used = BTreeSet::new();
    for (i, s) in sources.iter().enumerate() {
        match s {
            ColumnSource::Old(c) => {
                let Some(oc) = old.column(*c) else {
                    return Err(format!("column {}: source column id {c} does not exist", new.columns[i].name));
                };
                if !used.insert(*c) {
                    return Err(format!("column id {c} is the source of two columns"));
                }
                if new.columns[i].auto_increment && !oc.auto_increment {
                    // DICT's counter knows nothing of the values already there.
                    return Err(format!("column {}: AUTO_INCREMENT cannot be added to a column", oc.name));
                }
            }
            ColumnSource::Value(_) if new.columns[i].auto_increment => {
                return Err(format!("column {}: an added column cannot be AUTO_INCREMENT", new.columns[i].name));
            }
            // NULL for a NOT NULL column fails on the first row, if any (a
            // NOT NULL date column added without a default, as MySQL).
            ColumnSource::Value(v) if !v.is_null() => {
                let c = &new.columns[i];
                coerce_value(v.clone(), &c.ty, c.nullable).map_err(|e| format!("column {}: {}", c.name, e.message))?;
            }
            ColumnSource::Value(_) => {}
        }
    }
    let old_of = |new_col: ColumnId| match sources.get(new_col as usize) {
        Some(ColumnSource::Old(c)) => Some(*c),
        _ => None,
    };
    let same_key = |new_cols: &[ColumnId], old_cols: &[ColumnId]| {
        new_cols.len() == old_cols.len()
            && new_cols
                .iter()
                .zip(old_cols)
                .all(|(n, o)| old_of(*n) == Some(*o) && new.column(*n).map(|c| &c.ty) == old.column(*o).map(|c| &c.ty))
    };
    if !same_key(&new.primary_key, &old.primary_key) {
        return Err("ALTER TABLE cannot change the primary key's columns or their types".into());
    }
    let same_partitioning = match (&old.partitioning, &new.partitioning) {
        (PartitionScheme::User, PartitionScheme::User) => true,
        (PartitionScheme::Key { columns: o }, PartitionScheme::Key { columns: n }) => same_key(n, o),
        _ => false,
    };
    if !same_partitioning || old.partitions != new.partitions {
        return Err("ALTER TABLE cannot change the partitioning".into());
    }
    Ok(())
}
