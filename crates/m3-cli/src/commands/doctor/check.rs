//! What the doctor's checks share: the [`Check`] each one gives, how long a probe may
//! take, and whether the store is still to be created.

use std::path::Path;
use std::time::Duration;

use m3_kit::StoreUrl;
use serde::Serialize;

/// How long one probe (a process answering) may take.
pub(super) const PROBE: Duration = Duration::from_secs(15);

/// One check's outcome.
#[derive(Debug, Serialize)]
pub(super) struct Check {
    pub(super) name: &'static str,
    /// `ok`, `warn` (optional, not needed by `m3 demo`) or `fail`.
    pub(super) status: &'static str,
    pub(super) detail: String,
    /// How to fix it (absent when ok).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) fix: Option<String>,
}

impl Check {
    pub(super) fn ok(name: &'static str, detail: String) -> Self {
        Self {
            name,
            status: "ok",
            detail,
            fix: None,
        }
    }

    pub(super) fn not_ok(
        name: &'static str,
        status: &'static str,
        detail: String,
        fix: &str,
    ) -> Self {
        Self {
            name,
            status,
            detail,
            fix: Some(fix.to_owned()),
        }
    }
}

/// Whether `db` names a store kept in a local file that does not exist (yet).
pub(super) fn missing_local_store(db: &Path) -> bool {
    StoreUrl::parse(&db.to_string_lossy())
        .ok()
        .and_then(|url| url.local_file().map(|file| !file.exists()))
        .unwrap_or(false)
}
