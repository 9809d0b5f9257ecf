//! The spans an execution runs in and the W3C trace context its MCP requests carry.
//!
//! An execution's trace id is derived from its id (a ULID is 128 bits, exactly a trace id;
//! another id is hashed), so every worker that runs a part of it, every retry and every
//! MCP server it calls share one trace, and anyone holding the execution id knows the
//! trace to look for ([`execution_trace_id`]). The `m3.execution` span of a run hangs from
//! a remote parent with the same derived ids; with no OpenTelemetry layer installed the
//! `traceparent` is built from the same ids. See docs/decisions.md.

use m3_mcp::TraceContext;
use opentelemetry::Context;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use sha2::{Digest, Sha256};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The 128-bit trace id of execution `execution_id`: the ULID's bytes, or the first 16
/// bytes of the SHA-256 of an id that is not a ULID. Never all zeros.
pub fn execution_trace_id(execution_id: &str) -> [u8; 16] {
    let bytes = match ulid::Ulid::from_string(execution_id) {
        Ok(ulid) => ulid.to_bytes(),
        Err(_) => first_bytes(&Sha256::digest(execution_id.as_bytes())),
    };
    if bytes == [0; 16] {
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    } else {
        bytes
    }
}

/// [`execution_trace_id`] as the 32 lower-case hex digits of a `traceparent`.
pub fn execution_trace_id_hex(execution_id: &str) -> String {
    execution_trace_id(execution_id)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The `m3.execution` span of one run of `execution_id`, parented (in OpenTelemetry) on
/// the execution's derived remote context so its trace id is [`execution_trace_id`].
pub(crate) fn execution_span(execution_id: &str) -> Span {
    let span = tracing::info_span!("m3.execution", execution.id = %execution_id);
    // Without an OpenTelemetry layer (or with the span filtered out) there is nothing to
    // parent: the traceparent sent to servers is derived from the same ids anyway.
    let _ = span.set_parent(Context::new().with_remote_span_context(SpanContext::new(
        TraceId::from_bytes(execution_trace_id(execution_id)),
        SpanId::from_bytes(span_id_of(execution_id)),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    )));
    span
}

/// The trace context the requests of the MCP operation running in `span` carry: the
/// span's own OpenTelemetry context when it is recorded in the execution's trace, else
/// the execution's trace id with a span id derived from `logical_operation_id`.
pub(crate) fn operation_trace_context(
    span: &Span,
    execution_id: &str,
    logical_operation_id: &str,
) -> TraceContext {
    let trace_id = execution_trace_id(execution_id);
    let context = span.context();
    let recorded = context.span().span_context().clone();
    if recorded.is_valid() && recorded.trace_id().to_bytes() == trace_id {
        return TraceContext::new(
            trace_id,
            recorded.span_id().to_bytes(),
            recorded.is_sampled(),
        )
        .with_tracestate(recorded.trace_state().header());
    }
    TraceContext::new(trace_id, span_id_of(logical_operation_id), false)
}

/// A nonzero 64-bit span id derived from an id: a ULID's random low half, else hashed.
fn span_id_of(id: &str) -> [u8; 8] {
    let bytes = match ulid::Ulid::from_string(id) {
        Ok(ulid) => ulid.random().to_be_bytes(),
        Err(_) => first_bytes(&Sha256::digest(id.as_bytes())),
    };
    let low: [u8; 8] = first_bytes(&bytes[bytes.len().saturating_sub(8)..]);
    if low == [0; 8] {
        [0, 0, 0, 0, 0, 0, 0, 1]
    } else {
        low
    }
}

fn first_bytes<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0; N];
    for (slot, byte) in out.iter_mut().zip(bytes) {
        *slot = *byte;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ulid_execution_id_is_its_own_trace_id() {
        let id = "01JRZ8Y3QF7T4ZV0M9K2X5N6PB";
        let ulid = ulid::Ulid::from_string(id).unwrap_or_default();
        assert_eq!(execution_trace_id(id), ulid.to_bytes());
        assert_eq!(execution_trace_id_hex(id), format!("{:032x}", ulid.0));
    }

    #[test]
    fn other_ids_hash_to_a_stable_nonzero_trace_id() {
        assert_eq!(execution_trace_id("run-1"), execution_trace_id("run-1"));
        assert_ne!(execution_trace_id("run-1"), execution_trace_id("run-2"));
        assert_ne!(execution_trace_id(""), [0; 16]);
        assert_ne!(span_id_of("x"), [0; 8]);
    }

    #[test]
    fn without_a_layer_the_context_is_derived_from_the_ids() {
        let execution = m3_types::new_id();
        let operation = m3_types::new_id();
        let span = execution_span(&execution);
        let context = operation_trace_context(&span, &execution, &operation);
        let parts: Vec<&str> = context.traceparent().split('-').collect();
        assert_eq!(parts[0], "00");
        assert_eq!(parts[1], execution_trace_id_hex(&execution));
        assert_eq!(parts[2].len(), 16);
        assert_eq!(parts[3], "00");
    }
}
