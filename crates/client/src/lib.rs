//! norr-client (in progress)
