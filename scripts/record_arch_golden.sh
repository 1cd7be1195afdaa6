#!/bin/sh
# record_arch_golden.sh - record tests/golden/arch_logits.txt, the logits hashes that
# test_arch_golden compares on every kernel path of both architectures: run on
# x86-64 with the real models in the model cache (./sdnpu pull smollm2-135m-instruct,
# ./sdnpu pull gemma-3-270m), portable kernel path. Usage: scripts/record_arch_golden.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/.."
B=${1:-build}
[ "$(uname -m)" = x86_64 ] || { echo "record on x86-64" >&2; exit 2; }
cmake --build "$B" -j2 --target test_arch_golden
SDN_SOURCE=$PWD SDN_GOLDEN_RECORD=1 SDN_TEST_FILTER='*PORTABLE*' "$B/test_arch_golden"
# the recording must also pass as a comparison
SDN_SOURCE=$PWD SDN_TEST_FILTER='*PORTABLE*' "$B/test_arch_golden"
