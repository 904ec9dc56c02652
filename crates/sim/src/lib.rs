//! norr-sim (in progress)
