//! `m3 plans record --execution ID` and `m3 rounds ID --export-plan FILE`: a managed
//! execution's answers written as a plan file, which `m3 run --plan` replays.

use std::io::Write as _;
use std::path::Path;

use m3_kit::ElicitationPlan;
use serde_json::json;

use crate::commands::inspect::open_existing_kit;
use crate::failure::Failure;
use crate::ids;
use crate::output::Output;

/// Records `execution`'s answers as a plan: into `file` (mode 0600, with a warning on
/// stderr), or onto stdout without one. Refused unless `include_values` says the caller
/// knows the plan holds the response values.
pub(crate) async fn record(
    out: Output,
    db: &Path,
    execution: &str,
    file: Option<&Path>,
    include_values: bool,
) -> Result<(), Failure> {
    if !include_values {
        return Err(Failure::invalid(
            "a recorded plan holds the answers' values, which are secrets (the store keeps \
             them only in the rounds' response columns): add --include-values to write it",
        )
        .with_detail("reason", json!("plan_values_not_included")));
    }
    let kit = open_existing_kit(db, true).await?;
    let recorded = async {
        let handle = ids::attach(&kit, execution).await?;
        let plan = handle.plan_with_answer_values().await?;
        Ok::<_, Failure>((handle.execution_id().to_owned(), plan))
    }
    .await;
    kit.close().await?;
    let (execution, plan) = recorded?;
    let text = serde_json::to_string_pretty(&plan)
        .map_err(|e| Failure::other("io_error", format!("cannot encode the plan: {e}")))?;
    let Some(file) = file else {
        out.say(text);
        return Ok(());
    };
    write_private(file, &text)?;
    eprintln!(
        "warning: {} holds the answers' values (secrets); only its owner can read it",
        file.display()
    );
    report(out, &execution, file, &plan)
}

/// Writes `text` to `path`, readable and writable by its owner only (also when it existed).
fn write_private(path: &Path, text: &str) -> Result<(), Failure> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let io = |error: std::io::Error| {
        Failure::other(
            "io_error",
            format!("cannot write the plan to {}: {error}", path.display()),
        )
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)?;
    file.write_all(b"\n").map_err(io)
}

fn report(
    out: Output,
    execution: &str,
    file: &Path,
    plan: &ElicitationPlan,
) -> Result<(), Failure> {
    if out.is_json() {
        return out.document(&json!({
            "execution_id": execution,
            "plan": file.display().to_string(),
            "entries": plan.entries.len(),
        }));
    }
    out.say(format!(
        "wrote {} plan entr{} from execution {execution} to {} (replay: m3 run ... --plan {})",
        plan.entries.len(),
        if plan.entries.len() == 1 { "y" } else { "ies" },
        file.display(),
        file.display()
    ));
    Ok(())
}
