#!/usr/bin/env bash
# check-abi.sh - the ABI of the built libsdnpu.so against the committed baseline of this
# release, abi/libsdnpu-MAJOR.MINOR.abi (CI runs it: .ci/run). Both sides are libabigail dumps
# of the public types only (abidw --headers-dir include); abidiff compares them with
# abi/suppressions.abignore (fields appended to the structs that carry struct_size are
# compatible by sdnpu.h's rules) and --no-added-syms (new functions are compatible).
# It fails when abidiff reports an incompatible change (exit bit ABIDIFF_ABI_INCOMPATIBLE_CHANGE,
# 8: a function removed) or any other remaining ABI change (bit ABIDIFF_ABI_CHANGE, 4: a struct
# layout, a parameter or return type, an enumerator value), or cannot run (bits 1, 2).
# A release that breaks the ABI on purpose bumps the version (new SONAME) and writes a new
# baseline with scripts/update-abi-baseline.sh.
# First it checks that the public header is an app's only (abi_check_headers, abi-lib.sh):
# include/sdnpu.h has no EXPERIMENTAL item and declares nothing of include/sdnpu_experimental.h
# (the research settings), and examples/ and server/ do not include the experimental header.
#   usage: scripts/check-abi.sh [BUILD_DIR]              (default ./build, already built)
#          scripts/check-abi.sh --self-test [BUILD_DIR]  prove that the checks catch breaks:
#            rebuild runtime/api.c with a patched copy of sdnpu.h, relink the shared library
#            from BUILD_DIR's other objects (a CMake Makefile build), and expect the check to
#            fail for a field inserted into sdnpu_request, a function no longer exported and a
#            changed return type, and to pass for no change, a field appended to
#            sdnpu_request or to sdnpu_stats (inside sdnpu_result) and a new function (~10 s);
#            and expect the header check to fail for an EXPERIMENTAL marker, an ablation
#            method, a moved function or field declared in sdnpu.h and an example or server
#            file including sdnpu_experimental.h, and to pass for no change and a moved name
#            mentioned in a comment.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/abi-lib.sh"
self_test=0
[ "${1:-}" = --self-test ] && self_test=1 && shift
build="${1:-$root/build}"
abi_need_tools
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# compare LIB HEADERS_DIR: 0 compatible, 1 not (the report on stderr)
compare() {
  abi_dump "$1" "$2" > "$work/current.abi"
  local rc=0
  abidiff --no-added-syms --suppressions "$root/abi/suppressions.abignore" "$baseline" "$work/current.abi" > "$work/report.txt" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    cat "$work/report.txt" >&2
    if (( rc & 8 )); then echo "check-abi: incompatible ABI change (abidiff exit $rc: ABIDIFF_ABI_INCOMPATIBLE_CHANGE)" >&2
    elif (( rc & 4 )); then echo "check-abi: ABI change that sdnpu.h's rules do not allow (abidiff exit $rc: ABIDIFF_ABI_CHANGE)" >&2
    else echo "check-abi: abidiff failed (exit $rc)" >&2; fi
    return 1
  fi
  return 0
}

abi_check_headers "$root" || { echo "check-abi: include/sdnpu.h is not the public API alone (above)" >&2; exit 1; }
echo "check-abi: include/sdnpu.h declares nothing experimental; examples/ and server/ include only it"

if [ ! -e "$baseline" ]; then
  echo "check-abi: no baseline ${baseline#$root/} for version $ver: a release with a new SONAME writes one" >&2
  echo "with scripts/update-abi-baseline.sh (docs/library.md, \"ABI\")" >&2
  exit 1
fi
lib="$build/libsdnpu.so"
[ -e "$lib" ] || { echo "check-abi: $lib not found (build first)" >&2; exit 1; }
[[ "$(readelf -S "$lib")" == *.debug_info* ]] || { echo "check-abi: $lib has no debug info (build with -g: the Release flags have it)" >&2; exit 1; }
soname="$(objdump -p "$lib" | awk '$1 == "SONAME" {print $2}')"
if [ "$soname" != "libsdnpu.so.$abiver" ]; then
  echo "check-abi: $lib has SONAME $soname, but version $ver of include/sdnpu.h wants libsdnpu.so.$abiver" >&2
  exit 1
fi

if [ "$self_test" = 0 ]; then
  compare "$lib" "$root/include" || exit 1
  echo "check-abi: libsdnpu.so ($soname) is compatible with ${baseline#$root/}"
  exit 0
fi

