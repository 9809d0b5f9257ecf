#!/usr/bin/env bash
# Managed-input store benchmark: runs, in one session and on fresh files,
#   1. the Python original (sf-m3 0.3.1 SQLiteManagedInputStore)   -- shared/bench/anchor_store_bench.py
#   2. bare SQLite with the same five write transactions per round  -- shared/bench/sqlite_limit.py (FULL, NORMAL)
#   3. m3-rs SqliteManagedInputStore (release build)                -- m3-store-bench
# and prints the rounds/s side by side with the ratios the targets are stated in.
#
# usage: scripts/bench-store.sh [ROUNDS_NORMAL [ROUNDS_FULL [ANCHOR_ROUNDS]]]
#
# M3_BENCH_CPU=N runs every subject pinned to CPU N (taskset): the Python subjects are
# single-threaded anyway; ours then hands statements to sqlx's SQLite thread on the same core
# instead of waking another, idle one (see docs/performance.md).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
rounds=${1:-2000}
full_rounds=${2:-500}
anchor_rounds=${3:-300}
python=${M3_TEST_PYTHON:-$HOME/.cache/m3-rs/tools/venv/bin/python}
bench_dir=${M3_BENCH_REFERENCE_DIR:-/work/shared/bench}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/m3-rs/target}"

[ -x "$python" ] || { echo "missing Python with sf-m3 0.3.1: $python (run scripts/test.sh once)" >&2; exit 1; }
[ -f "$bench_dir/anchor_store_bench.py" ] || { echo "missing $bench_dir/anchor_store_bench.py" >&2; exit 1; }

cargo build --release --quiet -p m3-store-bench --bin m3-store-bench
pin=()
if [ -n "${M3_BENCH_CPU:-}" ]; then
  pin=(taskset -c "$M3_BENCH_CPU")
  echo "== every subject pinned to CPU $M3_BENCH_CPU"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== Python original (sf-m3 0.3.1), $anchor_rounds rounds"
anchor=$("${pin[@]}" "$python" "$bench_dir/anchor_store_bench.py" "$work/anchor.sqlite" "$anchor_rounds")
echo "$anchor"
echo "== bare SQLite"
limit_full=$("${pin[@]}" "$python" "$bench_dir/sqlite_limit.py" "$work/limit-full.sqlite" "$full_rounds" FULL)
echo "$limit_full"
limit_normal=$("${pin[@]}" "$python" "$bench_dir/sqlite_limit.py" "$work/limit-normal.sqlite" "$rounds" NORMAL)
echo "$limit_normal"
echo "== m3-rs"
ours=$("${pin[@]}" "$CARGO_TARGET_DIR/release/m3-store-bench" --rounds "$rounds" --full-rounds "$full_rounds" --dir "$work/m3")
echo "$ours"

rate() { sed -n 's/.*rounds_per_s=\([0-9.]*\).*/\1/p' | head -n1; }
anchor_rate=$(echo "$anchor" | rate)
full_rate=$(echo "$limit_full" | rate)
normal_rate=$(echo "$limit_normal" | rate)
ours_full=$(echo "$ours" | grep '^m3-rs sync=FULL rounds=' | rate)
ours_normal=$(echo "$ours" | grep '^m3-rs sync=NORMAL rounds=' | rate)
tx_rate() { sed -n 's/.* tx_rounds_per_s=\([0-9.]*\).*/\1/p' | head -n1; }
sqlx_full=$(echo "$ours" | grep '^sqlx-bare sync=FULL ' | tx_rate)
sqlx_normal=$(echo "$ours" | grep '^sqlx-bare sync=NORMAL ' | tx_rate)

echo
echo "== summary (rounds/s, one sequential writer, fresh files)"
printf '%-44s %12s\n' "subject" "rounds/s"
printf '%-44s %12s\n' "sf-m3 0.3.1 store (WAL, synchronous FULL)" "$anchor_rate"
printf '%-44s %12s\n' "bare SQLite, WAL, synchronous=FULL" "$full_rate"
printf '%-44s %12s\n' "bare SQLite, WAL, synchronous=NORMAL" "$normal_rate"
printf '%-44s %12s\n' "bare SQLite through sqlx, FULL (transactions)" "$sqlx_full"
printf '%-44s %12s\n' "bare SQLite through sqlx, NORMAL (transactions)" "$sqlx_normal"
printf '%-44s %12s\n' "m3-rs store, synchronous=FULL" "$ours_full"
printf '%-44s %12s\n' "m3-rs store, synchronous=NORMAL" "$ours_normal"
awk -v a="$anchor_rate" -v f="$full_rate" -v n="$normal_rate" -v of="$ours_full" -v on="$ours_normal" -v sf="$sqlx_full" -v sn="$sqlx_normal" 'BEGIN {
  printf "m3-rs FULL / Python original:   %6.1fx (target >= 5x)\n", of / a;
  printf "m3-rs FULL / bare SQLite FULL:  %6.0f%% (target >= 80%%)\n", 100 * of / f;
  printf "m3-rs NORMAL / bare SQLite NORMAL: %3.0f%% (target >= 80%%)\n", 100 * on / n;
  printf "bare through sqlx / bare SQLite: FULL %3.0f%%, NORMAL %3.0f%% (the floor of any store on sqlx)\n", 100 * sf / f, 100 * sn / n;
  printf "m3-rs / bare through sqlx:       FULL %3.0f%%, NORMAL %3.0f%%\n", 100 * of / sf, 100 * on / sn;
}'
