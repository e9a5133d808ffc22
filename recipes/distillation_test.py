import dataclasses

import keras
import numpy as np

from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError
from zoo.models.lightsuan import LightSUAN
from zoo.models.suan import SUAN
from zoo.recipes.distillation import OnlineDistillation

SMALL = {"num_layers": 1, "num_heads": 2, "mlp_units": (8,), "dice_momentum": 0.9}


class OnlineDistillationTest(TestCase):
    @classmethod
    def setUpClass(cls):
        cls.simulator = small_simulator()
        cls.features, cls.labels = cls.simulator.sample(16, seed=4)
        cls.teacher_schema = cls.simulator.schema  # S': 8 behaviours
        cls.student_schema = dataclasses.replace(cls.teacher_schema, sequence_length=4)  # S: the newest 4

    def pair(self, reference=None):
        """A (student, teacher) pair; with `reference`, a copy of its weights."""
        student = LightSUAN(self.student_schema, window_size=2, dilation=2, parallel_candidates=2, **SMALL)
        teacher = SUAN(self.teacher_schema, **SMALL)
        if reference is not None:
            student.set_weights(reference[0].get_weights())
            teacher.set_weights(reference[1].get_weights())
        return student, teacher

    def step(self, trainer, loss=None, length=8):
        trainer.compile(optimizer=keras.optimizers.SGD(0.5), loss=loss)
        features = {k: (v[:, -length:] if k.startswith("hist") else v) for k, v in self.features.items()}
        trainer.train_on_batch(features, self.labels)

    def assertWeightsClose(self, a, b, atol=1e-5):
        for x, y in zip(a.get_weights(), b.get_weights()):
            self.assertAllClose(x, y, atol=atol)

    def test_lambda_zero_is_two_independent_trainings(self):
        student, teacher = self.pair()
        alone_student, alone_teacher = self.pair(reference=(student, teacher))
        self.step(OnlineDistillation(student, teacher, distillation_weight=0.0))
        bce = keras.losses.BinaryCrossentropy(from_logits=True)
        self.step(alone_student.logit_model(), loss=bce, length=4)
        self.step(alone_teacher.logit_model(), loss=bce)
        self.assertWeightsClose(student, alone_student)
        self.assertWeightsClose(teacher, alone_teacher)

    def test_soft_label_term_sends_no_gradient_to_the_teacher(self):
        student, teacher = self.pair()
        other_student, other_teacher = self.pair(reference=(student, teacher))
        self.step(OnlineDistillation(student, teacher, distillation_weight=0.0))
        self.step(OnlineDistillation(other_student, other_teacher, temperature=2.0, distillation_weight=50.0))
        self.assertWeightsClose(teacher, other_teacher)
        moved = max(np.abs(a - b).max() for a, b in zip(student.get_weights(), other_student.get_weights()))
        self.assertGreater(moved, 1e-4)  # the soft term does reach the student

    def test_loss_is_eq_17(self):
        student, teacher = self.pair()
        trainer = OnlineDistillation(student, teacher)  # t = lambda = 2
        out = trainer(self.features)
        z, z_t = (keras.ops.convert_to_numpy(out[k]).astype("float64") for k in ("student", "teacher"))
        sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
        bce = lambda y, p: np.mean(-(y * np.log(p) + (1 - y) * np.log(1 - p)))  # noqa: E731
        expected = bce(self.labels, sigmoid(z)) + bce(self.labels, sigmoid(z_t)) + 2.0 * bce(sigmoid(z_t / 2), sigmoid(z / 2))
        loss = trainer.compute_loss(y=self.labels, y_pred=out)
        self.assertAllClose(loss, expected, atol=1e-5)
        self.assertEqual(trainer.distillation_weight, 2.0)

    def test_student_cannot_read_more_than_the_teacher(self):
        student = SUAN(self.teacher_schema, **SMALL)
        teacher = SUAN(self.student_schema, **SMALL)
        with self.assertRaisesRegex(ZooError, "student reads 8 behaviours"):
            OnlineDistillation(student, teacher)
