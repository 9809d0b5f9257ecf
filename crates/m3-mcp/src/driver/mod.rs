//! The engine behind [`InputRound`]: one [`Driver`] per logical operation,
//! with what both eras share (the operation record, attempts, errors, the wire
//! request); [`modern`] drives 2026-07-28 attempts, [`legacy`] the open request
//! of the earlier eras.

mod common;
mod legacy;
mod legacy_call;
mod modern;
mod task;
mod task_call;

use std::sync::Arc;

use m3_types::{Error, Result};

use super::options::ProtocolEra;
use super::request::{OperationRequest, ResumeRequest};
use super::shared::Shared;
use common::new_driver;
pub(crate) use common::{Driver, Step};
pub(crate) use legacy_call::LegacyPending;

pub(crate) async fn start(shared: Arc<Shared>, request: OperationRequest) -> Result<Step> {
    let mut driver = new_driver(shared, request)?;
    driver.shared.publish(&driver.record);
    match driver.shared.era {
        ProtocolEra::Modern => driver.modern_attempts(None, None).await,
        ProtocolEra::Legacy => {
            driver.legacy_start().await?;
            driver.legacy_drive().await
        }
    }
}

pub(crate) async fn resume(shared: Arc<Shared>, resume: ResumeRequest) -> Result<Step> {
    if shared.era != ProtocolEra::Modern {
        return Err(Error::managed_input_state(format!(
            "a legacy-era round lives in its open request and cannot be resumed (server '{}')",
            shared.server
        ))
        .with_detail("server", shared.server.clone()));
    }
    let mut driver = new_driver(shared, resume.operation)?;
    driver.record.rounds = resume.completed_rounds;
    driver.shared.publish(&driver.record);
    driver
        .modern_attempts(Some(resume.responses), resume.request_state)
        .await
}
