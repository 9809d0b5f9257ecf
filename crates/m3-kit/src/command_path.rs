//! Server commands resolved at submission: a bare program name (`"m3"`, `"python3"`) is looked
//! up on the caller's `PATH` and stored as the absolute path it names.
//!
//! Server processes start with a cleared environment (only the kit's `env` and the binding's
//! own variables), so a bare name that works in the caller's shell would otherwise not be
//! found when the worker spawns it, and the execution would fail with no word about why.
//! Resolving here keeps the environment closed and makes the failure immediate and named.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use m3_types::{Error, Result, ServerBinding, StdioServer};

/// Resolves every server's command: a name without a path separator is searched in the
/// binding's own `PATH` variable when it sets one, else in `caller_path` (the submitting
/// process's `PATH`). Commands with a separator are left as given.
///
/// # Errors
/// `invalid_argument` naming the server, the command and the directories searched when a
/// bare name is found in none of them.
pub(crate) fn resolve_commands(
    servers: Vec<ServerBinding>,
    caller_path: Option<&OsStr>,
) -> Result<Vec<ServerBinding>> {
    servers
        .into_iter()
        .map(|binding| match binding {
            ServerBinding::Stdio(server) => resolve_command(server, caller_path).map(Into::into),
            other => Ok(other),
        })
        .collect()
}

/// [`resolve_commands`] for one stdio binding.
fn resolve_command(mut server: StdioServer, caller_path: Option<&OsStr>) -> Result<StdioServer> {
    if is_bare(&server.command) {
        let search = server
            .env
            .get("PATH")
            .map(OsStr::new)
            .or(caller_path)
            .unwrap_or_default();
        let found = find_program(&server.command, search)
            .ok_or_else(|| not_on_path(&server.name, &server.command, search))?;
        server.command = found.display().to_string();
    }
    Ok(server)
}

/// A program name with no directory part.
fn is_bare(command: &str) -> bool {
    !command.is_empty() && !command.contains(std::path::MAIN_SEPARATOR) && !command.contains('/')
}

/// The first executable file named `name` in the directories of `search`.
fn find_program(name: &str, search: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(search)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

fn not_on_path(server: &str, command: &str, search: &OsStr) -> Error {
    let searched = search.to_string_lossy().into_owned();
    Error::model_validation(format!(
        "server '{server}': command '{command}' was not found on PATH ({}); server processes \
         start with a cleared environment, so the command is resolved at submission: put it \
         on PATH or give its absolute path",
        if searched.is_empty() {
            "empty"
        } else {
            &searched
        }
    ))
    .with_detail("server", server.to_owned())
    .with_detail("command", command.to_owned())
    .with_detail("operation", "execution.submit")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn command(binding: &ServerBinding) -> &str {
        &binding.as_stdio().unwrap().command
    }

    fn program(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        path
    }

    #[test]
    fn bare_names_become_the_absolute_path_found_on_path() {
        let first = tempfile::tempdir().unwrap();
        let second = tempfile::tempdir().unwrap();
        let expected = program(second.path(), "my-server");
        // A non-executable file of the same name earlier on PATH is skipped.
        std::fs::write(first.path().join("my-server"), "data").unwrap();
        let search = std::env::join_paths([first.path(), second.path()]).unwrap();
        let resolved = resolve_commands(
            vec![
                StdioServer::new("s", "my-server").into(),
                StdioServer::new("t", "/bin/sh").into(),
            ],
            Some(&search),
        )
        .unwrap();
        assert_eq!(command(&resolved[0]), expected.display().to_string());
        assert_eq!(command(&resolved[1]), "/bin/sh");
    }

    #[test]
    fn the_binding_s_own_path_wins_and_a_missing_command_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let expected = program(dir.path(), "only-here");
        let server =
            StdioServer::new("s", "only-here").with_env("PATH", dir.path().display().to_string());
        let resolved = resolve_commands(vec![server.into()], Some(OsStr::new("/nowhere"))).unwrap();
        assert_eq!(command(&resolved[0]), expected.display().to_string());

        let error = resolve_commands(
            vec![StdioServer::new("shipping", "m3-missing").into()],
            None,
        )
        .unwrap_err();
        assert_eq!(error.code(), "invalid_argument");
        assert!(
            error
                .message()
                .contains("command 'm3-missing' was not found on PATH (empty)"),
            "{}",
            error.message()
        );
        assert_eq!(error.details()["server"], "shipping");
    }
}
