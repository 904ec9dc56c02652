use super::*;

fn c(f: Func, args: Vec<Value>) -> Value {
    let mut ctx = EvalCtx::new(&[]);
    call(f, args, &mut ctx).unwrap()
}
fn s(x: &str) -> Value {
    Value::str(x)
}

#[test]
fn string_functions() {
    assert_eq!(c(Func::Concat, vec![s("a"), Value::Int(1), s("b")]), s("a1b"));
    assert_eq!(c(Func::Concat, vec![s("a"), Value::Null]), Value::Null);
    assert_eq!(c(Func::ConcatWs, vec![s(","), s("a"), Value::Null, s("b")]), s("a,b"));
    assert_eq!(c(Func::Substring, vec![s("Quadratically"), Value::Int(5)]), s("ratically"));
    assert_eq!(c(Func::Substring, vec![s("Sakila"), Value::Int(-3)]), s("ila"));
    assert_eq!(c(Func::Substring, vec![s("Quadratically"), Value::Int(5), Value::Int(6)]), s("ratica"));
    assert_eq!(c(Func::Length, vec![s("åä")]), Value::Int(4));
    assert_eq!(c(Func::CharLength, vec![s("åä")]), Value::Int(2));
    assert_eq!(c(Func::LPad, vec![s("hi"), Value::Int(4), s("??")]), s("??hi"));
    assert_eq!(c(Func::RPad, vec![s("hi"), Value::Int(5), s("?")]), s("hi???"));
    assert_eq!(c(Func::LPad, vec![s("hello"), Value::Int(2), s("?")]), s("he"));
    assert_eq!(c(Func::Locate, vec![s("bar"), s("foobarbar")]), Value::Int(4));
    assert_eq!(c(Func::Locate, vec![s("bar"), s("foobarbar"), Value::Int(5)]), Value::Int(7));
    assert_eq!(c(Func::Instr, vec![s("foobarbar"), s("BAR")]), Value::Int(4));
    assert_eq!(c(Func::Left, vec![s("foobar"), Value::Int(3)]), s("foo"));
    assert_eq!(c(Func::Right, vec![s("foobar"), Value::Int(2)]), s("ar"));
    assert_eq!(c(Func::Replace, vec![s("www.mysql.com"), s("w"), s("Ww")]), s("WwWwWw.mysql.com"));
    assert_eq!(c(Func::Trim, vec![s("  x  ")]), s("x"));
}

#[test]
fn numeric_functions() {
    assert_eq!(c(Func::Abs, vec![Value::Int(-3)]), Value::Int(3));
    assert_eq!(c(Func::Round, vec![Value::Double(2.5)]), Value::Double(3.0));
    assert_eq!(c(Func::Round, vec![Value::Decimal(Decimal { mantissa: -25, scale: 1 })]), Value::Int(-3));
    assert_eq!(
        c(Func::Round, vec![Value::Decimal(Decimal { mantissa: 12345, scale: 3 }), Value::Int(1)]),
        Value::Decimal(Decimal { mantissa: 123, scale: 1 })
    );
    assert_eq!(c(Func::Round, vec![Value::Int(1250), Value::Int(-2)]), Value::Int(1300));
    assert_eq!(c(Func::Floor, vec![Value::Decimal(Decimal { mantissa: -15, scale: 1 })]), Value::Int(-2));
    assert_eq!(c(Func::Ceil, vec![Value::Decimal(Decimal { mantissa: 11, scale: 1 })]), Value::Int(2));
    assert_eq!(c(Func::Mod, vec![Value::Int(10), Value::Int(3)]), Value::Int(1));
    assert_eq!(c(Func::Mod, vec![Value::Int(10), Value::Int(0)]), Value::Null);
    assert_eq!(c(Func::Greatest, vec![Value::Int(2), Value::Int(7), Value::Int(3)]), Value::Int(7));
    assert_eq!(c(Func::Least, vec![s("b"), s("A")]), s("A"));
    assert_eq!(c(Func::Greatest, vec![Value::Int(2), Value::Null]), Value::Null);
}

