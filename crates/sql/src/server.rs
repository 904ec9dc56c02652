//! sqld listener and connection loop (in progress)
