"""Resumable benchmark cells (standard library only): each cell runs in its own process, which prints its
result as one line `RESULT {json}`; each result is a line of OUT/cells.jsonl, and a rerun skips the cells
already there."""

import argparse
import json
import os
import subprocess
import time
from pathlib import Path


class CellLog:
    """OUT/cells.jsonl: the cells run so far (`cells`), `done(*fields)` the keys of those that did not fail,
    `add(result)` prints one and appends it."""

    def __init__(self, out):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.record = self.out / "cells.jsonl"
        self.cells = [json.loads(line) for line in self.record.read_text().splitlines()] if self.record.exists() else []

    def done(self, *fields):
        return {tuple(c[f] for f in fields) for c in self.cells if "error" not in c}

    def add(self, result, shown=None):
        print(json.dumps({k: v for k, v in result.items() if shown is None or k in shown}), flush=True)
        with open(self.record, "a") as file:
            file.write(json.dumps(result) + "\n")
        self.cells.append(result)


def run_cell(command, env):
    """The `RESULT` of `command` run with `env`, with its wall time `whole_s`, or {"error": its last line}."""
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1][-300:]}
    return dict(json.loads(lines[-1][len("RESULT "):]), whole_s=time.perf_counter() - started)


def answer(cell, spec_text):
    """In a cell's process: runs `cell` on the JSON `spec_text` and prints its result as the `RESULT` line."""
    print("RESULT " + json.dumps(cell(json.loads(spec_text))), flush=True)


def fuxictr_arguments(parser, out, written):
    """The arguments of a script that runs cells against FuxiCTR: its interpreter and model_zoo folder, the
    folder OUT (`written`: what goes there) and the hidden entries a cell's process is started with."""
    parser.add_argument("--fuxictr-python", help="an interpreter where `import fuxictr` works")
    parser.add_argument("--fuxictr-zoo", help="FuxiCTR's model_zoo folder")
    parser.add_argument("--out", default=out, help=f"{written} (resumable)")
    parser.add_argument("--zoo-cell", help=argparse.SUPPRESS)
    parser.add_argument("--fuxictr-cell", help=argparse.SUPPRESS)


def answered(args, zoo_cell, fuxictr_cell):
    """In a cell's process (started with --zoo-cell or --fuxictr-cell): runs that cell and returns True."""
    if not (args.zoo_cell or args.fuxictr_cell):
        return False
    answer(zoo_cell, args.zoo_cell) if args.zoo_cell else answer(fuxictr_cell, args.fuxictr_cell)
    return True


def cpu_seconds():
    """This process' CPU time and its finished children's (FuxiCTR's Ray workers; a child still running is
    not counted, so FuxiCTR's figure is a lower bound)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system