#[test]
fn date_functions() {
    let d = s("2024-02-28");
    assert_eq!(c(Func::Year, vec![d.clone()]), Value::Int(2024));
    assert_eq!(c(Func::Month, vec![d.clone()]), Value::Int(2));
    assert_eq!(c(Func::Day, vec![d.clone()]), Value::Int(28));
    assert_eq!(
        c(Func::DateAdd, vec![d.clone(), Value::Int(2), Value::Int(4)]),
        Value::Date(Date { year: 2024, month: 3, day: 1 })
    );
    assert_eq!(c(Func::DateDiff, vec![s("2024-03-01"), d.clone()]), Value::Int(2));
    assert_eq!(c(Func::UnixTimestamp, vec![s("1970-01-02 00:00:00")]), Value::Int(86400));
    assert_eq!(
        c(Func::FromUnixtime, vec![Value::Int(86400)]),
        Value::DateTime(DateTime {
            date: Date { year: 1970, month: 1, day: 2 },
            hour: 0,
            minute: 0,
            second: 0,
            micro: 0
        })
    );
    assert_eq!(c(Func::DateFormat, vec![d, s("%d/%m/%Y")]), s("28/02/2024"));
    assert_eq!(c(Func::DayOfWeek, vec![s("2026-11-22")]), Value::Int(1)); // Sunday
}

#[test]
fn casts() {
    assert_eq!(c(Func::CastSigned, vec![s("12abc")]), Value::Int(12));
    assert_eq!(c(Func::CastUnsigned, vec![Value::Int(-1)]), Value::UInt(u64::MAX));
    assert_eq!(
        c(Func::CastDecimal, vec![s("3.14159"), Value::Int(5), Value::Int(2)]),
        Value::Decimal(Decimal { mantissa: 314, scale: 2 })
    );
    assert_eq!(c(Func::CastDate, vec![s("2024-01-02 10:00:00")]), Value::Date(Date { year: 2024, month: 1, day: 2 }));
}

