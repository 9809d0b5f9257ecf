//! The handoff file: what the observer tells one relay (socket, token, environment, policy).
//!
//! Written with mode 0600 and `create_new` (an existing file or symlink is an error);
//! read with `O_NOFOLLOW` (a symlink is refused) and only when no one but the owner
//! can read or write it, since it carries the server's environment and the token.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use m3_types::{Error, Result};
use nix::fcntl::OFlag;
use serde::{Deserialize, Serialize};

/// A handoff larger than this is refused (it holds an environment, not data).
const MAX_HANDOFF_BYTES: u64 = 4 * 1024 * 1024;

/// The handoff JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Handoff {
    /// The observer's Unix socket.
    pub(crate) socket: PathBuf,
    /// The observer's token (hex).
    pub(crate) token: String,
    /// What the relay's observations carry.
    pub(crate) connection_id: String,
    /// The complete environment of the server.
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    /// The server's working directory (`None`: the relay's).
    #[serde(default)]
    pub(crate) cwd: Option<PathBuf>,
    /// The tools the client may call (`None`: all).
    #[serde(default)]
    pub(crate) allowed_tools: Option<Vec<String>>,
}

impl Handoff {
    /// Writes `self` to a new file at `path` (mode 0600, never following a symlink).
    ///
    /// # Errors
    /// `transport_error` when the file exists or cannot be written.
    pub(crate) fn write_new(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_vec(self).map_err(|error| {
            Error::transport(format!("cannot encode the relay handoff: {error}"))
        })?;
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(OFlag::O_NOFOLLOW.bits() | OFlag::O_CLOEXEC.bits())
            .open(path)
            .map_err(|error| io_error("cannot create the relay handoff", path, error))?;
        file.write_all(&text)
            .and_then(|()| file.sync_all())
            .map_err(|error| io_error("cannot write the relay handoff", path, error))
    }

    /// Reads the handoff at `path`.
    ///
    /// # Errors
    /// `transport_error` when the file is missing, a symlink, not a regular file or
    /// readable by others; `invalid_argument` when its content is not a handoff.
    pub(crate) fn read(path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(OFlag::O_NOFOLLOW.bits() | OFlag::O_CLOEXEC.bits())
            .open(path)
            .map_err(|error| io_error("cannot open the relay handoff", path, error))?;
        let metadata = file
            .metadata()
            .map_err(|error| io_error("cannot inspect the relay handoff", path, error))?;
        if !metadata.is_file() {
            return Err(Error::transport("the relay handoff is not a regular file")
                .with_detail("path", path.display().to_string()));
        }
        if metadata.permissions().mode() & 0o077 != 0 {
            return Err(
                Error::transport("the relay handoff is accessible to other users")
                    .with_detail("path", path.display().to_string()),
            );
        }
        let mut text = Vec::new();
        file.take(MAX_HANDOFF_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(|error| io_error("cannot read the relay handoff", path, error))?;
        if text.len() as u64 > MAX_HANDOFF_BYTES {
            return Err(Error::model_validation("the relay handoff is too large")
                .with_detail("path", path.display().to_string()));
        }
        serde_json::from_slice(&text).map_err(|error| {
            Error::model_validation(format!("the relay handoff is malformed: {error}"))
                .with_detail("path", path.display().to_string())
        })
    }
}

fn io_error(what: &str, path: &Path, error: std::io::Error) -> Error {
    Error::transport(format!("{what}: {error}"))
        .with_detail("path", path.display().to_string())
        .with_source(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(socket: &Path) -> Handoff {
        Handoff {
            socket: socket.to_path_buf(),
            token: "ab".repeat(32),
            connection_id: "shipping".to_owned(),
            env: BTreeMap::from([("A".to_owned(), "1".to_owned())]),
            cwd: None,
            allowed_tools: Some(vec!["book_shipment".to_owned()]),
        }
    }

    #[test]
    fn a_handoff_round_trips_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("relay-1.json");
        let handoff = sample(&dir.path().join("relay.sock"));
        handoff.write_new(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(Handoff::read(&path).unwrap(), handoff);
        let again = handoff.write_new(&path).unwrap_err();
        assert_eq!(again.code(), "transport_error");
    }

    #[test]
    fn symlinks_and_shared_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        sample(dir.path()).write_new(&real).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(Handoff::read(&link).unwrap_err().code(), "transport_error");
        // Writing through a symlink is refused as well.
        let dangling = dir.path().join("dangling.json");
        std::os::unix::fs::symlink(dir.path().join("nowhere.json"), &dangling).unwrap();
        assert!(sample(dir.path()).write_new(&dangling).is_err());
        assert!(!dir.path().join("nowhere.json").exists());
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(Handoff::read(&real).unwrap_err().code(), "transport_error");
    }

    #[test]
    fn malformed_content_is_invalid_argument() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.json");
        std::fs::write(&path, b"{\"socket\": 1}").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(Handoff::read(&path).unwrap_err().code(), "invalid_argument");
    }
}
