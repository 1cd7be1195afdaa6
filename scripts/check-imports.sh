#!/usr/bin/env bash
# check-imports.sh - libsdnpu depends only on its arguments: the shared library imports no
# function that reads the environment or starts a process (docs/library.md, "What the library
# reads"), and never ends the process. `nm -D --undefined-only` of BUILD_DIR/libsdnpu.so must
# name none of: getenv, secure_getenv, system, popen, fork, vfork, the exec family (execl,
# execle, execlp, execv, execve, execvp, execvpe, fexecve), posix_spawn / posix_spawnp, and
# exit, _exit, _Exit, quick_exit, abort, __assert_fail (assert), raise, kill, pthread_exit.
# CI (.ci/run) runs it with --self-test, which first proves the check works: it relinks the
# library from the build's objects plus one planted object at a time (getenv, popen,
# posix_spawnp, execvp, exit, abort) and
# expects each to fail, and the unplanted relink to pass (a few seconds).
#   usage: scripts/check-imports.sh [--self-test] [BUILD_DIR]   (default ./build, already built)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
self_test=0
[ "${1:-}" = --self-test ] && self_test=1 && shift
build="${1:-$root/build}"
forbidden='^(getenv|secure_getenv|system|popen|fork|vfork|execl|execle|execlp|execv|execve|execvp|execvpe|fexecve|posix_spawn|posix_spawnp|exit|_exit|_Exit|quick_exit|abort|__assert_fail|raise|kill|pthread_exit)$'

# check LIB: 0 when it imports none of the forbidden functions, else 1 (listed on stderr)
check() {
  local bad
  bad="$(nm -D --undefined-only "$1" | awk '{print $NF}' | sed 's/@.*//' | grep -E "$forbidden" || true)"
  if [ -n "$bad" ]; then
    echo "check-imports: $1 imports $(echo $bad | tr ' ' ','): the library must read no environment and start no process" >&2
    return 1
  fi
  return 0
}

lib="$build/libsdnpu.so"
[ -e "$lib" ] || { echo "check-imports: $lib not found (build first)" >&2; exit 1; }
if [ "$self_test" = 1 ]; then
  lt="$build/CMakeFiles/sdnpu_shared.dir/link.txt"
  [ -e "$lt" ] || { echo "check-imports --self-test: needs a CMake Makefile build in $build" >&2; exit 1; }
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  # relink NAME [C_SOURCE]: $work/NAME/libsdnpu.so from the build's objects (+ the planted one)
  relink() {
    local d="$work/$1" obj=""
    mkdir -p "$d"
    if [ -n "${2:-}" ]; then
      printf '%s\n' "$2" > "$d/plant.c"
      cc -fPIC -O2 -c "$d/plant.c" -o "$d/plant.o"
      obj="$d/plant.o"
    fi
    local link
    link="$(sed -e "s# -o libsdnpu\.so[.0-9]* # -o $d/libsdnpu.so $obj #" "$lt")"
    (cd "$build" && eval "$link")
  }
  fails=0
  relink clean
  check "$work/clean/libsdnpu.so" || { echo "check-imports --self-test: the unplanted relink fails the check" >&2; fails=1; }
  for plant in 'getenv("HOME")' 'popen("true", "r")' 'posix_spawnp(0, "true", 0, 0, 0, 0)' 'execvp("true", 0)' 'exit(2), 0L' 'abort(), 0L'; do
    fn="${plant%%(*}"
    relink "$fn" "#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
long sdn_planted_$fn(void) { return (long)($plant); }"
    if check "$work/$fn/libsdnpu.so" 2>/dev/null; then
      echo "check-imports --self-test: a library with $fn planted passes the check" >&2
      fails=1
    else echo "check-imports --self-test: planted $fn caught"; fi
  done
  [ "$fails" = 0 ] || exit 1
fi
check "$lib"
echo "check-imports: $lib imports no getenv, system, popen, fork, exec*, posix_spawn*, exit, abort or other process-ending call"
