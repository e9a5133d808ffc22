"""The command line (`python -m zoo ...`), called in-process through zoo.__main__.main."""

import contextlib
import io
from pathlib import Path

from tests.testing import TestCase
from zoo.__main__ import main


def run(*argv):
    """(exit status, stdout, stderr) of one command."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(argv))
        except SystemExit as exit_:
            status = exit_.code
    return status, out.getvalue(), err.getvalue()


class CommandLineTest(TestCase):
    def test_every_command_has_help(self):
        for command in ("list", "fit", "evaluate", "reproduce", "tune", "export", "demo"):
            status, out, _ = run(command, "--help")
            self.assertEqual(status, 0, command)
            self.assertIn("usage:", out)

    def test_list(self):
        status, out, _ = run("list")
        self.assertEqual(status, 0)
        self.assertIn("din", out)
        self.assertIn("Zhou et al.", out)

    def test_fit_evaluate_export_on_the_simulator(self):
        directory = Path(self.get_temp_dir())
        status, out, err = run(
            "fit", "din", "--rows", "256", "--epochs", "1", "--set", "mlp_units=(8,)",
            "--set", "attention_units=(4,)", "--out", str(directory / "run"),
        )
        self.assertEqual(status, 0, err)
        self.assertIn("val_auc", out)
        self.assertTrue((directory / "run" / "report.json").is_file())
        self.assertTrue((directory / "run" / "preset" / "model.weights.h5").is_file())
        status, out, err = run("evaluate", str(directory / "run" / "preset"), "--rows", "128")
        self.assertEqual(status, 0, err)
        self.assertIn('"auc"', out)
        status, out, err = run("export", str(directory / "run" / "preset"), str(directory / "export" / "1"))
        self.assertEqual(status, 0, err)
        self.assertTrue((directory / "export" / "1" / "saved_model.pb").is_file())

    def test_two_fits_with_one_seed_give_identical_metrics(self):
        import json

        directory = Path(self.get_temp_dir())
        reports = []
        for run_name in ("a", "b"):
            argv = ("fit", "din", "--rows", "256", "--epochs", "1", "--seed", "3", "--set", "mlp_units=(8,)",
                    "--set", "attention_units=(4,)", "--verbose", "0", "--out", str(directory / run_name))
            status, _, err = run(*argv)
            self.assertEqual(status, 0, err)
            reports.append(json.loads((directory / run_name / "report.json").read_text()))
        self.assertEqual(reports[0]["auc"], reports[1]["auc"])
        self.assertEqual(reports[0]["logloss"], reports[1]["logloss"])

    def test_bad_arguments_exit_2_with_one_line(self):
        cases = [
            (("fit", "dinn"), "unknown model 'dinn'"),
            (("fit", "din", "--data", "criteo"), "--data criteo needs --path"),
            (("fit", "din", "--data", "criteo", "--path", "/nowhere/x.csv"), "/nowhere/x.csv: no such file"),
            (("fit", "din", "--set", "depth"), "bad override 'depth'"),
            (("fit", "din", "--set", "depth=3", "--rows", "10"), "din has no hyperparameter depth"),
            (("tune", "din", "--search", "B", "--rows", "10"), "din has no hyperparameter num_blocks"),
            (("export", "din", "/tmp/zoo-no-version"), "numeric version"),
            (("evaluate", "./nowhere"), "no such preset directory"),
            (("frobnicate",), "invalid choice"),
        ]
        for argv, message in cases:
            status, _, err = run(*argv)
            self.assertEqual(status, 2, argv)
            self.assertIn(message, err, argv)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
