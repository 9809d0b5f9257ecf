# Sourced by scripts/test.sh and scripts/with-postgres.sh: start_test_postgres
# starts a throwaway PostgreSQL server (as root: initdb as the postgres user, a
# free port on 127.0.0.1, a private socket dir) and exports M3_TEST_POSTGRES_URL;
# an EXIT trap stops and removes it, also when the caller fails.
# A throwaway PostgreSQL server for the PostgreSQL backend's tests (or the one
# M3_TEST_POSTGRES_URL names). It is stopped and removed at exit, also when a
# step fails. fsync is off: test speed only, never for benchmark numbers.
start_test_postgres() {
  local pgbin
  pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  if [ -z "$pgbin" ] || [ ! -x "$pgbin/pg_ctl" ]; then
    echo "== installing PostgreSQL (apt-get) ==" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  fi
  pg_dir=$(mktemp -d)
  pg_ctl_bin="$pgbin/pg_ctl"
  trap stop_test_postgres EXIT
  chown postgres "$pg_dir"
  chmod 700 "$pg_dir"
  local port
  port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  echo "== a throwaway PostgreSQL on 127.0.0.1:$port ==" >&2
  runuser -u postgres -- "$pgbin/initdb" -D "$pg_dir/data" -U postgres --auth=trust -E UTF8 \
    --locale=C.UTF-8 --no-sync >"$pg_dir/initdb.log"
  runuser -u postgres -- "$pgbin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $pg_dir -c max_connections=400 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    start >/dev/null
  export M3_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
}
stop_test_postgres() {
  if [ -n "${pg_dir:-}" ] && [ -d "$pg_dir" ]; then
    runuser -u postgres -- "$pg_ctl_bin" -D "$pg_dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$pg_dir"
  fi
}

