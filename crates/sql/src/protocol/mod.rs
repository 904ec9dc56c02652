//! MySQL wire protocol (in progress)
