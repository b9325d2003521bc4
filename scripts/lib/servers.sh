# Throwaway database servers for the test and benchmark commands: each in a fresh temporary
# folder, on a free loopback port, run as its Debian service user (both refuse to run as root),
# stopped and removed by stop_servers. Source this file; it defines functions only.

# Installs the Debian packages that bring the server binaries, where they are missing.
ensure_server_packages() {
  local missing=()
  ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || missing+=(postgresql postgresql-client)
  command -v mariadbd >/dev/null 2>&1 || missing+=(mariadb-server mariadb-client)
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
  [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  fi
}

# A loopback port nothing listens on (python3 asks the kernel; bash probes as a fallback).
free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
    return
  fi
  local port
  while :; do
    port=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
  done
}

# Runs a command as a service user when we are root; as ourselves otherwise.
as_user() {
  local user=$1; shift
  if [ "$(id -u)" -eq 0 ]; then runuser -u "$user" -- "$@"; else "$@"; fi
}

# start_postgres durable|fast: sets PG_ROOT, PG_PORT, PG_BIN and FERMATA_TEST_POSTGRES_URL.
# "fast" turns off fsync for functional tests; benchmarks and crash tests use "durable".
start_postgres() {
  local mode=${1:-fast}
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  PG_ROOT=$(mktemp -d /tmp/fermata-pg.XXXXXX)
  PG_PORT=$(free_port)
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$PG_ROOT"
  as_user postgres "$PG_BIN/initdb" -D "$PG_ROOT/data" -U postgres -A trust -E UTF8 \
    --locale=C.UTF-8 --no-sync >"$PG_ROOT/initdb.log" 2>&1 \
    || { cat "$PG_ROOT/initdb.log" >&2; return 1; }
  local options="-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_ROOT -c max_connections=400"
  if [ "$mode" = fast ]; then
    options="$options -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  fi
  as_user postgres "$PG_BIN/pg_ctl" -D "$PG_ROOT/data" -l "$PG_ROOT/server.log" -w -t 60 \
    -o "$options" start >/dev/null \
    || { cat "$PG_ROOT/server.log" >&2; return 1; }
  export FERMATA_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres"
  echo "PostgreSQL ($mode) on 127.0.0.1:$PG_PORT" >&2
}

# mariadb_instance ROOT_VAR PORT_VAR [MARIADBD_ARGS...]: installs and starts a throwaway MariaDB
# server in a new folder on a free loopback port, sets ROOT_VAR and PORT_VAR to them, and adds
# the account fermata/fermata with every grant. The server may open 16,384 files (or the hard
# limit, when lower): at the soft limit of 1,024 that runuser sets, MariaDB shrinks its table
# cache to 421 tables, and a database whose db.opt it cannot open is reported with the server's
# default character set (latin1) instead of its own.
mariadb_instance() {
  local root_var=$1 port_var=$2
  shift 2
  local root port
  root=$(mktemp -d /tmp/fermata-my.XXXXXX)
  port=$(free_port)
  printf -v "$root_var" '%s' "$root"
  printf -v "$port_var" '%s' "$port"
  [ "$(id -u)" -eq 0 ] && chown mysql:mysql "$root"
  mariadb-install-db --no-defaults --user="$(id -u -n | sed 's/^root$/mysql/')" \
    --datadir="$root/data" --auth-root-authentication-method=normal --skip-test-db \
    >"$root/install.log" 2>&1 || { cat "$root/install.log" >&2; return 1; }
  # runuser resets the soft limit on open files to 1,024, and mariadbd does not raise it.
  as_user mysql bash -c 'ulimit -n 16384 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$@"' \
    mariadbd mariadbd --no-defaults --datadir="$root/data" --socket="$root/mysqld.sock" \
    --pid-file="$root/mysqld.pid" --log-error="$root/err.log" --port="$port" \
    --bind-address=127.0.0.1 --skip-name-resolve --skip-log-bin \
    --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 "$@" >/dev/null 2>&1 &
  local i
  for i in $(seq 1 600); do
    mariadb-admin --no-defaults --socket="$root/mysqld.sock" -uroot ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  mariadb --no-defaults --socket="$root/mysqld.sock" -uroot -e \
    "CREATE USER 'fermata'@'127.0.0.1' IDENTIFIED BY 'fermata'; GRANT ALL ON *.* TO 'fermata'@'127.0.0.1' WITH GRANT OPTION;" \
    || { cat "$root/err.log" >&2; return 1; }
}

