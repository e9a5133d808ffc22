"""What the commands write: never over their own input (zoo.outputs.check_apart), whole or not at all
(new_file, new_folder, replacing_folder), and the commands, presets and exports that use them."""

import errno
import json
import os
import subprocess
import sys
import unittest
from pathlib import Path
from unittest import mock

import keras

import zoo
from tests.impression_logs import impression_spec, write_impression_log
from tests.testing import ROOT, TestCase
from tests.testing import run_cli as run
from zoo import outputs, presets
from zoo.errors import ZooError


def ended_pid():
    """The pid of a process that has ended (a killed writer's)."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def spec_preset(folder):
    """(an impression log, a din preset carrying its data contract) in `folder` (untrained weights)."""
    log = write_impression_log(str(folder / "log.csv"), rows=120)
    state = zoo.datasets.prepare(impression_spec(sequence_length=4), log, verbose=False).preprocessing()
    preset = folder / "preset"
    zoo.get("din", schema=zoo.Schema.from_dict(state["schema"]), attention_units=(4,), mlp_units=(8,)) \
        .save_to_preset(str(preset), preprocessing=state)
    return log, preset


def no_temporaries(folder):
    return [p.name for p in Path(folder).iterdir() if ".tmp-" in p.name or ".old-" in p.name]


class CheckApartTest(TestCase):
    def test_an_output_that_is_an_input_is_refused_however_spelled(self):
        folder = Path(self.get_temp_dir())
        data = folder / "later.csv"
        data.write_text("a,b\n1,2\n")
        (folder / "link.csv").symlink_to(data)
        os.link(data, folder / "hard.csv")
        (folder / "logs").mkdir()
        os.link(data, folder / "logs" / "inside.csv")
        for output in (str(data), f"{folder}/./later.csv", str(folder / "link.csv"), str(folder / "hard.csv"),
                       os.path.relpath(data)):
            with self.assertRaisesRegex(ZooError, rf"^--out {output} is {data}, which the command reads"):
                outputs.check_apart(output, [str(data)])
        with self.assertRaisesRegex(ZooError, r"is .*inside.csv \(in .*logs\), which the command reads"):
            outputs.check_apart(str(folder / "hard.csv"), [str(folder / "logs")])
        with self.assertRaisesRegex(ZooError, "which the command reads"):
            outputs.check_apart(str(data), [str(folder / "l*.csv")])  # a glob stands for its files
        outputs.check_apart(str(folder / "new.csv"), [str(data), None])  # a new file is no input
        outputs.check_apart(str(folder / "other.csv"), [str(data)])

    def test_a_folder_output_may_not_hold_or_lie_in_an_input(self):
        folder = Path(self.get_temp_dir())
        (folder / "run").mkdir()
        (folder / "run" / "log.csv").write_text("x\n")
        with self.assertRaisesRegex(ZooError, r"^--out .*run holds .*log.csv, which the command reads"):
            outputs.check_apart(str(folder / "run"), [str(folder / "run" / "log.csv")], folder=True)
        with self.assertRaisesRegex(ZooError, r"^export to .*run/1 is inside .*run, which the command reads"):
            outputs.check_apart(str(folder / "run" / "1"), [str(folder / "run")], flag="export to", folder=True)
        with self.assertRaisesRegex(ZooError, r"^--out .*run/\. is .*run, which"):
            outputs.check_apart(f"{folder}/run/.", [str(folder / "run")], folder=True)
        outputs.check_apart(str(folder / "elsewhere"), [str(folder / "run")], folder=True)


class NewFileTest(TestCase):
    def test_a_complete_write_replaces_the_file(self):
        target = Path(self.get_temp_dir()) / "scores.csv"
        target.write_text("old\n")
        with outputs.new_file(str(target)) as f:
            f.write("new\n")
            self.assertEqual(target.read_text(), "old\n")  # not yet: the new text is in the temporary file
        self.assertEqual(target.read_text(), "new\n")
        self.assertEqual(no_temporaries(target.parent), [])

    def test_a_failed_write_leaves_the_old_file_and_no_partial_one(self):
        folder = Path(self.get_temp_dir())
        for old in ("old\n", None):
            target = folder / "scores.csv"
            if old is not None:
                target.write_text(old)
            with self.assertRaises(OSError) as raised:
                with outputs.new_file(str(target)) as f:
                    f.write("half")
                    raise OSError(errno.ENOSPC, "No space left on device")
            self.assertEqual(raised.exception.filename, str(target))
            self.assertEqual(target.read_text() if old else target.exists(), old or False)
            self.assertEqual(no_temporaries(folder), [])
            target.unlink(missing_ok=True)

    def test_a_device_that_fails_is_named(self):
        with self.assertRaises(OSError) as raised:
            with outputs.new_file("/dev/full") as f:
                f.write("x" * 10_000)
        self.assertEqual(raised.exception.filename, "/dev/full")

    def test_past_the_file_size_limit_nothing_is_left(self):
        folder = Path(self.get_temp_dir())
        code = ("from zoo.outputs import new_file\n"
                f"with new_file({str(folder / 'big.csv')!r}) as f:\n"
                "    for i in range(100_000): f.write('0.123456\\n')\n")
        done = subprocess.run(["bash", "-c", f"ulimit -f 64; exec {sys.executable} -c \"$0\"", code], cwd=ROOT,
                              capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("File too large", done.stderr)
        self.assertEqual(list(folder.iterdir()), [])

    def test_a_temporary_file_of_a_killed_process_is_removed_and_a_link_written_through(self):
        folder = Path(self.get_temp_dir())
        stale = folder / f".real.csv.tmp-{ended_pid()}"  # (a link is written through: its target's)
        stale.write_text("half")  # kill -9 mid-write
        (folder / "real.csv").write_text("old\n")
        (folder / "scores.csv").symlink_to(folder / "real.csv")
        with outputs.new_file(str(folder / "scores.csv")) as f:
            f.write("new\n")
        self.assertFalse(stale.exists())
        self.assertTrue((folder / "scores.csv").is_symlink())
        self.assertEqual((folder / "real.csv").read_text(), "new\n")


class NewFolderTest(TestCase):
    def test_the_folder_appears_whole_or_not_at_all(self):
        base = Path(self.get_temp_dir())
        with outputs.new_folder(base / "1") as scratch:
            (scratch / "saved_model.pb").write_text("x")
            self.assertFalse((base / "1").exists())
        self.assertEqual((base / "1" / "saved_model.pb").read_text(), "x")
        with self.assertRaises(OSError):
            with outputs.new_folder(base / "2") as scratch:
                (scratch / "saved_model.pb").write_text("x")
                raise OSError(errno.ENOSPC, "No space left on device")
        self.assertEqual(sorted(p.name for p in base.iterdir()), ["1"])

    def test_a_second_writer_and_a_filled_folder_are_refused_a_stale_one_removed(self):
        base = Path(self.get_temp_dir())
        with outputs.new_folder(base / "1"):
            with self.assertRaisesRegex(ZooError, r"^.*1: another process is writing it"):
                with outputs.new_folder(base / "1"):
                    pass
        with self.assertRaisesRegex(ZooError, "was filled meanwhile"):
            with outputs.new_folder(base / "1") as scratch:
                (scratch / "saved_model.pb").write_text("mine")
                (base / "1" / "saved_model.pb").write_text("the other's")  # filled meanwhile: no merge
        self.assertEqual((base / "1" / "saved_model.pb").read_text(), "the other's")
        self.assertEqual(sorted(p.name for p in base.iterdir()), ["1"])
        (base / f".2.tmp-{ended_pid()}").mkdir()  # a killed export
        with outputs.new_folder(base / "2") as scratch:
            (scratch / "saved_model.pb").write_text("x")
        self.assertEqual(sorted(p.name for p in base.iterdir()), ["1", "2"])


class ReplacingFolderTest(TestCase):
    def test_the_old_folder_stays_until_the_new_one_is_whole(self):
        folder = Path(self.get_temp_dir())
        target = folder / "preset"
        target.mkdir()
        for name, text in (("config.json", "old"), ("owned.json", "old"), ("notes.txt", "mine")):
            (target / name).write_text(text)
        with outputs.replacing_folder(target, owned=("owned.json",)) as scratch:
            (scratch / "config.json").write_text("new")
            self.assertEqual((target / "config.json").read_text(), "old")
        self.assertEqual({p.name: p.read_text() for p in target.iterdir()}, {"config.json": "new", "notes.txt": "mine"})
        with self.assertRaises(OSError):
            with outputs.replacing_folder(target) as scratch:
                (scratch / "config.json").write_text("newer")
                raise OSError(errno.ENOSPC, "No space left on device")
        self.assertEqual((target / "config.json").read_text(), "new")
        self.assertEqual(no_temporaries(folder), [])


class CommandsTest(TestCase):
    """The commands refuse to write over their input, and write whole."""

    def test_no_command_writes_over_its_input(self):
        folder = Path(self.get_temp_dir())
        log, preset = spec_preset(folder)
        before = Path(log).read_bytes()
        config = (preset / "config.json").read_bytes()
        os.link(log, folder / "hard.csv")
        (folder / "link.csv").symlink_to(log)
        spec = folder / "spec.json"
        spec.write_text(json.dumps(impression_spec(sequence_length=4)))
        cases = [("score", str(preset), log, "--out", log),
                 ("score", str(preset), log, "--out", str(folder / "hard.csv")),
                 ("score", str(preset), log, "--out", str(folder / "link.csv")),
                 ("score", str(preset), log, "--out", f"{folder}/./log.csv"),
                 ("score", str(preset), str(folder / "link.csv"), "--out", str(preset / "config.json")),
                 ("request", str(preset), log, "--out", log),
                 ("spec", "draft", log, "--label", "clicked", "--out", str(folder / "hard.csv")),
                 ("fit", "din", "--data", log, "--spec", str(spec), "--out", str(folder)),
                 ("calibrate", str(preset), "--data", log, "--out", str(folder)),
                 ("evaluate", str(preset), "--data", log, "--report", log),
                 ("evaluate", str(preset), "--data", log, "--report", str(preset / "config.json")),
                 ("evaluate", str(preset), "--data", log, "--plots", str(preset)),
                 ("compare", "din", "--data", log, "--spec", str(spec), "--out", str(folder)),
                 ("reproduce", "rest-table2", "--path", str(folder), "--out", str(folder / "results")),
                 ("tune", "lightsuan", "--data", log, "--spec", str(spec), "--search", "k", "--dir", str(folder)),
                 ("tune", "lightsuan", "--data", log, "--spec", str(spec), "--search", "k", "--save-best", str(folder))]
        for argv in cases:
            status, _, err = run(*argv)
            self.assertEqual(status, 2, (argv, err))
            self.assertRegex(err, r"^error: .* which the command reads: write to another (file|folder)\n$", argv)
        history = folder / "earlier.csv"
        history.write_bytes(before)
        status, _, err = run("score", str(preset), log, "--history-from", str(history), "--out", str(history))
        self.assertEqual(status, 2, err)
        self.assertEqual(Path(log).read_bytes(), before)
        self.assertEqual(history.read_bytes(), before)
        self.assertEqual((preset / "config.json").read_bytes(), config)

    def test_score_writes_whole_or_not_at_all_and_to_stdout(self):
        folder = Path(self.get_temp_dir())
        log, preset = spec_preset(folder)
        scores = folder / "scores.csv"
        scores.write_text("yesterday's\n")
        real_writer = __import__("csv").writer

        def failing_writer(stream):  # the disk fills after 50 rows
            writer, rows = real_writer(stream), []

            class Filling:
                def writerow(self, row):
                    rows.append(row)
                    if len(rows) > 50:
                        raise OSError(errno.ENOSPC, "No space left on device")
                    writer.writerow(row)

            return Filling()

        with mock.patch("csv.writer", failing_writer):
            status, _, err = run("score", str(preset), log, "--out", str(scores))
        self.assertEqual(status, 2)
        self.assertEqual(err, f"error: {scores}: No space left on device\n")
        self.assertEqual(scores.read_text(), "yesterday's\n")
        self.assertEqual(no_temporaries(folder), [])
        status, out, err = run("score", str(preset), log, "--out", "-")
        self.assertEqual(status, 0, err)
        self.assertEqual(out.splitlines()[0], "line,score,label")
        self.assertEqual(len(out.splitlines()), 121)  # the scores alone
        self.assertIn("scored 120 row(s)", err)
        self.assertFalse(Path("-").exists())


class PresetRewriteTest(TestCase):
    """`fit --out` and `calibrate --out` over an existing preset (zoo.presets.save): a reader sees the old
    preset or the new one; a failed or killed rewrite leaves the old one."""

    def test_a_failed_rewrite_leaves_the_old_preset_a_reader_never_a_mix(self):
        folder = Path(self.get_temp_dir())
        _, preset = spec_preset(folder)
        old = {p.name: p.read_bytes() for p in preset.iterdir()}
        (folder / f".preset.tmp-{ended_pid()}").mkdir()  # a rewrite killed earlier
        wider = zoo.get("din", schema=zoo.load(preset).schema, attention_units=(4,), mlp_units=(16,))
        real_write = presets.write_weights

        def write_then_fail(model, path):
            real_write(model, path)
            self.assertEqual({p.name: p.read_bytes() for p in preset.iterdir()}, old)  # a reader sees the old
            raise OSError(errno.ENOSPC, "No space left on device")

        with mock.patch.object(presets, "write_weights", write_then_fail):
            with self.assertRaises(OSError) as raised:
                wider.save_to_preset(preset)
        self.assertEqual(raised.exception.filename, str(preset))
        self.assertEqual({p.name: p.read_bytes() for p in preset.iterdir()}, old)
        self.assertEqual(no_temporaries(folder), [])
        (preset / "notes.txt").write_text("mine")
        wider.save_to_preset(preset)  # without the fitted preprocessing: its file is not carried over
        self.assertEqual(sorted(p.name for p in preset.iterdir()),
                         ["config.json", "metadata.json", "model.weights.h5", "notes.txt"])
        self.assertEqual(zoo.load(preset).count_params(), wider.count_params())
        self.assertEqual(no_temporaries(folder), [])


class ExportTest(TestCase):
    """zoo.export writes the version folder whole: beside it first, then renamed."""

    def test_export_into_its_preset_or_a_version_being_written_is_refused(self):
        folder = Path(self.get_temp_dir())
        _, preset = spec_preset(folder)
        with self.assertRaisesRegex(ZooError, r"^export to .*preset/1 is inside .*preset, which the command reads"):
            zoo.export(str(preset), preset / "1")
        base = folder / "export"
        base.mkdir()
        writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        self.addCleanup(writer.kill)
        (base / f".1.tmp-{writer.pid}").mkdir()  # a live export of version 1
        status, _, err = run("export", str(preset), str(base / "1"))
        self.assertEqual(status, 2)
        self.assertRegex(err, r"^error: .*export/1: another process is writing it .*\n$")
        self.assertFalse((base / "1").exists())

    @unittest.skipUnless(keras.backend.backend() == "tensorflow",
                         "under JAX and torch the export runs in a TensorFlow subprocess that a stand-in writer "
                         "cannot reach; the refusal above crosses that hop")
    def test_a_failed_export_leaves_nothing_and_a_killed_one_does_not_block(self):
        import tensorflow as tf

        folder = Path(self.get_temp_dir())
        _, preset = spec_preset(folder)
        base = folder / "export"
        archive = type(keras.export.ExportArchive())  # (the backend's own class)
        real_write_out = archive.write_out

        def write_then_fill(archive, path, **options):
            real_write_out(archive, path, **options)
            raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

        with mock.patch.object(archive, "write_out", write_then_fill):
            with self.assertRaisesRegex(ZooError, rf"^{base / '1'}: the export failed, nothing written "
                                                  r"\(No space left on device\)$"):
                zoo.export(str(preset), base / "1")
        self.assertEqual(list(base.iterdir()), [])
        stale = base / f".1.tmp-{ended_pid()}"
        stale.mkdir()  # an export killed mid-write
        (stale / "saved_model.pb").write_text("half")
        zoo.export(str(preset), base / "1")
        self.assertEqual(sorted(p.name for p in base.iterdir()), ["1"])
        self.assertTrue((base / "1" / "saved_model.pb").is_file())
        with self.assertRaisesRegex(ZooError, "the version directory is not empty"):
            zoo.export(str(preset), base / "1")
