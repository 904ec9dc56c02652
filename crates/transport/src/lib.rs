//! norr-transport (in progress)
