//! PERIOD_ADD / PERIOD_DIFF (periods are YYMM or YYYYMM numbers) and
//! RANDOM_BYTES.

use crate::engine::expr::value::to_i64;
use crate::engine::expr::EvalCtx;
use crate::engine::functions::Func;
use crate::types::SqlError;
use norr_signals::Value;

/// Months since year 0 of a period; two-digit years are 1970-2069, as MySQL.
fn months(p: i64) -> i64 {
    if p == 0 {
        return 0;
    }
    let (mut year, month) = (p / 100, p % 100);
    if year < 100 {
        year += if year < 70 { 2000 } else { 1900 };
    }
    year * 12 + month - 1
}

/// Non-NULL arguments only (the caller answers NULL for a NULL argument).
pub fn call(f: Func, args: &[Value], ctx: &mut EvalCtx) -> Result<Value, SqlError> {
    let int = |v: &Value, ctx: &mut EvalCtx| to_i64(v, &mut ctx.warnings).unwrap_or(0);
    Ok(match f {
        Func::PeriodAdd => {
            let (p, n) = (int(&args[0], ctx), int(&args[1], ctx));
            if p == 0 {
                return Ok(Value::Int(0));
            }
            let m = months(p) + n;
            Value::Int(m.div_euclid(12) * 100 + m.rem_euclid(12) + 1)
        }
        Func::PeriodDiff => Value::Int(months(int(&args[0], ctx)) - months(int(&args[1], ctx))),
        Func::RandomBytes => {
            let n = int(&args[0], ctx);
            if !(1..=1024).contains(&n) {
                return Err(SqlError::new(1690, "22003", "length value is out of range in 'random_bytes'"));
            }
            let mut b = vec![0u8; n as usize];
            getrandom::fill(&mut b)
                .map_err(|e| SqlError::new(1105, "HY000", format!("no random bytes from the system: {e}")))?;
            Value::Bytes(b)
        }
        _ => return Err(SqlError::internal("periods::call")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(f: Func, a: i64, b: i64) -> Value {
        let mut ctx = EvalCtx::new(&[]);
        call(f, &[Value::Int(a), Value::Int(b)], &mut ctx).unwrap()
    }

    #[test]
    fn periods_as_mysql() {
        assert_eq!(run(Func::PeriodAdd, 202401, 2), Value::Int(202403));
        assert_eq!(run(Func::PeriodAdd, 202401, -1), Value::Int(202312));
        assert_eq!(run(Func::PeriodAdd, 9801, 12), Value::Int(199901));
        assert_eq!(run(Func::PeriodAdd, 6912, 1), Value::Int(207001));
        assert_eq!(run(Func::PeriodDiff, 202402, 202312), Value::Int(2));
        assert_eq!(run(Func::PeriodDiff, 9802, 199703), Value::Int(11));
    }
}
