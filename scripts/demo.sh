#!/usr/bin/env bash
# The main job: set up .venv if needed, then run `python -m zoo demo` (zoo/demo.py) under TensorFlow:
# LightSUAN distilled from SUAN, parallel candidate scoring with the history cache, a KerasTuner search,
# a preset, and a SavedModel called from a TensorFlow-only process, on the embedded simulator.
# KERAS_BACKEND=jax|torch runs it under another backend; arguments go to the demo (--help lists them).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$("$root/scripts/venv.sh")"
cd "$root"
export KERAS_BACKEND="${KERAS_BACKEND:-tensorflow}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"   # TensorFlow's C++ logs: errors only
exec "$venv/bin/python" -m zoo demo "$@"
