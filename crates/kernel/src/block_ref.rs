use serde::{Deserialize, Serialize};

/// Node id: data nodes, management servers and API clients (SQL nodes, native
/// clients) all have one, so a signal can be addressed to any of them.
pub type NodeId = u16;

/// Block number: which kind of block (TC, LQH, DICT, API...).
pub type BlockNo = u16;

/// Address of a block instance on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlockRef {
    pub node: NodeId,
    pub block: BlockNo,
    pub instance: u16,
}

impl BlockRef {
    pub const fn new(node: NodeId, block: BlockNo, instance: u16) -> BlockRef {
        BlockRef { node, block, instance }
    }
}

impl std::fmt::Display for BlockRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}/{}", self.node, self.block, self.instance)
    }
}
