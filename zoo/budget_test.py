"""The step's memory budget (zoo/budget.py `step_bytes`, `check_step`): L^2 in the attention models, the
batch's rows, refused in one line before fit or score allocates the step."""

import os
from unittest import mock

import zoo
import zoo.budget as budget
from tests.impression_logs import impression_spec, write_impression_log
from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator
from zoo import declarations, registry
from zoo.datasets import prepare
from zoo.errors import ZooError
from zoo.recipes.raw_rows import score_raw_rows


def _model(name, sequence_length=16):
    simulator = small_simulator(sequence_length=sequence_length, timeline_length=sequence_length + 16)
    return zoo.get(name, schema=simulator.schema, **SMALL[name])


class StepBudgetTest(TestCase):
    def test_self_attention_grows_with_the_square_of_L_and_target_attention_linearly(self):
        # Past the linear states, BST's scores (each candidate's L + 1 tokens attending to each other) grow
        # 4-fold when L doubles; DIN's target attention (one query per candidate) 2-fold.
        def ratio(name):
            short, _ = budget.step_bytes(_model(name, 64), rows=8, training=True)
            long, _ = budget.step_bytes(_model(name, 128), rows=8, training=True)
            return long / short

        self.assertGreater(ratio("bst"), 3.0)
        self.assertLess(ratio("din"), 2.1)
        self.assertGreater(ratio("din"), 1.9)

    def test_rows_training_and_the_formula(self):
        model = _model("bst", 32)
        one, _ = budget.step_bytes(model, rows=1, training=False)
        self.assertEqual(budget.step_bytes(model, rows=10, training=False)[0], 10 * one)
        self.assertEqual(budget.step_bytes(model, rows=1, training=True)[0], 3 * one)
        # the estimate written out for this BST: H = 2 heads, 1 layer, L = 32, M = 1, width = the history's
        # embedding widths (no width hyperparameter)
        width = sum(f.embedding_dim for f in model.schema.group("hist"))
        floats = 8 * 1 * 32 * width + 1 * 32 * width + 2 * 2 * 1 * (1 * 33 ** 2)
        self.assertEqual(one, floats * 4)

    def test_every_model_with_heads_states_its_attention(self):
        # a model with attention heads that forgot to state its scores would pass the budget at any L
        missing = [name for name, declared in declarations.models().items() if "num_heads" in declared["hyperparameters"]
                   and registry.entry(name).cls.attention_scores(64, 1, 4, {"num_ns_tokens": 2}) == 0]
        self.assertEqual(missing, [])

    def test_a_step_past_the_budget_is_refused_in_one_line(self):
        model = _model("bst", 64)
        size, _ = budget.step_bytes(model, rows=1024, training=True)
        with mock.patch.dict(budget.BUDGET, step_memory=size - 1):
            with self.assertRaises(ZooError) as caught:
                budget.check_step(model, 1024, training=True, where="fit")
        message = str(caught.exception)
        self.assertNotIn("\n", message)
        self.assertIn("fit: bst at sequence_length 64 with 1,024 rows a batch", message)
        self.assertIn("attention scores over L = 64", message)
        self.assertIn("lower sequence_length or the batch size", message)
        with mock.patch.dict(budget.BUDGET, step_memory=size):
            budget.check_step(model, 1024, training=True, where="fit")  # at the budget: allowed

    def test_the_default_budget_is_the_memory_available(self):
        model = _model("bst", 64)
        size, _ = budget.step_bytes(model, rows=1, training=True)
        with mock.patch.object(budget, "available_memory", return_value=int(size / budget.STEP_FRACTION) - 10):
            with self.assertRaises(ZooError) as caught:
                budget.check_step(model, 1, training=True, where="fit")
        self.assertIn("past this machine's available memory", str(caught.exception))
        self.assertGreater(budget.available_memory(), 0)

    def test_fit_and_score_refuse_before_the_step(self):
        simulator = small_simulator(sequence_length=16, timeline_length=32)
        model = zoo.get("din", schema=simulator.schema, **SMALL["din"])
        train = simulator.dataset(num_rows=16, batch_size=8)
        with mock.patch.dict(budget.BUDGET, step_memory=1):
            with self.assertRaises(ZooError) as caught:
                zoo.recipes.fit(model, train, recipe="suan", epochs=1)
        self.assertIn("fit: din at sequence_length 16 with ", str(caught.exception))
        self.assertIsNone(getattr(model, "optimizer", None))  # refused before compiling anything

        folder = self.get_temp_dir()
        log = write_impression_log(os.path.join(folder, "log.csv"), rows=120)
        state = prepare(impression_spec(sequence_length=4), log, verbose=False).preprocessing()
        scorer = zoo.get("din", schema=zoo.Schema.from_dict(state["schema"]), **SMALL["din"])
        with mock.patch.dict(budget.BUDGET, step_memory=1):
            with self.assertRaises(ZooError) as caught:
                score_raw_rows(scorer, None, log, state, batch_size=64, verbose=0)
        self.assertIn("score: din at sequence_length 4 with 64 rows a batch", str(caught.exception))
