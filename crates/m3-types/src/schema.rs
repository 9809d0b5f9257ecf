//! JSON Schemas of the public value types (for `m3 schema [NAME]`).

use schemars::{JsonSchema, Schema};

use crate::{
    DeliveryState, ElicitationAction, ElicitationRequest, ElicitationResponse, ErrorCode,
    ErrorInfo, ExecutionOutcome, ExecutionResult, ExecutionState, ExecutionStatus,
    FormElicitationRequest, HumanInput, ManagedInputLease, ManagedInputRecord, ManagedInputStatus,
    OperationKind, PendingElicitationRound, StdioServer, ToolSelection, UrlElicitationRequest,
};

fn entry<T: JsonSchema>(name: &'static str) -> (&'static str, Schema) {
    (name, schemars::schema_for!(T))
}

/// `(type name, JSON Schema)` for every public value type, sorted by name.
pub fn value_schemas() -> Vec<(&'static str, Schema)> {
    let mut all = vec![
        entry::<DeliveryState>("DeliveryState"),
        entry::<ElicitationAction>("ElicitationAction"),
        entry::<ElicitationRequest>("ElicitationRequest"),
        entry::<ElicitationResponse>("ElicitationResponse"),
        entry::<ErrorCode>("ErrorCode"),
        entry::<ErrorInfo>("ErrorInfo"),
        entry::<ExecutionOutcome>("ExecutionOutcome"),
        entry::<ExecutionResult>("ExecutionResult"),
        entry::<ExecutionState>("ExecutionState"),
        entry::<ExecutionStatus>("ExecutionStatus"),
        entry::<FormElicitationRequest>("FormElicitationRequest"),
        entry::<HumanInput>("HumanInput"),
        entry::<ManagedInputLease>("ManagedInputLease"),
        entry::<ManagedInputRecord>("ManagedInputRecord"),
        entry::<ManagedInputStatus>("ManagedInputStatus"),
        entry::<OperationKind>("OperationKind"),
        entry::<PendingElicitationRound>("PendingElicitationRound"),
        entry::<StdioServer>("StdioServer"),
        entry::<ToolSelection>("ToolSelection"),
        entry::<UrlElicitationRequest>("UrlElicitationRequest"),
    ];
    all.sort_by_key(|(name, _)| *name);
    all
}

/// The schema of the value type called `name` (exact, case-sensitive), if there is one.
pub fn value_schema(name: &str) -> Option<Schema> {
    value_schemas()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| s)
}
