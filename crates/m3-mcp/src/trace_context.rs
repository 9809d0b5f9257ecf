//! The W3C trace context an operation carries into the server, in every request's `_meta`
//! (`traceparent`, `tracestate`; SEP-414, both protocol eras).

use rmcp::model::RequestMetaObject;

/// A W3C Trace Context: the `traceparent` header value and, when there is one, the
/// `tracestate` value. The client puts both in the `_meta` of every request of the
/// operation it is attached to ([`OperationRequest::with_trace_context`](crate::OperationRequest::with_trace_context)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct TraceContext {
    traceparent: String,
    tracestate: Option<String>,
}

impl TraceContext {
    /// A version-00 `traceparent` from its parts: a 128-bit trace id, a 64-bit parent
    /// span id and whether the trace is sampled.
    pub fn new(trace_id: [u8; 16], span_id: [u8; 8], sampled: bool) -> Self {
        let flags = if sampled { "01" } else { "00" };
        Self {
            traceparent: format!("00-{}-{}-{flags}", hex(&trace_id), hex(&span_id)),
            tracestate: None,
        }
    }

    /// Adds a `tracestate` value (an empty one is left out, as W3C asks).
    pub fn with_tracestate(mut self, tracestate: impl Into<String>) -> Self {
        let tracestate = tracestate.into();
        self.tracestate = (!tracestate.is_empty()).then_some(tracestate);
        self
    }

    /// The `traceparent` value (`00-<trace id>-<span id>-<flags>`).
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate` value, if any.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The request `_meta` entries for this context.
    pub(crate) fn request_meta(&self) -> RequestMetaObject {
        let mut meta = RequestMetaObject::new();
        meta.set_traceparent(self.traceparent.clone());
        if let Some(state) = &self.tracestate {
            meta.set_tracestate(state.clone());
        }
        meta
    }
}

/// Lower-case hex, as `traceparent` requires.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_version_00_lower_hex() {
        let context = TraceContext::new([0xAB; 16], [0x01; 8], true);
        assert_eq!(
            context.traceparent(),
            "00-abababababababababababababababab-0101010101010101-01"
        );
        let unsampled = TraceContext::new([1; 16], [2; 8], false).with_tracestate("");
        assert!(unsampled.traceparent().ends_with("-00"));
        assert_eq!(unsampled.tracestate(), None);
        let meta = TraceContext::new([1; 16], [2; 8], false)
            .with_tracestate("m3=1")
            .request_meta();
        assert_eq!(meta.get_tracestate(), Some("m3=1"));
        assert_eq!(meta.get_traceparent(), Some(unsampled.traceparent()));
    }
}
