"""A webhook receiver for m3-rs's tests.

Verifies every delivery with the Standard Webhooks reference library for Python
(`standardwebhooks`), records it as one JSON line, and answers as told:

    webhook_receiver.py --secret-file FILE --record FILE [--statuses 500,500,200]
                        [--hang] [--delay-first SECONDS] [--port N]

It prints `http://127.0.0.1:PORT/hook` on its first line once it listens. The secret is
read from --secret-file at each request (the test writes it after `m3 webhooks add`,
which needs the URL first). `--statuses` are answered in turn (the last one from then on;
default 204). `--hang` never answers. `--delay-first` records the first request, then waits
that long before answering it. A request whose signature does not verify is answered 400
and recorded with `"verified": false`.
"""

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--secret-file", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--statuses", default="204")
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--delay-first", type=float, default=0.0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    statuses = [int(s) for s in args.statuses.split(",")]
    lock = threading.Lock()
    state = {"served": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (the standard library's name)
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            verified = verify(args.secret_file, body, headers)
            with lock:
                index = state["served"]
                state["served"] += 1
                with open(args.record, "a", encoding="utf-8") as out:
                    out.write(json.dumps({
                        "id": headers.get("webhook-id"),
                        "timestamp": headers.get("webhook-timestamp"),
                        "verified": verified,
                        "body": json.loads(body or b"null"),
                        "at": time.time(),
                    }) + "\n")
            if args.hang:
                time.sleep(3600)
                return
            if index == 0 and args.delay_first:
                time.sleep(args.delay_first)
            status = statuses[min(index, len(statuses) - 1)] if verified else 400
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}/hook", flush=True)
    server.serve_forever()


def verify(secret_file, body, headers):
    try:
        with open(secret_file, encoding="utf-8") as f:
            secret = f.read().strip()
        Webhook(secret).verify(body, headers)
        return True
    except Exception as error:  # any failure to verify is a refusal
        print(f"refused: {error!r}", file=sys.stderr, flush=True)
        return False


if __name__ == "__main__":
    main()
