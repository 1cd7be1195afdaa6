#!/usr/bin/env bash
# The Python package (docs/python.md) as a user gets it: build the wheel from this checkout
# in a clean virtual environment (pip's build isolation: scikit-build-core runs CMake; the
# wheel holds libsdnpu.so and the sdnpu program), install it into another clean one with
# the test dependencies, and run python/tests with pytest from outside the source tree (so
# the installed package is the one tested), the study on a local three-node Ray cluster
# included (on 127.0.0.1 only: the test fails on any socket of the cluster elsewhere).
# Needs the model cache's SmolLM2 (`sdnpu pull`) and ../shared; CI=true makes their
# absence a failure. A run that collects no test fails (pytest's exit 5).
# Usage: bash scripts/test-python.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d /tmp/sdnpu-py.XXXXXX)
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)
python3 -m venv "$work/build-env"
"$work/build-env/bin/pip" wheel -q "$root" --no-deps -w "$work/dist"
echo "test-python: wheel $(basename "$work"/dist/*.whl) built in $(( $(date +%s) - t0 )) s"
python3 -m venv "$work/env"
"$work/env/bin/pip" install -q "$work"/dist/sdnpu-*.whl "pytest>=7" pandas matplotlib jsonschema "ray>=2.9"
cd "$work"
"$work/env/bin/python" -m sdnpu version
rc=0
SDN_SHARED="${SDN_SHARED:-$root/../shared}" "$work/env/bin/python" -m pytest -q -rs -p no:cacheprovider "$root/python/tests" || rc=$?
if [ "$rc" -eq 5 ]; then echo "test-python: pytest collected no tests" >&2; exit 1; fi
echo "test-python: done in $(( $(date +%s) - t0 )) s (exit $rc)"
exit "$rc"
