#!/usr/bin/env bash
# Runs one command with M3_TEST_POSTGRES_URL set: the server it names if already
# set, otherwise a throwaway PostgreSQL removed when the command ends.
#   scripts/with-postgres.sh cargo nextest run -p m3-store --features postgres,conformance
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/postgres-env.sh
source "$root/scripts/postgres-env.sh"
if [ -z "${M3_TEST_POSTGRES_URL:-}" ]; then
  start_test_postgres
fi
"$@"