/// JSON_ARRAYAGG / JSON_OBJECTAGG fold the rows' one-element JSON_ARRAY /
/// JSON_OBJECT arguments (see `AggKind::JsonArrayAgg`).
#[test]
fn json_aggregates() {
    use crate::engine::exec::{agg_final, agg_init, agg_step};
    use crate::engine::expr::compile::{agg_result_type, AggKind, AggSpec};
    use crate::engine::expr::{CExpr, SqlType, TClass};
    let spec = |kind| AggSpec {
        kind,
        arg: Some(CExpr::Col(0)),
        distinct: false,
        coll: vals::Coll::Bin,
        ty: agg_result_type(kind, SqlType::new(TClass::Str)),
        order: vec![],
        separator: vec![],
    };
    let fold = |kind, rows: Vec<Vec<Value>>| -> Result<Value, SqlError> {
        let a = spec(kind);
        let mut st = agg_init(&a);
        let mut ctx = EvalCtx::new(&[]);
        for r in rows {
            // The wrapped argument, as the compiler builds it (mask 0b10: the
            // value is a JSON document, 0: a plain SQL value).
            let f = if kind == AggKind::JsonArrayAgg { Func::JsonArray } else { Func::JsonObject };
            let v = call(f, r, &mut ctx)?;
            agg_step(&mut st, &a, Some(v), &[], &mut ctx)?;
        }
        Ok(agg_final(st, &a))
    };
    assert!(spec(AggKind::JsonArrayAgg).ty.json);
    // No rows: NULL, not [] or {}.
    assert_eq!(fold(AggKind::JsonArrayAgg, vec![]).unwrap(), Value::Null);
    assert_eq!(fold(AggKind::JsonObjectAgg, vec![]).unwrap(), Value::Null);
    // NULL rows are kept as null; JSON text nests when flagged as JSON.
    let arr = fold(
        AggKind::JsonArrayAgg,
        vec![
            vec![Value::Int(1), Value::UInt(0)],
            vec![Value::Null, Value::UInt(0)],
            vec![s("[true, {\"k\": null}]"), Value::UInt(1)],
            vec![s("[true]"), Value::UInt(0)],
        ],
    )
    .unwrap();
    assert_eq!(arr, s(r#"[1, null, [true, {"k": null}], "[true]"]"#));
    // Duplicate keys: the last value wins; keys in MySQL's order.
    let obj = fold(
        AggKind::JsonObjectAgg,
        vec![
            vec![s("bb"), Value::Int(1), Value::UInt(0)],
            vec![Value::Int(7), s("{\"z\": 1}"), Value::UInt(0b10)],
            vec![s("bb"), Value::Null, Value::UInt(0)],
        ],
    )
    .unwrap();
    assert_eq!(obj, s(r#"{"7": {"z": 1}, "bb": null}"#));
    // A NULL key: 3158, from the wrapped JSON_OBJECT.
    let e = fold(AggKind::JsonObjectAgg, vec![vec![Value::Null, Value::Int(1), Value::UInt(0)]]).unwrap_err();
    assert_eq!(e.code, 3158);
}

/// Issue 22 case 2: every function that builds a string or JSON value stops
/// at max_allowed_packet: NULL and warning 1301, decided before the result
/// is allocated (a size far past memory must answer at once).
#[test]
fn built_strings_stop_at_max_allowed_packet() {
    let small = |f: Func, args: Vec<Value>| -> (Value, Vec<u16>) {
        let mut ctx = EvalCtx::new(&[]);
        ctx.max_packet = 100;
        let v = call(f, args, &mut ctx).unwrap();
        (v, ctx.warnings.list.iter().map(|w| w.code).collect())
    };
    let i = Value::Int;
    let x100 = s(&"x".repeat(100));
    for (f, args) in [
        (Func::LPad, vec![s("x"), i(1_000_000_000_000), s("y")]),
        (Func::RPad, vec![s("x"), i(101), s("y")]),
        (Func::Repeat, vec![s("ab"), i(51)]),
        (Func::Repeat, vec![s("ab"), i(i64::MAX)]),
        (Func::Space, vec![i(101)]),
        (Func::Concat, vec![x100.clone(), s("y")]),
        (Func::ConcatWs, vec![s(","), x100.clone(), s("y")]),
        (Func::Replace, vec![x100.clone(), s("x"), s("yy")]),
        (Func::Insert, vec![x100.clone(), i(1), i(0), s("y")]),
        (Func::Hex, vec![s(&"x".repeat(51))]),
        (Func::ToBase64, vec![s(&"x".repeat(76))]),
        (Func::JsonArray, vec![x100.clone(), Value::UInt(0)]),
    ] {
        let (v, w) = small(f, args);
        assert_eq!(v, Value::Null, "{f:?}");
        assert_eq!(w, vec![1301], "{f:?}");
    }
    // At the limit exactly: built.
    assert_eq!(small(Func::Repeat, vec![s("ab"), i(50)]).0, s(&"ab".repeat(50)));
    assert_eq!(small(Func::LPad, vec![s("x"), i(100), s("yz")]).0.as_bytes().map(|b| b.len()), Some(100));
    assert_eq!(small(Func::Concat, vec![s(&"x".repeat(99)), s("y")]).1, Vec::<u16>::new());
    // The message names the function and the limit, as MySQL's.
    let mut ctx = EvalCtx::new(&[]);
    ctx.max_packet = 100;
    call(Func::Repeat, vec![s("ab"), i(51)], &mut ctx).unwrap();
    assert_eq!(ctx.warnings.list[0].message, "Result of repeat() was larger than max_allowed_packet (100) - truncated");
}

/// GROUP_CONCAT stops at group_concat_max_len (warning 1260), and without
/// ORDER BY does not keep the pieces past it.
#[test]
fn group_concat_is_cut_at_group_concat_max_len() {
    use crate::engine::exec::{agg_final, agg_init, agg_step, AggState};
    use crate::engine::expr::compile::{AggKind, AggSpec};
    use crate::engine::expr::{CExpr, SqlType, TClass};
    let a = AggSpec {
        kind: AggKind::GroupConcat,
        arg: Some(CExpr::Col(0)),
        distinct: false,
        coll: vals::Coll::Bin,
        ty: SqlType::new(TClass::Str),
        order: vec![],
        separator: b",".to_vec(),
    };
    let mut st = agg_init(&a);
    let mut ctx = EvalCtx::new(&[]);
    ctx.group_concat_max_len = 10;
    for _ in 0..1000 {
        agg_step(&mut st, &a, Some(s("abcd")), &[], &mut ctx).unwrap();
    }
    let AggState::Concat(items, _) = &st else { panic!("not a GROUP_CONCAT state") };
    assert!(items.len() <= 3, "kept {} pieces", items.len());
    assert_eq!(ctx.warnings.list.iter().map(|w| w.code).collect::<Vec<_>>(), vec![1260]);
    assert_eq!(agg_final(st, &a), s("abcd,abcd,"));
}
