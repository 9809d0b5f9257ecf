//! Compile-time proof (STYLE item 20) that the kits, handles, the store trait
//! objects and the futures of the public async fns are `Send + Sync`.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use m3_kit::{
    Agent, AsyncAgent, AsyncExecutionHandle, AsyncMcpTestKit, AsyncMcpTestKitBuilder,
    ExecutionHandle, McpTestKit, SubmitOptions,
};
use m3_store::{ExecutionStore, ManagedInputStore};
use m3_types::ResponseMap;

fn send_sync<T: Send + Sync>() {}
fn send<T: Send>(_: &T) {}

#[test]
fn public_types_are_send_and_sync() {
    send_sync::<AsyncMcpTestKit>();
    send_sync::<AsyncAgent>();
    send_sync::<AsyncExecutionHandle>();
    send_sync::<McpTestKit>();
    send_sync::<Agent>();
    send_sync::<ExecutionHandle>();
    send_sync::<SubmitOptions>();
    send_sync::<Arc<dyn ManagedInputStore>>();
    send_sync::<Arc<dyn ExecutionStore>>();
    send_sync::<m3_runtime::Worker>();
    send_sync::<m3_runtime::ResponseNotifier>();
}

/// Never called: only type-checked, so that the futures are proven `Send`.
#[allow(dead_code, unused_must_use)]
fn futures_are_send(
    kit: AsyncMcpTestKit,
    agent: AsyncAgent,
    handle: AsyncExecutionHandle,
    builder: AsyncMcpTestKitBuilder,
) {
    send(&builder.build());
    send(&kit.attach("id"));
    send(&kit.executions());
    send(&kit.recover());
    send(&kit.clone().close());
    send(&agent.submit("prompt", SubmitOptions::new()));
    send(&handle.pending_elicitation());
    send(&handle.respond_elicitation("round", ResponseMap::new(), "key"));
    send(&handle.snapshot());
    send(&handle.result(Some(Duration::from_secs(1))));
    send(&handle.cancel());
    send(&handle.events(None));
    send(&handle.rounds());
    send(&handle.wait_for_pending(Duration::from_secs(1)));
}

#[test]
fn async_fn_futures_are_send() {
    // The proof is `futures_are_send` compiling; reference it so it is checked.
    let _ = futures_are_send as fn(_, _, _, _);
}
