//! The open-files limit a worker needs: every running execution holds pipes to its MCP
//! server processes (and their pidfds), so a worker that runs N at once raises its soft
//! `RLIMIT_NOFILE` to fit them, or refuses to start with a clear error.

use m3_types::{Error, Result};
use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Open files budgeted per running execution: stdin, stdout and stderr pipes plus a pidfd
/// for a few server processes, with room for the harness.
pub const FILES_PER_EXECUTION: u64 = 16;

/// Open files budgeted for the worker itself (store connections, sockets, logs).
const BASE_FILES: u64 = 256;

/// Raises the soft open-files limit so `concurrency` executions fit (`None`: as far as the
/// hard limit allows, best effort). Returns the soft limit now in force.
///
/// # Errors
/// `invalid_argument` (detail `reason = "open_files_limit"`) when the hard limit is below
/// what `concurrency` needs; the message says how to fix it.
pub fn raise_open_files_limit(concurrency: Option<usize>) -> Result<u64> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .map_err(|e| Error::storage("cannot read the open-files limit").with_source(e))?;
    let Some(concurrency) = concurrency else {
        if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
            return Ok(hard);
        }
        return Ok(soft);
    };
    let needed = BASE_FILES.saturating_add(FILES_PER_EXECUTION.saturating_mul(concurrency as u64));
    if needed <= soft {
        return Ok(soft);
    }
    if needed > hard {
        return Err(Error::model_validation(format!(
            "{concurrency} executions at once need about {needed} open files but the hard limit \
             is {hard}: lower the concurrency or raise the limit (ulimit -Hn, LimitNOFILE=)"
        ))
        .with_detail("reason", "open_files_limit")
        .with_detail("needed", needed)
        .with_detail("hard_limit", hard));
    }
    setrlimit(Resource::RLIMIT_NOFILE, needed, hard).map_err(|e| {
        Error::model_validation(format!("cannot raise the open-files limit to {needed}"))
            .with_detail("reason", "open_files_limit")
            .with_source(e)
    })?;
    tracing::info!(from = soft, to = needed, "raised the open-files soft limit");
    Ok(needed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_concurrency_beyond_the_hard_limit_is_refused_and_a_small_one_fits() {
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap_or((0, 0));
        let too_many = usize::try_from(hard / FILES_PER_EXECUTION + 1).unwrap_or(usize::MAX);
        if hard != nix::sys::resource::RLIM_INFINITY {
            let error = raise_open_files_limit(Some(too_many)).err();
            assert_eq!(error.as_ref().map(|e| e.code()), Some("invalid_argument"));
            assert_eq!(
                error.and_then(|e| e.details().get("reason").cloned()),
                Some("open_files_limit".into())
            );
        }
        let soft = raise_open_files_limit(Some(4)).ok();
        assert!(soft.is_some_and(|s| s >= BASE_FILES + 4 * FILES_PER_EXECUTION));
    }
}
