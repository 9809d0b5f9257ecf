//! Which Codex CLI is installed: `codex --version` and the versions M3 was tested with.

use std::path::Path;
use std::time::Duration;

use m3_types::{Error, Result};

/// Codex CLI versions the harness is tested with (end-to-end, in `scripts/test.sh`).
pub const TESTED_CODEX_VERSIONS: [&str; 2] = ["0.169.0", "0.156.1"];

/// How long `codex --version` may take (it answers in about 0.2 s).
const VERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `<executable> --version` and returns the version (`"0.169.0"`).
///
/// # Errors
/// `invalid_argument` when the executable cannot be run, fails, or prints something
/// other than `codex-cli X.Y.Z`.
pub async fn detect_codex_version(executable: &Path) -> Result<String> {
    let mut command = tokio::process::Command::new(executable);
    command
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(VERSION_TIMEOUT, command.output())
        .await
        .map_err(|_| {
            Error::model_validation(format!(
                "'{} --version' did not answer within {} s",
                executable.display(),
                VERSION_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|e| {
            Error::model_validation(format!(
                "cannot run the codex executable '{}': {e}",
                executable.display()
            ))
            .with_detail("reason", "codex_not_found")
            .with_source(e)
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(Error::model_validation(format!(
            "'{} --version' failed ({})",
            executable.display(),
            output.status
        )));
    }
    parse_version(&text).ok_or_else(|| {
        Error::model_validation(format!(
            "'{} --version' printed '{}', not 'codex-cli X.Y.Z'",
            executable.display(),
            text.trim()
        ))
    })
}

/// The version in a `codex --version` line (`codex-cli 0.169.0` -> `0.169.0`).
pub(crate) fn parse_version(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let version = line.strip_prefix("codex-cli ")?.trim();
    let numeric = version.split(['-', '+']).next()?;
    let parts: Vec<&str> = numeric.split('.').collect();
    (parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
    .then(|| version.to_owned())
}

/// Refuses a version M3 was not tested with, unless `allow_untested` is set.
///
/// # Errors
/// `invalid_argument` with `details.reason = "untested_codex_version"`.
pub(crate) fn check_tested(version: &str, allow_untested: bool) -> Result<()> {
    if allow_untested || TESTED_CODEX_VERSIONS.contains(&version) {
        return Ok(());
    }
    Err(Error::model_validation(format!(
        "codex-cli {version} is not a tested version (tested: {}); set \"allow_untested_version\": true to use it anyway",
        TESTED_CODEX_VERSIONS.join(", ")
    ))
    .with_detail("reason", "untested_codex_version")
    .with_detail("version", version)
    .with_detail("tested_versions", TESTED_CODEX_VERSIONS.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_are_checked() {
        assert_eq!(
            parse_version("codex-cli 0.169.0\n").as_deref(),
            Some("0.169.0")
        );
        assert_eq!(
            parse_version("codex-cli 0.172.0-alpha.1").as_deref(),
            Some("0.172.0-alpha.1")
        );
        assert_eq!(parse_version("codex 0.169.0"), None);
        assert_eq!(parse_version("codex-cli 0.169"), None);
        assert_eq!(parse_version(""), None);
        check_tested("0.169.0", false).unwrap();
        check_tested("0.156.1", false).unwrap();
        let err = check_tested("0.171.0", false).unwrap_err();
        assert_eq!(err.code(), "invalid_argument");
        assert!(err.message().contains("0.169.0, 0.156.1"), "{err}");
        check_tested("0.171.0", true).unwrap();
    }
}
