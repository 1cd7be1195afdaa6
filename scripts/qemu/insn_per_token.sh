#!/bin/sh
# insn_per_token.sh - guest instructions per decoded token of each AArch64 kernel path under
# qemu-aarch64 -cpu max (docs/results.md, "AArch64 under emulation"): instruction counts, not time.
# Runs the cross-built program (build-arm64) with the plugin of insn_count.c, 1 thread, greedy,
# twice per path (N1 and N2 new tokens after the same prompt); (count2 - count1) / (N2 - N1) is
# the cost of one decode step (n = 1 row), model loading and prefill cancelled out. Then the
# same for prompt tokens: 8 vs 72 prompt tokens, one new token, --prefill-matmul kernels (so
# every path runs its own kernels, none OpenBLAS): the cost of a prompt token in a 64-row batch.
# With CTX, the decode steps follow a CTX-token prompt instead of 8 (attention over a longer
# cache), and the prompt-token measurement is left out; PATHS overrides the list of paths.
# Usage: scripts/qemu/insn_per_token.sh MODEL.gguf [N1 N2 [CTX]]
set -eu
cd "$(dirname "$0")/../.."
M=$1; N1=${2:-2}; N2=${3:-10}; CTX=${4:-}
cc -shared -fPIC -O2 -o build-arm64/insn_count.so scripts/qemu/insn_count.c
count() { # path, new tokens, prompt length
  ids=$(seq -s ' ' 1 "$3")
  qemu-aarch64 -L / -cpu max -plugin build-arm64/insn_count.so -d plugin build-arm64/sdnpu --kernel "$1" --prefill-matmul kernels \
    run --model "$M" --prompt-ids "$ids" --max-tokens "$2" --ignore-eos --threads 1 2>&1 >/dev/null | sed -n 's/^insns //p'
}
for k in ${PATHS:-portable neon dotprod i8mm}; do
  if [ -n "$CTX" ]; then
    a=$(count $k "$N1" "$CTX"); b=$(count $k "$N2" "$CTX")
    echo "$k $(( (b - a) / (N2 - N1) )) instructions per decoded token after a $CTX-token prompt"
    continue
  fi
  a=$(count $k "$N1" 8); b=$(count $k "$N2" 8); c=$(count $k 1 8); d=$(count $k 1 72)
  echo "$k $(( (b - a) / (N2 - N1) )) instructions per decoded token, $(( (d - c) / 64 )) per prompt token (64-row batch)"
done