# start_mariadb: sets MY_ROOT, MY_PORT and FERMATA_TEST_MYSQL_URL (an account with every grant).
start_mariadb() {
  mariadb_instance MY_ROOT MY_PORT
  export FERMATA_TEST_MYSQL_URL="mysql://fermata:fermata@127.0.0.1:$MY_PORT"
  echo "MariaDB on 127.0.0.1:$MY_PORT" >&2
}

# start_restricted_mariadb: a second server started with --skip-show-database, as hardened
# servers are, where listing databases needs the SHOW DATABASES privilege; sets MY2_ROOT,
# MY2_PORT and FERMATA_TEST_MYSQL_RESTRICTED_URL.
start_restricted_mariadb() {
  mariadb_instance MY2_ROOT MY2_PORT --skip-show-database
  export FERMATA_TEST_MYSQL_RESTRICTED_URL="mysql://fermata:fermata@127.0.0.1:$MY2_PORT"
  echo "MariaDB (skip-show-database) on 127.0.0.1:$MY2_PORT" >&2
}

# stop_mariadb ROOT: stops the server in ROOT and removes the folder.
stop_mariadb() {
  local root=$1
  if [ -n "$root" ] && [ -d "$root" ]; then
    mariadb-admin --no-defaults --socket="$root/mysqld.sock" -uroot shutdown >/dev/null 2>&1 \
      || { [ -f "$root/mysqld.pid" ] && kill -9 "$(cat "$root/mysqld.pid")" 2>/dev/null; } || true
    rm -rf "$root"
  fi
}

# start_s3: an S3-compatible object store (moto's server, from PyPI, installed with pip where
# missing) on a free loopback port, with the bucket `fermata-test`; sets S3_ROOT, S3_PID and
# FERMATA_TEST_S3_URL. It keeps its objects in memory.
start_s3() {
  if ! command -v moto_server >/dev/null 2>&1; then
    echo "installing moto[server]" >&2
    python3 -m pip install --quiet --disable-pip-version-check 'moto[server]>=5,<6' >&2
    hash -r
  fi
  S3_ROOT=$(mktemp -d /tmp/fermata-s3.XXXXXX)
  local port
  port=$(free_port)
  moto_server -H 127.0.0.1 -p "$port" >"$S3_ROOT/server.log" 2>&1 &
  S3_PID=$!
  python3 - "$port" <<'PY' || { cat "$S3_ROOT/server.log" >&2; return 1; }
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}"
for _ in range(300):
    try:
        urllib.request.urlopen(url, timeout=1)
        break
    except OSError:
        time.sleep(0.1)
urllib.request.urlopen(urllib.request.Request(f"{url}/fermata-test", method="PUT"), timeout=5)
PY
  export FERMATA_TEST_S3_URL="http://127.0.0.1:$port"
  echo "S3 (moto) on 127.0.0.1:$port" >&2
}

# start_webdriver: chromedriver (Debian's chromium-driver, driving /usr/bin/chromium) on a free
# loopback port for the browser tests; sets WD_ROOT, WD_PID (also its process group) and
# FERMATA_TEST_WEBDRIVER_URL.
start_webdriver() {
  WD_ROOT=$(mktemp -d /tmp/fermata-wd.XXXXXX)
  local port
  port=$(free_port)
  # In a process group of its own, so stopping it also stops any browser a failed test left.
  setsid chromedriver --port="$port" --allowed-ips=127.0.0.1 \
    --log-path="$WD_ROOT/chromedriver.log" >"$WD_ROOT/server.log" 2>&1 &
  WD_PID=$!
  local i
  for i in $(seq 1 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    kill -0 "$WD_PID" 2>/dev/null || { cat "$WD_ROOT/server.log" >&2; return 1; }
    sleep 0.1
  done
  export FERMATA_TEST_WEBDRIVER_URL="http://127.0.0.1:$port"
  echo "chromedriver on 127.0.0.1:$port" >&2
}

stop_servers() {
  if [ -n "${WD_PID:-}" ]; then
    kill -- "-$WD_PID" 2>/dev/null || kill "$WD_PID" 2>/dev/null || true
    wait "$WD_PID" 2>/dev/null || true
    rm -rf "${WD_ROOT:-}"
  fi
  if [ -n "${S3_PID:-}" ]; then
    kill "$S3_PID" 2>/dev/null || true
    wait "$S3_PID" 2>/dev/null || true
    rm -rf "${S3_ROOT:-}"
  fi
  if [ -n "${PG_ROOT:-}" ] && [ -d "$PG_ROOT" ]; then
    as_user postgres "$PG_BIN/pg_ctl" -D "$PG_ROOT/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$PG_ROOT"
  fi
  stop_mariadb "${MY_ROOT:-}"
  stop_mariadb "${MY2_ROOT:-}"
}
