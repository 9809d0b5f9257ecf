#!/usr/bin/env python3
"""Latency of the two-terminal flow: `m3 respond` in one process -> retry sent by the
`m3 run` worker in another, over N rounds.

    python3 scripts/bench-cli-two-terminals.py [--m3 target/release/m3] [--rounds 200]

`m3 run --human-input managed` calls `shipping:book_shipment` on the bundled shipping server
with `--fault endless-rounds` (it asks for the address again after every answer). The server
runs behind a tiny stdio proxy (this script, `proxy` mode) that timestamps every frame the
worker sends. For each round the script runs `m3 respond` as a separate process and records:

  commit->retry : from `m3 respond` exiting 0 (the commit is acknowledged) to the worker's
                  retry frame (tools/call with inputResponses) reaching the server;
  respond->retry: from starting the `m3 respond` process (process start, store open,
                  validation, commit) to that retry frame.

Prints p50/p90/p99/max in milliseconds. Everything runs on this machine; nothing else is
contacted.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import queue


def proxy(log_path, command):
    child = subprocess.Popen(command, stdin=subprocess.PIPE)
    with open(log_path, "a", buffering=1) as log:
        for line in sys.stdin.buffer:
            now = time.time()
            child.stdin.write(line)
            child.stdin.flush()
            if b"tools/call" in line:
                log.write(f"{now:.6f} {int(b'inputResponses' in line)}\n")
    child.stdin.close()
    sys.exit(child.wait())


def percentile(values, p):
    values = sorted(values)
    k = max(0, min(len(values) - 1, round(p / 100 * (len(values) - 1))))
    return values[k]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--m3", default=os.environ.get("M3_BIN", "target/release/m3"))
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    m3 = os.path.abspath(args.m3)
    work = tempfile.mkdtemp(prefix="m3-bench-cli-")
    db = os.path.join(work, "m3.sqlite")
    log = os.path.join(work, "frames.log")
    open(log, "w").close()
    server = (f"shipping={sys.executable} {os.path.abspath(__file__)} proxy {log} "
              f"{m3} example-server shipping --era 2026-07-28 --fault endless-rounds")
    run = subprocess.Popen(
        [m3, "--db", db, "--json", "run", "--server", server,
         "--call", "shipping:book_shipment", "--arguments", '{"weight_kg": 2}',
         "--human-input", "managed", "--round-limit", str(args.rounds + 5),
         "--timeout", "3600"],
        stdout=subprocess.PIPE, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in run.stdout], daemon=True).start()

    def next_json():
        return json.loads(lines.get(timeout=30))

    execution = next_json()["execution_id"]
    commit_retry, respond_retry = [], []
    address = 'shipping_address={"street": "1 Main Street", "city": "Pune"}'
    for i in range(args.rounds):
        round_id = next_json()["round_id"]
        with open(log) as f:
            seen = len(f.readlines())
        start = time.time()
        subprocess.run([m3, "--db", db, "respond", execution, round_id,
                        "--idempotency-key", f"bench-{i}", "--accept", address],
                       check=True, stdout=subprocess.DEVNULL)
        done = time.time()
        retry = None
        deadline = time.time() + 30
        while retry is None and time.time() < deadline:
            with open(log) as f:
                frames = f.readlines()[seen:]
            retries = [float(l.split()[0]) for l in frames if l.split()[1] == "1"]
            if retries:
                retry = retries[0]
            else:
                time.sleep(0.001)
        if retry is None:
            sys.exit(f"round {i}: no retry within 30 s")
        commit_retry.append((retry - done) * 1000)
        respond_retry.append((retry - start) * 1000)
    run.terminate()
    run.wait()
    print(f"rounds: {args.rounds}  m3: {m3}")
    for name, values in [("commit->retry", commit_retry), ("respond->retry", respond_retry)]:
        print(f"{name:15} p50 {percentile(values, 50):7.2f} ms  p90 {percentile(values, 90):7.2f} ms"
              f"  p99 {percentile(values, 99):7.2f} ms  max {max(values):7.2f} ms"
              f"  mean {statistics.mean(values):7.2f} ms")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "proxy":
        proxy(sys.argv[2], sys.argv[3:])
    else:
        main()
