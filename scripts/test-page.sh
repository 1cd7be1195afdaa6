#!/usr/bin/env bash
# test-page.sh - the page of `sdnpu serve` (GET /, server/page/) in a real browser: starts the
# server with SmolLM2-135M-Instruct, an API key and a history store on a loopback port, then
# drives headless Chromium through it with Selenium (scripts/test_page.py: a whole request
# whose answer must equal the API's, drafted tokens marked, a repeat drafting from the first
# answer, a document with <script> shown as text and run never, plain decoding side by side,
# no console errors). CI runs it after the tests (.ci/run); its Debian packages: chromium,
# chromium-driver, python3-selenium.
#   usage: scripts/test-page.sh [BUILD_DIR] [--screenshots DIR]   (default ./build, already built)
#   --screenshots DIR also saves DIR/page-laptop.png and DIR/page-phone.png (docs/server.md's)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build"
[ $# -gt 0 ] && [ "$1" != --screenshots ] && { build="$1"; shift; }
build="$(cd "$build" && pwd)"
shots=()
[ "${1:-}" = --screenshots ] && shots=(--screenshots "$(mkdir -p "$2" && cd "$2" && pwd)")
work="$(mktemp -d)"
pid=""
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Debian's python3-selenium is for Debian's python3 (a pyenv or venv python3 may lack it)
py=python3
"$py" -c "import selenium" 2>/dev/null || py=/usr/bin/python3
"$py" -c "import selenium" || { echo "test-page: needs Selenium (Debian: apt-get install chromium chromium-driver python3-selenium)" >&2; exit 1; }
command -v chromedriver >/dev/null || { echo "test-page: needs chromedriver (Debian: chromium-driver)" >&2; exit 1; }

key="page-$RANDOM$RANDOM"
"$build/sdnpu" serve --model smollm2-135m-instruct --host 127.0.0.1 --port 0 --api-key "$key" \
  --slots 1 --threads 2 --history "$work/history.sqlite" 2> "$work/server.log" &
pid=$!
port=""
for _ in $(seq 600); do
  port="$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/server.log" | grep -o '[0-9]*$' || true)"
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/server.log" >&2; echo "test-page: the server exited" >&2; exit 1; }
  sleep 0.2
done
[ -n "$port" ] || { cat "$work/server.log" >&2; echo "test-page: the server did not start" >&2; exit 1; }
head -1 "$work/server.log"

"$py" "$root/scripts/test_page.py" "http://127.0.0.1:$port" "$key" "${shots[@]}"

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[ "$rc" = 0 ] || { tail -5 "$work/server.log" >&2; echo "test-page: the server exited with $rc after SIGTERM" >&2; exit 1; }
echo "test-page: passed"