# ---- self-test ----
fm="$build/CMakeFiles/sdnpu_obj.dir/flags.make"
lt="$build/CMakeFiles/sdnpu_shared.dir/link.txt"
[ -e "$fm" ] && [ -e "$lt" ] || { echo "check-abi --self-test: needs a CMake Makefile build in $build" >&2; exit 1; }
defs="$(sed -n 's/^C_DEFINES = //p' "$fm")"; incs="$(sed -n 's/^C_INCLUDES = //p' "$fm")"; flags="$(sed -n 's/^C_FLAGS = //p' "$fm")"
# variant NAME HEADER_SED [API_SED [API_APPEND]]: $work/NAME/libsdnpu.so
variant() {
  local d="$work/$1"
  mkdir -p "$d/include" "$d/runtime"
  cp "$root"/include/*.h "$d/include/"
  sed -e "$2" "$root/include/sdnpu.h" > "$d/include/sdnpu.h"
  sed -e "${3:-}" "$root/runtime/api.c" > "$d/runtime/api.c"
  [ -z "${4:-}" ] || echo "$4" >> "$d/runtime/api.c"
  # a variant whose edit no longer matches the sources would test nothing: say so
  if { [ -n "$2" ] && cmp -s "$root/include/sdnpu.h" "$d/include/sdnpu.h"; } ||
     { [ -n "${3:-}" ] && cmp -s "$root/runtime/api.c" "$d/runtime/api.c"; }; then
    echo "check-abi --self-test: $1: its edit matches nothing in include/sdnpu.h or runtime/api.c; update the variant" >&2
    exit 1
  fi
  # shellcheck disable=SC2086
  cc $defs -I"$d/include" $incs $flags -c "$d/runtime/api.c" -o "$d/api.o"
  local link
  link="$(sed -e "s# CMakeFiles/sdnpu_obj.dir/runtime/api.c.o # $d/api.o #" -e "s# -o libsdnpu\.so[.0-9]* # -o $d/libsdnpu.so #" "$lt")"
  (cd "$build" && eval "$link")
}
fails=0
expect() { # expect pass|fail NAME
  local got=pass
  compare "$work/$2/libsdnpu.so" "$work/$2/include" 2> "$work/$2.log" || got=fail
  if [ "$got" = "$1" ]; then echo "check-abi --self-test: $2: the check says $got, as it should"
  else echo "check-abi --self-test: $2: the check gave $got, expected $1" >&2; cat "$work/$2.log" >&2; fails=1; fi
}
variant unchanged ''
variant field-inserted '/^typedef struct sdnpu_request {/a\    int abi_selftest;'
variant function-removed 's/^SDNPU_API void sdnpu_free(void \*p);/void sdnpu_free(void *p);/'
variant return-type-changed 's/^SDNPU_API int sdnpu_context_n_ctx(/SDNPU_API long sdnpu_context_n_ctx(/' 's/^int sdnpu_context_n_ctx(/long sdnpu_context_n_ctx(/'
# appended after whatever field is last today: before the closing line of the struct
variant field-appended '/^} sdnpu_request;/i\    const char *abi_selftest;' \
  's/KNOWN_REQUEST END_OF(sdnpu_request, [A-Za-z0-9_.]*)/KNOWN_REQUEST END_OF(sdnpu_request, abi_selftest)/'
variant stats-field-appended '/^} sdnpu_stats;/i\    long abi_selftest;' \
  's/KNOWN_RESULT END_OF(sdnpu_result, stats\.[A-Za-z0-9_]*)/KNOWN_RESULT END_OF(sdnpu_result, stats.abi_selftest)/'
variant function-added '/^SDNPU_API void sdnpu_free(void \*p);/a\SDNPU_API int sdnpu_abi_selftest(void);' '' 'int sdnpu_abi_selftest(void) { return 1; }'
expect pass unchanged
expect fail field-inserted
expect fail function-removed
expect fail return-type-changed
expect pass field-appended
expect pass stats-field-appended
expect pass function-added

# the header check: a copy of include/, examples/ and server/ with FILE edited by SED
# hvariant NAME FILE SED: $work/h-NAME
hvariant() {
  local d="$work/h-$1"
  mkdir -p "$d/include" "$d/examples" "$d/server"
  cp "$root"/include/*.h "$d/include/"
  cp "$root"/examples/*.c "$d/examples/"
  cp "$root"/server/*.c "$root"/server/*.h "$d/server/"
  [ -z "$2" ] || { sed -e "$3" "$root/$2" > "$d/$2"; cmp -s "$root/$2" "$d/$2" &&
    { echo "check-abi --self-test: h-$1: its edit matches nothing in $2; update the variant" >&2; exit 1; }; }
  return 0
}
hexpect() { # hexpect pass|fail NAME
  local got=pass
  abi_check_headers "$work/h-$2" 2> "$work/h-$2.log" || got=fail
  if [ "$got" = "$1" ]; then echo "check-abi --self-test: header check, $2: says $got, as it should"
  else echo "check-abi --self-test: header check, $2: gave $got, expected $1" >&2; cat "$work/h-$2.log" >&2; fails=1; fi
}
hvariant unchanged '' ''
hvariant marker include/sdnpu.h '/^#define SDNPU_H/a\/* [EXPERIMENTAL] a research knob */'
hvariant ablation-method include/sdnpu.h '/^#define SDNPU_H/a\/* methods: "sam+cal" too */'
hvariant moved-function include/sdnpu.h '/^SDNPU_API void sdnpu_free(void \*p);/a\SDNPU_API sdnpu_status sdnpu_set_prefill_matmul(const char *name, sdnpu_error *err);'
hvariant moved-field include/sdnpu.h '/^} sdnpu_context_params;/i\    int graph_pin;'
hvariant example-includes examples/summarize.c '0,/^#include/s//#include "sdnpu_experimental.h"\n#include/'
hvariant server-includes server/server.c '0,/^#include/s//#include <sdnpu_experimental.h>\n#include/'
hvariant name-in-comment include/sdnpu.h '/^#define SDNPU_H/a\/* graph_pin and sdnpu_graph_report: see sdnpu_experimental.h */'
hexpect pass unchanged
hexpect fail marker
hexpect fail ablation-method
hexpect fail moved-function
hexpect fail moved-field
hexpect fail example-includes
hexpect fail server-includes
hexpect pass name-in-comment
[ "$fails" = 0 ] && echo "check-abi --self-test: passed" || { echo "check-abi --self-test: FAILED" >&2; exit 1; }
