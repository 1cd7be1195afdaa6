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

# abi_check_headers DIR: the public header DIR/include/sdnpu.h holds nothing experimental:
# no "EXPERIMENTAL" marker, no ablation method (sam+tree, sam+cal, sam+reuse), and, outside
# its comments, none of the names DIR/include/sdnpu_experimental.h declares (its functions,
# types and macros) nor the graph fields that left sdnpu_context_params in 0.9; and no file
# of DIR/examples or DIR/server includes sdnpu_experimental.h (tests/test_layering.c checks
# their other includes). 0: clean; 1: not, the reasons on stderr.
abi_moved_fields="graphs graph_blocks g1 g2 profile_db graph_pin"
abi_check_headers() {
  local dir="$1" pub="$1/include/sdnpu.h" exp="$1/include/sdnpu_experimental.h" bad=0 names code n hits
  if [ ! -e "$pub" ] || [ ! -e "$exp" ]; then echo "check-headers: $pub or $exp is missing" >&2; return 1; fi
  if grep -n 'EXPERIMENTAL' "$pub" >&2; then
    echo "check-headers: include/sdnpu.h marks something EXPERIMENTAL: move it to include/sdnpu_experimental.h" >&2; bad=1
  fi
  if grep -nE 'sam\+(tree|cal|reuse)' "$pub" >&2; then
    echo "check-headers: include/sdnpu.h names an ablation method: sdnpu_experimental.h documents them" >&2; bad=1
  fi
  names="$( { grep -oE '^SDNPU_API [^(]*\(' "$exp" | sed 's/($//' | awk '{print $NF}' | tr -d '*'
              grep -oE '^\} *[A-Za-z_][A-Za-z0-9_]* *;' "$exp" | tr -d '}; '
              grep -oE '^#define +[A-Za-z_][A-Za-z0-9_]*' "$exp" | awk '{print $2}' | grep -vx 'SDNPU_EXPERIMENTAL_H'
              printf '%s\n' $abi_moved_fields; } | sort -u)"
  [ -n "$names" ] || { echo "check-headers: found no declarations in $exp" >&2; return 1; }
  code="$(perl -0777 -pe 's{/\*.*?\*/}{ }gs; s{//[^\n]*}{}g' "$pub")" # sdnpu.h without its comments
  for n in $names; do
    if grep -qw -- "$n" <<< "$code"; then
      echo "check-headers: include/sdnpu.h declares $n, which belongs in include/sdnpu_experimental.h" >&2; bad=1
    fi
  done
  hits="$(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^">]*/)?sdnpu_experimental\.h' "$dir/examples" "$dir/server" 2>/dev/null || true)"
  if [ -n "$hits" ]; then
    echo "check-headers: the examples and the server use only include/sdnpu.h, but these include sdnpu_experimental.h:" >&2
    echo "$hits" >&2; bad=1
  fi
  return "$bad"
}
