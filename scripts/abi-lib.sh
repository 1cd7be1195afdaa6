# abi-lib.sh - shared by scripts/check-abi.sh and scripts/update-abi-baseline.sh (sourced).
# Sets root, ver (SDNPU_VERSION of include/sdnpu.h), abiver (the SONAME's version: major.minor
# while the major version is 0, else major) and baseline (abi/libsdnpu-$abiver.abi); abi_dump
# LIB HEADERS_DIR writes LIB's ABI (public types only) as libabigail XML to stdout.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ver="$(sed -n 's/^#define SDNPU_VERSION "\(.*\)"$/\1/p' "$root/include/sdnpu.h")"
if [ "${ver%%.*}" = 0 ]; then abiver="${ver%.*}"; else abiver="${ver%%.*}"; fi
baseline="$root/abi/libsdnpu-$abiver.abi"
abi_need_tools() {
  command -v abidw >/dev/null && command -v abidiff >/dev/null && return 0
  echo "abi: abidw/abidiff not found: apt-get install abigail-tools (scripts/install-deps.sh)" >&2
  exit 2
}
abi_dump() { abidw --headers-dir "$2" --no-corpus-path --no-show-locs "$1"; }
