"""A local OTLP/HTTP trace receiver: decodes every ``POST /v1/traces`` body, a protobuf
``ExportTraceServiceRequest``, with the official OpenTelemetry proto definitions (the
``opentelemetry-proto`` package) and appends each span to a JSON-lines file.

Usage: otlp_receiver.py --out PATH

It listens on an ephemeral loopback port and prints ``http://127.0.0.1:PORT`` (the value
for ``OTEL_EXPORTER_OTLP_ENDPOINT``) on stdout once it is ready. Each line of PATH is one
span: ``{"service", "name", "trace_id", "span_id", "parent_span_id", "attributes"}``, ids
in lower-case hex (``parent_span_id`` empty for a root), attribute values as strings.
A body that does not decode is answered 400 and recorded as ``{"error": ...}``.
"""

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
args = parser.parse_args()
LOCK = threading.Lock()


def any_value(value):
    """An OTLP ``AnyValue`` as a string (the tests compare text)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    return str(getattr(value, kind))


def spans_of(request):
    for resource_spans in request.resource_spans:
        service = ""
        for attribute in resource_spans.resource.attributes:
            if attribute.key == "service.name":
                service = any_value(attribute.value)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "service": service,
                    "name": span.name,
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "attributes": {a.key: any_value(a.value) for a in span.attributes},
                }


def record(lines):
    with LOCK, open(args.out, "a", encoding="utf-8") as out:
        for line in lines:
            out.write(json.dumps(line, sort_keys=True) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_):
        pass

    def reply(self, status, body, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/traces":
            return self.reply(404, b"only /v1/traces", "text/plain")
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError as error:
            record([{"error": str(error)}])
            return self.reply(400, str(error).encode(), "text/plain")
        record(list(spans_of(request)))
        response = ExportTraceServiceResponse().SerializeToString()
        self.reply(200, response, "application/x-protobuf")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:
    sys.exit(0)
