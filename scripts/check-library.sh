#!/usr/bin/env bash
# check-library.sh - the proof that include/sdnpu.h is enough (CI runs it after the tests):
# install the built library into a temporary prefix, check that libsdnpu.so exports only the
# public API (the functions of include/sdnpu.h and include/sdnpu_experimental.h, both installed),
# build examples/summarize.c against the installed copy through pkg-config and
# through the CMake package, and run it twice on SmolLM2-135M-Instruct with a fresh history
# store: both runs must print identical plain and speculative output, and the second must
# draft from the first run's stored summary.
#   usage: scripts/check-library.sh [BUILD_DIR]   (default ./build, already built)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
lib="$work/prefix/lib"
[ -d "$lib" ] || lib="$(dirname "$(find "$work/prefix" -name libsdnpu.so | head -1)")"

exported="$(nm -D --defined-only "$lib/libsdnpu.so" | awk '{print $3}')"
bad="$(echo "$exported" | grep -v '^sdnpu_' || true)"
if [ -n "$bad" ]; then
  echo "check-library: libsdnpu.so exports symbols outside the public API:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "check-library: libsdnpu.so exports $(echo "$exported" | wc -l) functions, all sdnpu_*"
# the version: header, library file, SONAME (major.minor while the major version is 0) and pkg-config agree
ver="$(sed -n 's/^#define SDNPU_VERSION "\(.*\)"$/\1/p' "$root/include/sdnpu.h")"
soname="$(objdump -p "$lib/libsdnpu.so" | awk '$1 == "SONAME" {print $2}')"
want_so="libsdnpu.so.${ver%.*}"
[ "${ver%%.*}" = 0 ] || want_so="libsdnpu.so.${ver%%.*}"
if [ "$soname" != "$want_so" ] || [ ! -e "$lib/libsdnpu.so.$ver" ] || \
   [ "$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --modversion sdnpu)" != "$ver" ]; then
  echo "check-library: version $ver of include/sdnpu.h, SONAME $soname (want $want_so), pkg-config $(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --modversion sdnpu) disagree" >&2
  exit 1
fi
echo "check-library: version $ver, SONAME $soname"
declared="$(cat "$root/include/sdnpu.h" "$root/include/sdnpu_experimental.h" | grep -o '^SDNPU_API [^(]*(' | sed 's/($//' | awk '{print $NF}' | tr -d '*' | sort)"
if [ "$declared" != "$(echo "$exported" | sort)" ]; then
  echo "check-library: exported functions differ from those declared in include/sdnpu.h and include/sdnpu_experimental.h:" >&2
  diff <(echo "$declared") <(echo "$exported" | sort) >&2 || true
  exit 1
fi
# both headers installed, as they are, and the experimental one usable through pkg-config alone
inc="$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --variable=includedir sdnpu)"
for h in sdnpu.h sdnpu_experimental.h; do
  cmp -s "$root/include/$h" "$inc/$h" || { echo "check-library: $inc/$h is missing or differs from include/$h" >&2; exit 1; }
done
printf '#include <sdnpu_experimental.h>\nint main(void) { sdnpu_graph_params g; return sdnpu_graph_params_init(&g) || sdnpu_check_graphs("sync", 0); }\n' > "$work/exp.c"
"${CC:-cc}" -Wall -Wextra -Werror "$work/exp.c" $(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --cflags --libs sdnpu) -o "$work/exp"
LD_LIBRARY_PATH="$lib" "$work/exp" || { echo "check-library: a program over the installed sdnpu_experimental.h failed" >&2; exit 1; }
echo "check-library: both headers installed ($(echo "$declared" | wc -l) functions declared, all exported)"

# 1. pkg-config, with nothing but the installed prefix
PKG_CONFIG_PATH="$lib/pkgconfig" make -s -C "$root/examples" -f Makefile summarize CC="${CC:-cc}" \
  CFLAGS="-O2 -Wall -Wextra -Werror" >/dev/null
mv "$root/examples/summarize" "$work/summarize-pc"
# 2. the CMake package
cmake -S "$root/examples" -B "$work/build-examples" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build-examples" >/dev/null
echo "check-library: examples/summarize.c built against the installed library (pkg-config and CMake package)"

export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for exe in "$work/summarize-pc" "$work/build-examples/summarize"; do
  rm -f "$work/history.sqlite"
  "$exe" --history "$work/history.sqlite" --max-tokens 48 > "$work/run1.txt"
  "$exe" --history "$work/history.sqlite" --max-tokens 48 > "$work/run2.txt"
  tail -1 "$work/run2.txt"
  grep -q 'output identical' "$work/run1.txt" && grep -q 'output identical' "$work/run2.txt" || {
    echo "check-library: $exe: plain and speculative output differ" >&2; cat "$work/run1.txt" "$work/run2.txt" >&2; exit 1; }
  grep -Eq 'drafted from [1-9][0-9]* earlier summaries' "$work/run2.txt" || {
    echo "check-library: $exe: the second run did not draft from the stored summary" >&2; cat "$work/run2.txt" >&2; exit 1; }
done
echo "check-library: passed"
