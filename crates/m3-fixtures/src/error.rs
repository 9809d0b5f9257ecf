//! The error type of the fixtures.

/// What can go wrong when starting or running a fixture server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FixtureError {
    /// A bad option (unknown era or fault, short state key, unknown server name).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The connection failed before or while serving (I/O error, refused handshake).
    #[error("transport error: {0}")]
    Transport(String),
}

impl FixtureError {
    /// The stable code of this error: `invalid_argument` or `transport_error`.
    pub fn code(&self) -> &'static str {
        match self {
            FixtureError::InvalidArgument(_) => "invalid_argument",
            FixtureError::Transport(_) => "transport_error",
        }
    }
}
