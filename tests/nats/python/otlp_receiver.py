"""An OTLP/HTTP trace receiver built on the official OpenTelemetry protocol definitions (the
`opentelemetry-proto` package): what a collector does with `pantheon serve --otlp`'s requests.

    otlp_receiver.py OUT_FILE [PORT]

Listens on 127.0.0.1:PORT (default a free port; the port is printed as the first line on stdout), takes POST /v1/traces
with Content-Type application/x-protobuf, decodes each body as an ExportTraceServiceRequest
(a body that does not decode is answered 400 and noted in OUT_FILE as {"error": ...}), and appends
one JSON line per span to OUT_FILE: trace_id, span_id, parent_span_id (hex, "" for none), name,
kind, start and end (unix nanoseconds), attributes, links and the resource's attributes. Answers
200 with an empty ExportTraceServiceResponse. Runs until killed.
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2

LOCK = threading.Lock()


def value(v: common_pb2.AnyValue):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def attrs(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


class Handler(BaseHTTPRequestHandler):
    out = None

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        req = trace_service_pb2.ExportTraceServiceRequest()
        try:
            if self.path != "/v1/traces":
                raise ValueError(f"unexpected path {self.path}")
            if self.headers.get("Content-Type") != "application/x-protobuf":
                raise ValueError(f"unexpected content type {self.headers.get('Content-Type')}")
            req.ParseFromString(body)
        except Exception as e:  # noqa: BLE001 - any refusal is reported to the test
            with LOCK, open(self.out, "a") as f:
                f.write(json.dumps({"error": str(e)}) + "\n")
            self.send_response(400)
            self.end_headers()
            return
        lines = []
        for rs in req.resource_spans:
            resource = attrs(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    lines.append(json.dumps({
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent_span_id": s.parent_span_id.hex(),
                        "name": s.name,
                        "kind": s.kind,
                        "start": s.start_time_unix_nano,
                        "end": s.end_time_unix_nano,
                        "attributes": attrs(s.attributes),
                        "links": [{"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()} for l in s.links],
                        "resource": resource,
                        "scope": ss.scope.name,
                    }))
        with LOCK, open(self.out, "a") as f:
            for line in lines:
                f.write(line + "\n")
        answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


def main():
    Handler.out = sys.argv[1]
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
