#!/usr/bin/env bash
# The main job: set up .venv if needed, then run `python -m zoo demo` (simulate, train, save, reload, score).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$("$root/scripts/venv.sh")"
cd "$root"
exec "$venv/bin/python" -m zoo demo "$@"
