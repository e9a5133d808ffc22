#!/usr/bin/env bash
# The test suite: set up .venv (with test extras) if needed, then run pytest once per Keras backend.
# Fails when any backend fails. Extra arguments go to pytest (e.g. scripts/test.sh -k schema).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$("$root/scripts/venv.sh" test)" || exit 1
cd "$root"
backends="${ZOO_BACKENDS:-tensorflow jax torch}"
failed=""
for backend in $backends; do
  echo "=== KERAS_BACKEND=$backend"
  start=$(date +%s)
  KERAS_BACKEND=$backend "$venv/bin/python" -m pytest -q "$@"
  rc=$?
  echo "=== KERAS_BACKEND=$backend: exit $rc in $(( $(date +%s) - start )) s"
  [ $rc -eq 0 ] || failed="$failed $backend"
done
if [ -n "$failed" ]; then
  echo "FAILED under:$failed"
  exit 1
fi
echo "all backends passed: $backends"
