//! Signals between blocks inside the data node (TC <-> LQH, DICT <-> LQH/TC).
//! Owned by the txn crate's authors; each signal's doc says sender, receiver and reply.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum InternalSignal {
    /// Placeholder until the TC/LQH protocol lands.
    Nop,
}
