//! norr-knobs (in progress)
