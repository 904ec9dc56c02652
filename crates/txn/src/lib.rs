//! norr-txn (in progress)
