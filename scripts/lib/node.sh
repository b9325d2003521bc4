# Node.js and the locked npm folders: the clients (yjs, y-websocket, ws) that the
# interoperability tests drive from tests/interop, and the peer servers and client harness of
# the peers benchmark in bench/peers, each installed from its lockfile. Source this file; it
# defines functions only.

# Installs Debian's nodejs and npm where node (or npm) is missing.
ensure_node() {
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "installing nodejs npm" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq >&2
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      nodejs npm >&2
  fi
}

# Installs FOLDER/node_modules (FOLDER relative to the repository) exactly as its
# package-lock.json fixes it, when it is missing or older than the lockfile. Quiet unless npm
# fails, when its output goes to stderr.
install_locked_npm_folder() {
  local root dir
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  dir="$root/$1"
  # npm ci writes node_modules/.package-lock.json last, so its age is the installation's.
  if [ -f "$dir/node_modules/.package-lock.json" ] \
    && ! [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    return 0
  fi
  echo "installing the npm packages in $1" >&2
  local log
  log=$(mktemp /tmp/fermata-npm.XXXXXX)
  if ! (cd "$root" && npm ci --no-audit --no-fund --loglevel=error --prefix "$1") \
    >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}

# The Yjs clients of the interoperability tests.
install_interop_clients() {
  install_locked_npm_folder tests/interop
}

# The peer servers and the client harness of the peers benchmark.
install_bench_peers() {
  install_locked_npm_folder bench/peers
}
