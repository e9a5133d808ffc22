#!/usr/bin/env bash
# The test suite: set up .venv (with test extras) if needed, then run pytest once per Keras backend.
# Fails when any backend fails. Extra arguments go to pytest (e.g. scripts/test.sh -k schema).
#
# The backends run one after the other, each over ZOO_TEST_JOBS pytest-xdist workers (default: the CPU
# count) that take test files as they free up (--dist loadfile: a file's tests, and its class fixtures,
# stay in one worker). So every core is busy until each backend's last file, instead of one backend
# running alone on one core at the end. Each backend gets its own data-set cache (shared by its workers:
# the cache writes atomically); its output is printed as it runs. JAX keeps its compiled programs in a
# persistent cache for the run (JAX_COMPILATION_CACHE_DIR, shared by the workers and the fresh interpreters
# the tests start): the suite builds the same small models many times (about 13% of a JAX run's time).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$("$root/scripts/venv.sh" test)" || exit 1
cd "$root"
backends="${ZOO_BACKENDS:-tensorflow jax torch}"
jobs="${ZOO_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

start_all=$(date +%s)
failed=""
for backend in $backends; do
  echo "=== KERAS_BACKEND=$backend"
  start=$(date +%s)
  mkdir -p "$logs/cache-$backend"
  # Tests marked `alone` (multi-process ones, which starve beside another test job) run after the
  # parallel workers, by themselves; exit 5 (nothing selected) is not a failure there.
  run() {
    KERAS_BACKEND=$backend ZOO_DATA_CACHE="$logs/cache-$backend" JAX_COMPILATION_CACHE_DIR="$logs/jax-cache" \
    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="${JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS:-0.2}" \
    "$venv/bin/python" -m pytest -q --durations=30 "$@"
  }
  if [ "$jobs" -gt 1 ]; then
    run -n "$jobs" --dist loadfile -m "not alone" "$@"
    rc=$?
    run -p no:xdist -m alone "$@"
    alone=$?
    if [ "$alone" -ne 0 ] && [ "$alone" -ne 5 ]; then rc=$alone; fi
  else
    run "$@"
    rc=$?
  fi
  echo "=== KERAS_BACKEND=$backend: exit $rc in $(( $(date +%s) - start )) s ($jobs workers)"
  [ "$rc" -eq 0 ] || failed="$failed $backend"
done
echo "=== all backends: $(( $(date +%s) - start_all )) s wall, $jobs workers per backend"
if [ -n "$failed" ]; then
  echo "FAILED under:$failed"
  exit 1
fi
echo "all backends passed: $backends"
