#!/bin/sh
# insn_per_token.sh - guest instructions per decoded token of each AArch64 kernel path under
# qemu-aarch64 -cpu max (docs/kernels.md, "Instruction counts"): instruction counts, not time.
# Runs the cross-built program (build-arm64) with the plugin of insn_count.c, 1 thread, greedy,
# twice per path (N1 and N2 new tokens after the same prompt); (count2 - count1) / (N2 - N1) is
# the cost of one decode step (n = 1 row), model loading and prefill cancelled out.
# Usage: scripts/qemu/insn_per_token.sh MODEL.gguf [N1 N2]
set -eu
cd "$(dirname "$0")/../.."
M=$1; N1=${2:-2}; N2=${3:-10}
cc -shared -fPIC -O2 -o build-arm64/insn_count.so scripts/qemu/insn_count.c
count() { # path, new tokens
  qemu-aarch64 -L / -cpu max -plugin build-arm64/insn_count.so -d plugin build-arm64/sdnpu --kernel "$1" run --model "$M" \
    --prompt-ids "1 2 3 4 5 6 7 8" --max-tokens "$2" --ignore-eos --threads 1 2>&1 >/dev/null | sed -n 's/^insns //p'
}
for k in portable neon dotprod i8mm; do
  a=$(count $k "$N1"); b=$(count $k "$N2")
  echo "$k $(( (b - a) / (N2 - N1) )) instructions per decoded token"
done
