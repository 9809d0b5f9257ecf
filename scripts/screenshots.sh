#!/usr/bin/env bash
# Regenerates the answer page's screenshots in docs/screenshots from the browser tests
# (headless Chromium, as scripts/test.sh runs them): the inbox list, forms, the executions
# list and an execution's timeline at a desktop
# and a phone width, in light and dark mode. Run it after a change to the page, and
# commit the pictures it writes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/m3-rs/target}"
export M3_SCREENSHOT_DIR="$root/docs/screenshots"
mkdir -p "$M3_SCREENSHOT_DIR"
# The bulk answer's pictures come from its SQLite run (no PostgreSQL server needed here).
cargo nextest run -p m3-tests --test serve_forms_browser --test serve_browser --test serve_inbox_browser --test serve_bulk_browser -E 'not test(on_postgres)' --no-fail-fast
ls -1 "$M3_SCREENSHOT_DIR"
