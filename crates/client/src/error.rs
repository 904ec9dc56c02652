//! Errors of the native client API.

use norr_signals::{ErrorClass, ErrorCode, NodeError};

/// Everything a client call can fail with.
///
/// Use [`ClientError::is_temporary`] to decide whether to retry the whole
/// transaction, and [`ClientError::code`] for the stable error number.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    /// The data node refused the request (the transaction, if any, is aborted).
    #[error("{0}")]
    Node(NodeError),
    /// The connection to the data node is gone (or was never made). Temporary:
    /// reconnect and retry the transaction.
    #[error("not connected to a data node: {0}")]
    NotConnected(String),
    /// The peer broke the protocol, or the client was used wrongly (a request too
    /// large to send, a call on a finished transaction). Not retriable as is.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// No reply within the request timeout. The outcome of the request is
    /// unknown; the transaction is rolled back in the background.
    #[error("request timed out")]
    Timeout,
}

impl ClientError {
    /// True if retrying the whole transaction may succeed (lock wait timeout,
    /// overload, lost connection, timeout).
    pub fn is_temporary(&self) -> bool {
        match self {
            ClientError::Node(e) => e.code.class() == ErrorClass::Temporary,
            ClientError::NotConnected(_) | ClientError::Timeout => true,
            ClientError::Protocol(_) => false,
        }
    }

    /// The stable error code, if the error has one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Node(e) => Some(e.code),
            ClientError::NotConnected(_) => Some(ErrorCode::NotConnected),
            ClientError::Protocol(_) | ClientError::Timeout => None,
        }
    }

    /// The error class, if the error has a code.
    pub fn class(&self) -> Option<ErrorClass> {
        self.code().map(|c| c.class())
    }
}

impl From<NodeError> for ClientError {
    fn from(e: NodeError) -> Self {
        ClientError::Node(e)
    }
}

impl From<ErrorCode> for ClientError {
    fn from(c: ErrorCode) -> Self {
        ClientError::Node(NodeError::new(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert!(ClientError::from(ErrorCode::LockWaitTimeout).is_temporary());
        assert!(!ClientError::from(ErrorCode::DuplicateKey).is_temporary());
        assert!(ClientError::NotConnected("x".into()).is_temporary());
        assert_eq!(ClientError::NotConnected("x".into()).code(), Some(ErrorCode::NotConnected));
        assert!(ClientError::Timeout.is_temporary());
        assert!(!ClientError::Protocol("x".into()).is_temporary());
        assert_eq!(ClientError::from(ErrorCode::NoSuchTable).class(), Some(ErrorClass::Schema));
    }
}
