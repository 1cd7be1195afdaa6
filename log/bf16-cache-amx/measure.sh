#!/bin/bash
# AMX-BF16: the bf16 cache's key scores on AMX tiles (path amx) against the same
# build's avx512 path (the kernels before this change: VDPBF16PS), in turn, on a CPU with
# AMX-BF16. Run from the repository root after building ./build.
set -u
S=${S:-$PWD/build/sdnpu}
cd "$(dirname "$0")"
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-200 > cpu.txt
for r in 1 2; do
  for k in avx512 amx; do
    $S bench-attention --kernel $k --context 256,2048,4096,8192 --rows 1,4,16 --cache bf16,f16 --threads 2 --reps 9 > att-$k-$r.txt 2>&1
  done
done
for r in 1 2; do
  for D in 4096 8192; do
    for k in avx512 amx; do
      $S bench-verify --kernel $k --model smollm2-135m-instruct --rows 1,4,16 --context $D --threads 2 --reps 5 -ctk bf16 -ctv bf16 > ver-$k-$D-$r.txt 2>&1
    done
  done
done
for r in 1 2; do
  for P in 256 4096 8192; do
    for k in avx512 amx; do
      $S bench-model --kernel $k --model smollm2-135m-instruct --prompt-tokens $P --max-tokens 8 --threads 2 --reps 1 --table-only -ctk bf16 -ctv bf16 > pre-$k-$P-$r.txt 2>&1
    done
  done
done
echo measured
