#!/usr/bin/env bash
# update-abi-baseline.sh - write the ABI baseline of this release, abi/libsdnpu-MAJOR.MINOR.abi
# (0.x; MAJOR from 1.0 on), from the built shared library, for scripts/check-abi.sh to compare
# later builds with. Run it when a release starts a new SONAME: after bumping the version in
# CMakeLists.txt and include/sdnpu.h (a release that breaks the ABI must: docs/library.md, "ABI"),
# then `git rm` the old baseline and commit the new one. It refuses to overwrite the baseline of
# the current version (that would hide a break) unless given --force (for a baseline that was
# itself wrong, e.g. made from a dirty tree).
#   usage: scripts/update-abi-baseline.sh [--force] [BUILD_DIR]   (default ./build, already built)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/abi-lib.sh"
force=0
[ "${1:-}" = --force ] && force=1 && shift
build="${1:-$root/build}"
abi_need_tools
lib="$build/libsdnpu.so"
[ -e "$lib" ] || { echo "update-abi-baseline: $lib not found (build first)" >&2; exit 1; }
if [ -e "$baseline" ] && [ "$force" = 0 ]; then
  echo "update-abi-baseline: $baseline exists: version $ver already has a baseline. A release that breaks" >&2
  echo "the ABI bumps the version (new SONAME) first; --force overwrites it anyway" >&2
  exit 1
fi
mkdir -p "$root/abi"
abi_dump "$lib" "$root/include" > "$baseline.tmp"
mv "$baseline.tmp" "$baseline"
echo "update-abi-baseline: wrote ${baseline#$root/} ($(grep -c '<elf-symbol ' "$baseline") exported functions)"
old="$(ls "$root"/abi/libsdnpu-*.abi | grep -v "libsdnpu-$abiver.abi" || true)"
[ -z "$old" ] || echo "update-abi-baseline: older baselines to git rm: $old"
