#!/bin/bash
# The steady state of an idle worker: scripts/bench-worker-idle.sh BINDIR N [SETTLE] [WINDOW]
#
# Queues N managed `book_shipment` executions with `m3 submit` (the fixture shipping server,
# 2026-07-28 era), starts one `m3 worker --concurrency N`, waits until all N rounds are
# pending, lets it settle SETTLE seconds (default 45: past the first 30 s safety re-read),
# then prints the worker's CPU (user + system) over WINDOW seconds (default 20) and its RSS.
# BINDIR holds `m3` and `m3-test-shipping-server` (a release build: target/release).
set -euo pipefail
BIN=$1; N=$2; SETTLE=${3:-45}; WINDOW=${4:-20}
D=$(mktemp -d); DB=$D/idle.sqlite
seq 1 $N | xargs -P 4 -I{} $BIN/m3 --db $DB --json submit --human-input managed \
  --server "shipping=$BIN/m3-test-shipping-server modern" --call shipping:book_shipment \
  --arguments '{"weight_kg": 2}' > /dev/null
RUST_LOG=warn $BIN/m3 --db $DB --json worker --drain-timeout 0 --concurrency $N > $D/worker.out 2> $D/worker.err &
W=$!
start=$(date +%s)
while [ "$(grep -c round_pending $D/worker.out)" -lt $N ]; do sleep 1; if [ $(( $(date +%s) - start )) -gt 600 ]; then echo "timeout"; break; fi; done
ready=$(( $(date +%s) - start ))
sleep $SETTLE
t0=$(awk '{print $14+$15}' /proc/$W/stat); s0=$(date +%s.%N)
sleep $WINDOW
t1=$(awk '{print $14+$15}' /proc/$W/stat); s1=$(date +%s.%N)
rss=$(grep VmRSS /proc/$W/status | awk '{print $2}')
cpu=$(echo "($t1 - $t0) / $(getconf CLK_TCK) / ($s1 - $s0)" | bc -l)
printf "%s: %d waiting (all pending after %d s), settle %d s: worker CPU over %d s %.4f cores, RSS %.1f MB, errors in log %d\n" "$BIN" $N $ready $SETTLE $WINDOW $cpu $(echo "$rss/1024" | bc -l) $(grep -c -i "error" $D/worker.err)
kill -TERM $W; wait $W; rm -rf $D
