#!/usr/bin/env bash
# Creates or updates the project's virtual environment (.venv) and prints its path.
# Sourced by scripts/demo.sh and scripts/test.sh; safe to run again (it reinstalls only when
# pyproject.toml changed or the environment is missing).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${ZOO_VENV:-$root/.venv}"
extras="${1:-}"
stamp="$venv/.zoo-installed${extras:+-$extras}"
want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  "$venv/bin/python" -m pip install -q --upgrade pip >&2
  # setuptools' one "Editable installation" notice warns of folders named like the package; the mapped
  # layout (layers/ -> zoo.layers, ...; DESIGN.md) is deliberate, so it is silenced here, nothing else.
  PYTHONWARNINGS="ignore:Editable installation" "$venv/bin/python" -m pip install -q -e "$root${extras:+[$extras]}" >&2
  if [ "$extras" = "test" ]; then
    # TF Serving's request protos, for the export tests. --no-deps: its declared dependency is the
    # full `tensorflow` package, which would land on top of tensorflow-cpu.
    "$venv/bin/python" -m pip install -q --no-deps tensorflow-serving-api >&2
  fi
  echo "$want" > "$stamp"
fi
echo "$venv"
