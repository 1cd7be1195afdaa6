#!/bin/bash
# The bf16 cache's value products: this build (new, values in BF16) against the build before it (base, bf16 keys only)
set -u
# NEW: this build (99efe48); BASE: the build before the value products (7328a4d, bf16 keys only)
NEW=${NEW:-$PWD/build/sdnpu} BASE=${BASE:?the sdnpu program of 7328a4d, an absolute path}  # run from the repository root
M=$HOME/.cache/sdnpu/models/SmolLM2-135M-Instruct.Q4_1.gguf
cd "$(dirname "$0")"
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-200 > cpu.txt
for r in 1 2 3; do
  $NEW bench-attention --context 256,2048,4096,8192 --rows 1,4,8,16 --cache f16,bf16,q8 --threads 2 --reps 9 > att-new-$r.txt 2>&1
  $BASE bench-attention --context 256,2048,4096,8192 --rows 1,4,8,16 --cache bf16 --threads 2 --reps 9 > att-base-$r.txt 2>&1
done
for r in 1 2; do
  for D in 4096 8192; do
    for C in f16 bf16 q8; do
      $NEW bench-verify --model smollm2-135m-instruct --rows 1,4,16 --context $D --threads 2 --reps 5 -ctk $C -ctv $C > ver-new-$C-$D-$r.txt 2>&1
    done
    $BASE bench-verify --model smollm2-135m-instruct --rows 1,4,16 --context $D --threads 2 --reps 5 -ctk bf16 -ctv bf16 > ver-base-bf16-$D-$r.txt 2>&1
  done
done
for r in 1 2; do
  for P in 256 4096 8192; do
    for C in f16 bf16; do
      $NEW bench-model --model smollm2-135m-instruct --prompt-tokens $P --max-tokens 8 --threads 2 --reps 1 --table-only -ctk $C -ctv $C > pre-new-$C-$P-$r.txt 2>&1
    done
    $BASE bench-model --model smollm2-135m-instruct --prompt-tokens $P --max-tokens 8 --threads 2 --reps 1 --table-only -ctk bf16 -ctv bf16 > pre-base-bf16-$P-$r.txt 2>&1
  done
done
echo measured > done1
