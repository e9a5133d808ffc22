"""README.md runs as written: every ```python block, in order, one namespace per section (a `##` or `###`
heading: a reader starts each section afresh), and every `python -m zoo ...` command, in ```bash blocks and
in inline code, in a temporary working folder.

Sizes are made small by exact substitutions (`SMALL`): each must occur in the README, so a stale one
fails. Paths to a data set's raw files (`DATA`) point at the ../shared/data samples, and files the README
calls yours (`YOURS`) are written from them; a block or command that needs an absent sample is skipped.
A fenced block that is not run says why on the line before it, `<!-- not run: reason -->`; only a few may
(`MAX_NOT_RUN`). Every command must pass `bash -n` first (an unquoted `(64,32)` is a shell syntax error).

It runs under one backend, torch: the blocks train several small models for a few steps each, which torch
runs eagerly, while TensorFlow and JAX spend 10-60 s tracing or compiling each model; every call the
README makes is tested on all three backends by the zoo's own tests.
"""

import contextlib
import io
import itertools
import os
import re
import shlex
import subprocess
import time
import unittest
from unittest import mock

import keras

from tests.testing import ROOT, SHARED_DATA, TestCase

README = ROOT / "README.md"
MAX_NOT_RUN = 5  # the fifth: a TF Serving curl of the raw signature (needs the server)
NOT_RUN = re.compile(r"<!-- not run: (.+) -->")
# README text -> what the test runs instead (a few rows, one epoch, one trial).
SMALL = {
    "simulator.dataset(30_000, batch_size=256), epochs=2": "simulator.dataset(512, batch_size=256), epochs=1",
    "simulator.dataset(20_000, seed=1)": "simulator.dataset(1_024, seed=1)",
    "simulator.dataset(4_000, seed=2, shuffle=False)": "simulator.dataset(256, seed=2, shuffle=False)",
    "simulator.dataset(4_000, seed=3, shuffle=False)": "simulator.dataset(256, seed=3, shuffle=False)",
    "simulator.sample(4_000, seed=3)": "simulator.sample(256, seed=3)",
    "recipe=\"deres\", epochs=3)": "recipe=\"deres\", epochs=1)",
    "search=[\"B\"], max_trials=3,": "search=[\"B\"], max_trials=1,",
    "--rows 20000 --recipe suan": "--rows 256 --epochs 1 --recipe suan",
    "--recipe rest --out runs/rest": "--recipe rest --rows 1000 --epochs 1 --out runs/rest",
    "--search k --search r --max-trials 4": "--search k --search r --max-trials 1 --rows 256",
    "evaluate rest_movielens --data movielens --path ml-100k/": "evaluate rest_movielens --data movielens --path "
                                                                 "ml-100k/ --rows 1000",
}
# README paths of raw data files -> (what the test writes instead, the shared sample that needs).
CRITEO = SHARED_DATA / "deepctr" / "criteo_sample.txt"
MOVIELENS = SHARED_DATA / "movielens-100k"
DATA = {
    "path/to/criteo/train.txt": (str(CRITEO), CRITEO),
    'manual_dir="path/to/criteo"': (f'manual_dir="{CRITEO.parent}"', CRITEO),
    "ml-100k/": ("ml-100k/", MOVIELENS / "u.data"),
    "my_ratings/u.data": ("my_ratings/u.data", MOVIELENS / "u.data"),
}
# Folders and files the README names as the reader's own, written in the working folder from the
# samples: (the sample, how many of its first lines; None: all).
YOURS = {
    "ml-100k/u.data": (MOVIELENS / "u.data", 20_000),
    "ml-100k/u.item": (MOVIELENS / "u.item", None),
    "ml-100k/u.user": (MOVIELENS / "u.user", None),
    "my_ratings/u.data": (MOVIELENS / "u.data", 500),
}

# Files the README calls yours that no sample holds: an impression log (tests/impression_logs.py).
GENERATED = {
    "my_logs/impressions.csv": dict(rows=600),
    "my_logs/later.csv": dict(rows=200, seed=1, start="2024-03-11T08:00:00Z", days=3, unseen_from=70),
}


def sections(text):
    """[(heading, [(language, code, not_run_reason)])] of the README's fenced blocks, in order, and
    [(heading, command)] of its inline `python -m zoo ...` commands."""
    result, commands, heading, block, previous = [], [], "top", None, ""
    for line in text.splitlines():
        if block is not None:
            if line.startswith("```"):
                result[-1][1].append((block[0], "\n".join(block[1]), block[2]))
                block = None
            else:
                block[1].append(line)
            continue
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
            result.append((heading, []))
        elif line.startswith("```"):
            reason = NOT_RUN.fullmatch(previous.strip())
            block = (line[3:].strip(), [], reason.group(1) if reason else None)
            if not result:
                result.append((heading, []))
        else:
            commands += [(heading, c) for c in re.findall(r"`(python -m zoo [^`]+)`", line)]
        if line.strip():
            previous = line
    return result, commands


