//! norr-runtime (in progress)
