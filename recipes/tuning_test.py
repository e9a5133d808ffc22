import keras
import keras_tuner

import zoo
from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.recipes.tuning import SEARCH_SPACES, ZooHyperModel, save_best, tune


class Interrupt(keras.callbacks.Callback):
    """Stops the whole search (as Ctrl-C would) on the first batch of the second trial.

    KerasTuner deep-copies callbacks for each trial, so the batch count lives on the class."""

    batches = 0

    def on_train_batch_end(self, batch, logs=None):
        Interrupt.batches += 1
        if Interrupt.batches == 3:  # trial 1 runs 2 batches
            raise KeyboardInterrupt


class TuningTest(TestCase):
    def setUp(self):
        super().setUp()
        self.simulator = small_simulator()
        self.train = self.simulator.dataset(32, batch_size=16, seed=1)
        self.val = self.simulator.dataset(32, batch_size=16, seed=2, shuffle=False)
        self.fixed = {k: v for k, v in SMALL["deres_p"].items() if k != "num_blocks"}

    def test_search_space_of_b_is_the_divisors_of_l(self):
        hypermodel = ZooHyperModel("deres_p", self.simulator.schema, ["B"], fixed={**self.fixed, "num_layers": 6})
        hp = keras_tuner.HyperParameters()
        chosen = hypermodel.choices(hp)
        self.assertEqual(hp.get("B"), chosen["num_blocks"])
        self.assertEqual(hp._hps["B"][0].values, [1, 2, 3, 6])
        self.assertEqual(SEARCH_SPACES["r"][0], "dilation")
        with self.assertRaisesRegex(ZooError, "din has no hyperparameter num_blocks"):
            ZooHyperModel("din", self.simulator.schema, ["B"])
        with self.assertRaisesRegex(ZooError, "unknown search key 'Q'"):
            ZooHyperModel("deres_p", self.simulator.schema, ["Q"])

    def test_r_k_and_lambda_search_lightsuan_and_its_distillation(self):
        from zoo.recipes.distillation import OnlineDistillation

        light = {k: v for k, v in SMALL["lightsuan"].items() if k not in ("window_size", "dilation")}
        hypermodel = ZooHyperModel("lightsuan", self.simulator.schema, ["r", "k"], fixed=light)
        hp = keras_tuner.HyperParameters()
        chosen = hypermodel.choices(hp)
        self.assertEqual(hp._hps["r"][0].values, [1, 2, 4, 8])
        self.assertEqual(hp._hps["k"][0].values, [4, 8])  # windows up to L = 8
        model = hypermodel.build(hp)
        self.assertEqual((model.dilation, model.window_size), (chosen["dilation"], chosen["window_size"]))
        distill = ZooHyperModel(
            "lightsuan", self.simulator.schema, ["lambda"], fixed=SMALL["lightsuan"], teacher=SMALL["suan"]
        )
        hp = keras_tuner.HyperParameters()
        model = distill.build(hp)
        self.assertIsInstance(model, OnlineDistillation)
        self.assertEqual(model.distillation_weight, hp.get("lambda"))
        with self.assertRaisesRegex(ZooError, "the student must be lightsuan, not suan"):
            ZooHyperModel("suan", self.simulator.schema, ["lambda"])
        with self.assertRaisesRegex(ZooError, "searching r \\(dilation\\) needs sparse attention: suan has window_size=None"):
            ZooHyperModel("suan", self.simulator.schema, ["r"])

    def test_two_trial_search_resumes_after_an_interruption_and_saves_the_best(self):
        directory = self.get_temp_dir()
        options = dict(schema=self.simulator.schema, search=["B"], max_trials=2, directory=directory, **self.fixed)
        Interrupt.batches = 0
        with self.assertRaises(KeyboardInterrupt):
            tune("deres_p", self.train, self.val, callbacks=[Interrupt()], **options)
        resumed = tune("deres_p", self.train, self.val, **options)
        trials = resumed.oracle.trials
        completed = [t for t in trials.values() if t.status == "COMPLETED"]
        self.assertEqual(len(completed), 2)
        self.assertIn("0", trials)  # the first trial, finished before the interruption, was kept
        best = save_best(resumed, f"{directory}/best")
        again = zoo.load(f"{directory}/best")
        self.assertEqual(again.num_blocks, best.num_blocks)
        self.assertIn(again.num_blocks, (1, 2))