def _substitute(code):
    for original, small in SMALL.items():
        code = code.replace(original, small)
    for original, (replacement, _) in DATA.items():
        code = code.replace(original, replacement)
    return code


def _missing_data(code):
    """The shared samples a README text needs that are absent here."""
    return [str(sample) for original, (_, sample) in DATA.items() if original in code and not sample.exists()]


def _commands(code):
    """The `python -m zoo` commands of a bash block (backslash continuations joined)."""
    code = code.replace("\\\n", " ")
    return [line.strip() for line in code.splitlines() if line.strip().startswith("python -m zoo ")]


def _run_command(command):
    """Runs `python -m zoo ...` in-process; (exit status, output)."""
    from zoo.__main__ import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            status = main(shlex.split(command, comments=True)[3:])
        except SystemExit as exit_:
            status = exit_.code
    return status, out.getvalue()


@unittest.skipUnless(keras.backend.backend() == "torch", "runs under torch only (see the module docstring)")
class ReadmeTest(TestCase):
    def setUp(self):
        super().setUp()
        self.text = README.read_text()
        self.sections, self.inline = sections(self.text)
        folder = self.get_temp_dir()
        cwd = os.getcwd()
        os.chdir(folder)
        self.addCleanup(os.chdir, cwd)
        from tests.impression_logs import write_impression_log

        for path, options in GENERATED.items():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_impression_log(path, **options)
        for path, (sample, lines) in YOURS.items():
            if sample.exists():
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(sample, "rb") as source, open(path, "wb") as target:
                    target.writelines(itertools.islice(source, lines))
        cache = os.environ.get("ZOO_DATA_CACHE") or self.get_temp_dir()
        patch = mock.patch.dict(os.environ, {"ZOO_DATA_CACHE": cache})
        patch.start()
        self.addCleanup(patch.stop)

    def test_substitutions_are_current_and_not_run_blocks_are_few(self):
        for original in list(SMALL) + list(DATA):
            self.assertIn(original, self.text, f"tests/readme_test.py substitutes {original!r}, not in the README")
        not_run = [(h, reason) for h, blocks in self.sections for _, _, reason in blocks if reason]
        self.assertLessEqual(len(not_run), MAX_NOT_RUN, not_run)
        for heading, blocks in self.sections:
            for language, code, reason in blocks:
                if language == "bash" and reason is None:
                    other = [line for line in code.replace("\\\n", " ").splitlines()
                             if line.strip() and not line.strip().startswith("python -m zoo ")]
                    self.assertEqual(other, [], f"{heading}: a bash block that is run holds only python -m zoo lines")

    def test_commands_are_valid_shell(self):
        commands = [c for _, blocks in self.sections for lang, code, _ in blocks if lang == "bash"
                    for c in _commands(code)] + [c for _, c in self.inline]
        self.assertGreater(len(commands), 5)
        for command in commands:
            result = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, f"{command}: {result.stderr}")

    def test_python_blocks_and_commands_run(self):
        ran, skipped = [], []
        for heading, blocks in self.sections:
            namespace = {"__name__": "readme"}
            for language, code, reason in blocks:
                if reason or language not in ("python", "bash"):
                    continue
                if _missing_data(code):
                    skipped.append((heading, _missing_data(code)))
                    continue
                code = _substitute(code)
                if language == "python":
                    start = time.perf_counter()
                    try:
                        exec(compile(code, f"README.md ({heading})", "exec"), namespace)
                    except Exception as error:
                        raise AssertionError(f"README section '{heading}': {type(error).__name__}: {error}") from error
                    ran.append((time.perf_counter() - start, f"python block in '{heading}'"))
                for command in _commands(code) if language == "bash" else []:
                    ran.append(self._run(command))
        for command in dict.fromkeys(command for _, command in self.inline):  # each once, in order
            if _missing_data(command):
                skipped.append((command, _missing_data(command)))
                continue
            ran.append(self._run(_substitute(command)))
        print(f"README: ran {len(ran)} blocks and commands (slowest first, seconds):")
        for seconds, what in sorted(ran, reverse=True):
            print(f"{seconds:8.1f}  {what[:100]}")
        print(f"skipped for want of shared data: {skipped}")
        self.assertGreater(len(ran), 10)

    def _run(self, command):
        start = time.perf_counter()
        status, output = _run_command(command)
        self.assertEqual(status, 0, f"README command {command}:\n{output[-3000:]}")
        return time.perf_counter() - start, command
