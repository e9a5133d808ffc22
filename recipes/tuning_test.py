import contextlib
import io

import keras
import keras_tuner
import numpy as np

import zoo
from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.recipes.tuning import ZooHyperModel, _digest, best_line, save_best, search_space, tune


class Interrupt(keras.callbacks.Callback):
    """Stops the whole search (as Ctrl-C would) on the first batch of the second trial.

    KerasTuner deep-copies callbacks for each trial, so the batch count lives on the class."""

    batches = 0

    def on_train_batch_end(self, batch, logs=None):
        Interrupt.batches += 1
        if Interrupt.batches == 3:  # trial 1 runs 2 batches
            raise KeyboardInterrupt


def offered(hypermodel, key):
    hp = keras_tuner.HyperParameters()
    hypermodel.choices(hp)
    return [v for v in hp.space if v.name == key][0].values


def quietly(function, *args, **kwargs):
    """(result, what it printed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = function(*args, **kwargs)
    return result, out.getvalue()


class SearchSpaceTest(TestCase):
    def setUp(self):
        super().setUp()
        self.schema = small_simulator().schema  # L = 8
        self.deres = {k: v for k, v in SMALL["deres_p"].items() if k != "num_blocks"}

    def test_values_offered_are_derived_from_the_model(self):
        for layers, blocks in ((2, [1, 2]), (6, [1, 2, 3, 6])):
            hypermodel = ZooHyperModel("deres_p", self.schema, ["B"], fixed={**self.deres, "num_layers": layers})
            self.assertEqual(offered(hypermodel, "B"), blocks)
        self.assertEqual(search_space("B", "deres_p", {"num_layers": 8, "schema": self.schema}),
                         ("num_blocks", [1, 2, 4, 8]))
        # SUAN's B is its model size: the number of UABs.
        self.assertEqual(search_space("B", "suan", {"schema": self.schema}), ("num_layers", [1, 2, 3, 4]))
        self.assertEqual(search_space("B", "lightsuan", {"schema": self.schema}), ("num_layers", [1, 2, 3, 4]))
        self.assertEqual(search_space("k", "lightsuan", {"schema": self.schema}), ("window_size", [4, 8]))  # <= L
        self.assertEqual(search_space("r", "lightsuan", {"schema": self.schema}), ("dilation", [1, 2, 4, 8]))
        short = small_simulator(sequence_length=3).schema
        self.assertEqual(search_space("r", "suan", {"schema": short}), ("dilation", [1, 2]))
        self.assertEqual(search_space("lambda_seq", "rest", {"schema": self.schema})[0], "seq_weight")

    def test_every_offered_b_builds_a_two_layer_deres(self):
        hypermodel = ZooHyperModel("deres_p", self.schema, ["B"], fixed={**self.deres, "num_layers": 2},
                                   jit_compile=False)
        for blocks in offered(hypermodel, "B"):
            hp = keras_tuner.HyperParameters()
            hp.Fixed("B", blocks)
            model = hypermodel.build(hp)
            self.assertEqual((model.num_layers, model.num_blocks), (2, blocks))
            self.assertFalse(model.jit_compile)

    def test_keys_a_model_does_not_take_are_one_line_errors(self):
        cases = [
            (("din", ["B"]), "din has no hyperparameter num_blocks to search as B \\(B is num_blocks"),
            (("deres_p", ["Q"]), "unknown search key 'Q'"),
            (("din", ["k"]), "din has no sparse attention to search as k"),
            (("suan", ["lambda"]), "the student must be lightsuan, not suan"),
            (("suan", ["r"]), "searching r \\(dilation\\) needs sparse attention: suan has window_size=None"),
            (("lightsuan", ["lambda_seq"]), "lambda_seq is ReST's auxiliary seq-CVR loss weight, for rest, not for"),
            (("deres_p", []), "nothing to search"),
        ]
        for (model, search), message in cases:
            with self.assertRaisesRegex(ZooError, message):
                ZooHyperModel(model, self.schema, search)
        with self.assertRaisesRegex(ZooError, "teacher and temperature are the distillation's: search lambda"):
            ZooHyperModel("lightsuan", self.schema, ["k"], teacher=SMALL["suan"])
        with self.assertRaisesRegex(ZooError, "deres_p has no hyperparameter depth"):
            ZooHyperModel("deres_p", self.schema, ["B"], fixed={"depth": 3})
        no_user = small_simulator().schema.to_dict()
        no_user["features"] = [f for f in no_user["features"] if f["group"] != "user"]
        with self.assertRaisesRegex(ZooError, "lambda_align weights ReST's alignment loss, which needs user_"):
            ZooHyperModel("rest", no_user, ["lambda_align"])

    def test_loss_weights_train_through_their_trainer(self):
        from zoo.recipes.distillation import OnlineDistillation
        from zoo.recipes.rest_training import ReSTTrainer

        light = ZooHyperModel("lightsuan", self.schema, ["lambda"], fixed=SMALL["lightsuan"], teacher=SMALL["suan"],
                              temperature=3.0)
        hp = keras_tuner.HyperParameters()
        trainer = light.build(hp)
        self.assertIsInstance(trainer, OnlineDistillation)
        self.assertTrue(trainer.built)  # so that KerasTuner can load a trial's weights into it
        self.assertEqual((trainer.distillation_weight, trainer.temperature), (hp.get("lambda"), 3.0))
        self.assertEqual(trainer.teacher.num_layers, SMALL["suan"]["num_layers"])
        rest = ZooHyperModel("rest", self.schema, ["lambda_seq"], fixed=SMALL["rest"])
        hp = keras_tuner.HyperParameters()
        trainer = rest.build(hp)
        self.assertIsInstance(trainer, ReSTTrainer)
        self.assertEqual((trainer.seq_weight, trainer.align_weight), (hp.get("lambda_seq"), 0.1))


    def test_warm_start_gives_every_trial_the_trained_weights(self):
        config = {k: v for k, v in SMALL["lightsuan"].items() if k not in ("window_size", "dilation")}
        trained = zoo.get("lightsuan", schema=self.schema, **SMALL["lightsuan"])
        hypermodel = ZooHyperModel("lightsuan", self.schema, ["k", "r"], fixed=config, warm_start=trained)
        hp = keras_tuner.HyperParameters()
        hp.Fixed("k", 4)
        hp.Fixed("r", 1)
        model = hypermodel.build(hp)
        self.assertEqual((model.window_size, model.dilation), (4, 1))
        for got, want in zip(model.get_weights(), trained.get_weights()):
            np.testing.assert_array_equal(got, want)
        self.assertNotEqual(_digest(hypermodel), _digest(ZooHyperModel("lightsuan", self.schema, ["k", "r"],
                                                                       fixed=config)))
        with self.assertRaisesRegex(ZooError, "warm_start fits searches that keep the weights' shapes"):
            ZooHyperModel("lightsuan", self.schema, ["B"], fixed=config, warm_start=trained)
        din = zoo.get("din", schema=self.schema, **SMALL["din"])
        with self.assertRaisesRegex(ZooError, "warm_start must be a lightsuan model, not DIN"):
            ZooHyperModel("lightsuan", self.schema, ["k"], warm_start=din)
        wider = ZooHyperModel("lightsuan", self.schema, ["k"], fixed={**config, "mlp_units": (16,)}, warm_start=trained)
        with self.assertRaisesRegex(ZooError, "warm_start: its weights do not fit lightsuan"):
            wider.build(keras_tuner.HyperParameters())


class SearchTest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()
        self.train = self.simulator.dataset(32, batch_size=16, seed=1)
        self.val = self.simulator.dataset(32, batch_size=16, seed=2, shuffle=False)
        self.fixed = {k: v for k, v in SMALL["deres_p"].items() if k != "num_blocks"}

    def test_search_prints_its_trials_resumes_after_an_interruption_and_saves_the_best(self):
        directory = self.get_temp_dir()
        options = dict(schema=self.simulator.schema, search=["B"], max_trials=2, directory=directory,
                       **self.fixed)
        Interrupt.batches = 0
        shown = io.StringIO()
        with self.assertRaises(KeyboardInterrupt), contextlib.redirect_stdout(shown):
            tune("deres_p", self.train, self.val, callbacks=[Interrupt()], verbose=2, **options)
        self.assertIn("Search: Running Trial #1", shown.getvalue())  # verbose=2: KerasTuner's own display
        self.assertIn("Trial 1 Complete", shown.getvalue())
        self.assertNotIn("trial 1/2", shown.getvalue())
        resumed, printed = quietly(tune, "deres_p", self.train, self.val, **options)
        trials = resumed.oracle.trials
        self.assertEqual(sorted(t.status for t in trials.values()), ["COMPLETED", "COMPLETED"])
        self.assertIn("0", trials)  # the first trial, finished before the interruption, was kept
        self.assertTrue(printed.startswith("Reloading Tuner from"))  # KerasTuner's own line
        lines = printed.strip().splitlines()[1:]
        # The resumed trial's line, then the table of both trials, best first.
        self.assertRegex(lines[0], r"^trial 2/2  B=[12]  val_auc \d\.\d{4}  \d+\.\d s$")
        self.assertEqual(lines[1].split(), ["trial", "B", "val_auc", "seconds"])
        self.assertLen(lines, 4)
        best = resumed.oracle.get_best_trials(1)[0]
        self.assertTrue(lines[2].endswith("best"))
        self.assertEqual(lines[2].split()[:3], [str(int(best.trial_id) + 1), str(best.hyperparameters.get("B")),
                                                f"{best.score:.4f}"])
        self.assertRegex(lines[3], r"^\s+\d\s+[12]\s+\d\.\d{4}\s+\d+\.\d$")  # seconds kept across the resume
        saved = save_best(resumed, f"{directory}/best")
        again = zoo.load(f"{directory}/best")
        self.assertEqual(again.num_blocks, saved.num_blocks)
        self.assertEqual(again.num_blocks, best.hyperparameters.get("B"))
        _, silent = quietly(tune, "deres_p", self.train, self.val, verbose=0, **options)
        self.assertEqual(silent, "")
        with self.assertRaisesRegex(ZooError, "verbose is 3; it must be 0, 1 or 2"):
            tune("deres_p", self.train, self.val, verbose=3, **options)
        with self.assertRaisesRegex(ZooError, "holds a search that offered B in \\[1, 2\\], but this deres_p allows"):
            tune("deres_p", self.train, self.val, project_name=resumed.project_name, **{**options, "num_layers": 1})

    def test_other_fixed_values_are_another_project(self):
        schema = self.simulator.schema
        two, one = (_digest(ZooHyperModel("deres_p", schema, ["B"], fixed={**self.fixed, "num_layers": n}))
                    for n in (2, 1))
        self.assertNotEqual(two, one)
        self.assertEqual(two, _digest(ZooHyperModel("deres_p", schema, ["B"], fixed={**self.fixed, "num_layers": 2})))

    def test_distillation_search_saves_the_student(self):
        directory = self.get_temp_dir()
        search, printed = quietly(
            tune, "lightsuan", self.train, self.val, schema=self.simulator.schema, search=["r", "lambda"],
            max_trials=1, directory=directory, teacher=SMALL["suan"],
            **{k: v for k, v in SMALL["lightsuan"].items() if k != "dilation"},
        )
        self.assertRegex(printed, r"^trial 1/1  r=\d  lambda=[\d.]+  val_auc \d\.\d{4}  \d+\.\d s\n")
        student = save_best(search, f"{directory}/best")  # loads the trial's OnlineDistillation checkpoint
        again = zoo.load(f"{directory}/best")
        self.assertEqual(again.registered_name, "lightsuan")
        self.assertEqual(again.dilation, search.get_best_hyperparameters(1)[0].get("r"))
        features, _ = self.simulator.sample(4, seed=3)
        self.assertAllClose(again.predict(features, verbose=0), student.predict(features, verbose=0))
        trial = search.oracle.get_best_trials(1)[0]
        self.assertEqual(
            best_line(search),
            f"best lightsuan: r={again.dilation} (dilation), lambda={trial.hyperparameters.get('lambda'):g} "
            f"(distillation_weight); val_auc {trial.score:.4f} (trial 1)",
        )
