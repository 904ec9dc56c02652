//! norr-sql (in progress)
