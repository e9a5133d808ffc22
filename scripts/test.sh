#!/usr/bin/env bash
# The test suite: set up .venv (with test extras) if needed, then run pytest once per Keras backend.
# Fails when any backend fails. Extra arguments go to pytest (e.g. scripts/test.sh -k schema).
#
# The backends run side by side, ZOO_TEST_JOBS at a time (default: the CPU count): most of a run is
# one busy core (XLA compiles, Python dispatch), so on a 2-core machine two backends at once take
# about the time of one. Each backend gets its own data-set cache; its output is printed when it ends.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$("$root/scripts/venv.sh" test)" || exit 1
cd "$root"
backends="${ZOO_BACKENDS:-tensorflow jax torch}"
jobs="${ZOO_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

run_backend() {
  local backend="$1" start rc
  start=$(date +%s)
  mkdir -p "$logs/cache-$backend"
  KERAS_BACKEND=$backend ZOO_DATA_CACHE="$logs/cache-$backend" "$venv/bin/python" -m pytest -q --durations=30 "${@:2}" \
    > "$logs/$backend.log" 2>&1
  rc=$?
  echo "=== KERAS_BACKEND=$backend: exit $rc in $(( $(date +%s) - start )) s" >> "$logs/$backend.log"
  echo $rc > "$logs/$backend.rc"
}

start_all=$(date +%s)
running=0
for backend in $backends; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  echo "=== KERAS_BACKEND=$backend started"
  run_backend "$backend" "$@" &
  running=$((running + 1))
done
wait

failed=""
for backend in $backends; do
  echo "=== KERAS_BACKEND=$backend"
  cat "$logs/$backend.log"
  [ "$(cat "$logs/$backend.rc" 2>/dev/null || echo 1)" -eq 0 ] || failed="$failed $backend"
done
echo "=== all backends: $(( $(date +%s) - start_all )) s wall, $jobs at a time"
if [ -n "$failed" ]; then
  echo "FAILED under:$failed"
  exit 1
fi
echo "all backends passed: $backends"
