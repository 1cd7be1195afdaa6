# .ci/stage.sh - sourced by .ci/run: `stage NAME CMD...` runs one CI stage, records its wall
# time and outcome, and on failure prints the table and ends the run with the stage's status.
# `stage_report` prints the table (every stage's seconds, then the total) at the end.
ci_t0=$(date +%s)
ci_names=()
ci_secs=()
ci_marks=()

stage_report() {
  local i total=$(( $(date +%s) - ci_t0 ))
  echo
  echo "== CI stage times (2 cores; the limit is 45 min) =="
  for i in "${!ci_names[@]}"; do
    printf '  %-14s %5d s  %s\n' "${ci_names[$i]}" "${ci_secs[$i]}" "${ci_marks[$i]}"
  done
  printf '  %-14s %5d s  (%d min %02d s)\n' total "$total" $(( total / 60 )) $(( total % 60 ))
}

stage() {
  local name="$1" t rc=0
  shift
  echo
  echo "== stage $name: $* =="
  t=$(date +%s)
  "$@" || rc=$?
  ci_names+=("$name")
  ci_secs+=($(( $(date +%s) - t )))
  if [ "$rc" -ne 0 ]; then
    ci_marks+=("FAILED (exit $rc)")
    stage_report
    echo "CI failed in stage $name" >&2
    exit "$rc"
  fi
  ci_marks+=(ok)
}
