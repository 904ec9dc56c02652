//! SQL engine (in progress)
