"""README.md and the guide (docs/*.md) run as written: every ```python block, in order, one namespace per
section (a `##` or `###` heading: a reader starts each section afresh), and every `python -m zoo ...`
command, in ```bash blocks and in inline code, in a temporary working folder.

The documents run one after the other in one working folder (`documents()`: README.md first, its quick
start fitting runs/my_din, then docs/README.md and the other docs by name), so a later one may use what
an earlier one wrote, as a reader who followed the quick start would. A command that an earlier block ran
word for word is not run again (the quick start repeats commands of docs/own-data.md and docs/serving.md,
and an export refuses a version folder that is not empty); inline commands run last, each once.

Sizes are made small by exact substitutions (`SMALL`): each must occur in one of the documents, so a stale
one fails. Paths to a data set's raw files (`DATA`) point at the ../shared/data samples, and files the
documents call yours (`YOURS`) are written from them; a block or command that needs an absent sample is
skipped. A fenced block that is not run says why on the line before it, `<!-- not run: reason -->`; only a
few may, over all the documents (`MAX_NOT_RUN`). Every command must pass `bash -n` first (an unquoted
`(64,32)` is a shell syntax error). Every relative link between the documents must name a file that exists
(and a heading of it, for a `#anchor`).

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
DOCS = ROOT / "docs"
MAX_NOT_RUN = 5  # over all documents; the fifth: a TF Serving curl of the raw signature (needs the server)
NOT_RUN = re.compile(r"<!-- not run: (.+) -->")
# Document text -> what the test runs instead (a few rows, one epoch, one trial).
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
# Paths of raw data files in the documents -> (what the test writes instead, the shared sample that needs).
CRITEO = SHARED_DATA / "deepctr" / "criteo_sample.txt"
MOVIELENS = SHARED_DATA / "movielens-100k"
DATA = {
    "path/to/criteo/train.txt": (str(CRITEO), CRITEO),
    'manual_dir="path/to/criteo"': (f'manual_dir="{CRITEO.parent}"', CRITEO),
    "ml-100k/": ("ml-100k/", MOVIELENS / "u.data"),
    "my_ratings/u.data": ("my_ratings/u.data", MOVIELENS / "u.data"),
}
# Folders and files the documents name as the reader's own, written in the working folder from the
# samples: (the sample, how many of its first lines; None: all).
YOURS = {
    "ml-100k/u.data": (MOVIELENS / "u.data", 20_000),
    "ml-100k/u.item": (MOVIELENS / "u.item", None),
    "ml-100k/u.user": (MOVIELENS / "u.user", None),
    "my_ratings/u.data": (MOVIELENS / "u.data", 500),
}

# Files the documents call yours that no sample holds: an impression log (tests/impression_logs.py).
GENERATED = {
    "my_logs/impressions.csv": dict(rows=600),
    "my_logs/later.csv": dict(rows=200, seed=1, start="2024-03-11T08:00:00Z", days=3, unseen_from=70),
}


def documents():
    """The documents in the order they run: README.md, docs/README.md, then the other docs/*.md by name."""
    guide = sorted(DOCS.glob("*.md"), key=lambda path: (path.name != "README.md", path.name))
    return [README] + guide


def sections(text):
    """[(heading, [(language, code, not_run_reason)])] of a document's fenced blocks, in order, and
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
    """The shared samples a document's text needs that are absent here."""
    return [str(sample) for original, (_, sample) in DATA.items() if original in code and not sample.exists()]


def _commands(code):
    """The `python -m zoo` commands of a bash block (backslash continuations joined)."""
    code = code.replace("\\\n", " ")
    return [line.strip() for line in code.splitlines() if line.strip().startswith("python -m zoo ")]


def _anchors(text):
    """The `#anchor`s of a Markdown text's headings, as GitHub makes them (lower case, punctuation dropped,
    spaces as hyphens; a repeated heading gets -1, -2, ...)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    anchors, seen = set(), {}
    for heading in re.findall(r"^#+ (.+)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


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
        self.documents = {}  # the document's name (README.md, docs/presets.md) -> (sections, inline commands)
        self.texts = {}
        for path in documents():
            name = str(path.relative_to(ROOT))
            self.texts[name] = path.read_text()
            self.documents[name] = sections(self.texts[name])
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
        self.assertIn("docs/README.md", self.texts)
        for original in list(SMALL) + list(DATA):
            self.assertTrue(any(original in text for text in self.texts.values()),
                            f"tests/readme_test.py substitutes {original!r}, in none of the documents")
        not_run = [(name, h, reason) for name, (found, _) in self.documents.items()
                   for h, blocks in found for _, _, reason in blocks if reason]
        self.assertLessEqual(len(not_run), MAX_NOT_RUN, not_run)
        for name, (found, _) in self.documents.items():
            for heading, blocks in found:
                for language, code, reason in blocks:
                    if language == "bash" and reason is None:
                        other = [line for line in code.replace("\\\n", " ").splitlines()
                                 if line.strip() and not line.strip().startswith("python -m zoo ")]
                        self.assertEqual(other, [], f"{name} ({heading}): a bash block that is run holds only "
                                                    "python -m zoo lines")

    def test_links_between_documents_resolve(self):
        texts = dict(self.texts, **{"benchmarks/README.md": (ROOT / "benchmarks" / "README.md").read_text()})
        for name, text in texts.items():
            folder = (ROOT / name).parent
            text = re.sub(r"```.*?```", "", text, flags=re.S)  # links in code are not links
            for target in re.findall(r"\]\(([^)\s]+)\)", text):
                if re.match(r"[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                linked = (folder / path).resolve() if path else ROOT / name
                self.assertTrue(linked.exists(), f"{name} links to {target}: no such file")
                if anchor and linked.is_file() and linked.suffix == ".md":
                    self.assertIn(anchor, _anchors(linked.read_text()), f"{name} links to {target}: no such heading")

    def test_commands_are_valid_shell(self):
        commands = [c for found, _ in self.documents.values() for _, blocks in found
                    for lang, code, _ in blocks if lang == "bash" for c in _commands(code)]
        commands += [c for _, inline in self.documents.values() for _, c in inline]
        self.assertGreater(len(commands), 5)
        for command in commands:
            result = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, f"{command}: {result.stderr}")

    def test_python_blocks_and_commands_run(self):
        ran, skipped, done = [], [], set()
        for name, (found, _) in self.documents.items():
            for heading, blocks in found:
                namespace = {"__name__": "readme"}
                for language, code, reason in blocks:
                    if reason or language not in ("python", "bash"):
                        continue
                    if _missing_data(code):
                        skipped.append((f"{name} ({heading})", _missing_data(code)))
                        continue
                    code = _substitute(code)
                    if language == "python":
                        start = time.perf_counter()
                        try:
                            exec(compile(code, f"{name} ({heading})", "exec"), namespace)
                        except Exception as error:
                            raise AssertionError(f"{name} section '{heading}': {type(error).__name__}: "
                                                 f"{error}") from error
                        ran.append((time.perf_counter() - start, f"python block in {name} '{heading}'"))
                    for command in _commands(code) if language == "bash" else []:
                        if command not in done:  # run by an earlier document already
                            done.add(command)
                            ran.append(self._run(command, name))
        inline = [(name, command) for name, (_, commands) in self.documents.items() for _, command in commands]
        for name, command in inline:
            if _missing_data(command):
                skipped.append((command, _missing_data(command)))
                continue
            command = _substitute(command)
            if command not in done:  # each once, in order
                done.add(command)
                ran.append(self._run(command, name))
        print(f"documents: ran {len(ran)} blocks and commands (slowest first, seconds):")
        for seconds, what in sorted(ran, reverse=True):
            print(f"{seconds:8.1f}  {what[:100]}")
        print(f"skipped for want of shared data: {skipped}")
        self.assertGreater(len(ran), 10)

    def _run(self, command, name):
        start = time.perf_counter()
        status, output = _run_command(command)
        self.assertEqual(status, 0, f"{name} command {command}:\n{output[-3000:]}")
        return time.perf_counter() - start, command
