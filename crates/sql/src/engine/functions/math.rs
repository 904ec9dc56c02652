//! Exponential, logarithmic and trigonometric functions (all in DOUBLE).

use super::Func;
use crate::engine::expr::value::{self as vals, to_f64};
use crate::engine::expr::EvalCtx;
use crate::types::SqlError;
use norr_signals::Value;

/// MySQL's warning for a logarithm of a non-positive number.
const WARN_INVALID_LOG: u16 = 3020;

pub(super) fn call(f: Func, args: &[Value], ctx: &mut EvalCtx) -> Result<Value, SqlError> {
    let mut x = |i: usize| to_f64(&args[i], &mut ctx.warnings).unwrap_or(0.0);
    let r = match f {
        Func::Exp => x(0).exp(),
        Func::Ln | Func::Log2 | Func::Log10 | Func::Log => {
            let (base, v) = match (f, args.len()) {
                (Func::Log, 2) => (Some(x(0)), x(1)),
                (Func::Log2, _) => (Some(2.0), x(0)),
                (Func::Log10, _) => (Some(10.0), x(0)),
                _ => (None, x(0)),
            };
            if v <= 0.0 || base.is_some_and(|b| b <= 0.0 || b == 1.0) {
                ctx.warnings.push(WARN_INVALID_LOG, "Invalid argument for logarithm".into());
                return Ok(Value::Null);
            }
            match base {
                Some(2.0) => v.log2(),
                Some(10.0) => v.log10(),
                Some(b) => v.ln() / b.ln(),
                None => v.ln(),
            }
        }
        Func::Sin => x(0).sin(),
        Func::Cos => x(0).cos(),
        Func::Tan => x(0).tan(),
        Func::Asin | Func::Acos => {
            let v = x(0);
            if !(-1.0..=1.0).contains(&v) {
                return Ok(Value::Null);
            }
            if f == Func::Asin {
                v.asin()
            } else {
                v.acos()
            }
        }
        Func::Atan if args.len() == 2 => x(0).atan2(x(1)),
        Func::Atan => x(0).atan(),
        Func::Atan2 => x(0).atan2(x(1)),
        Func::Cot => {
            let t = x(0).tan();
            if t == 0.0 {
                return Err(vals::err_out_of_range("DOUBLE", "cot(0)"));
            }
            1.0 / t
        }
        Func::Radians => x(0).to_radians(),
        Func::Degrees => x(0).to_degrees(),
        _ => return Err(SqlError::internal(format!("{f:?} is not a math function"))),
    };
    if !r.is_finite() {
        return Err(vals::err_out_of_range("DOUBLE", &format!("{f:?}").to_ascii_lowercase()));
    }
    Ok(Value::Double(r))
}
