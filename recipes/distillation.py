"""Online distillation (SUAN §3.3.2, eq 17): a high-grade SUAN teacher and a LightSUAN student
trained together."""

import keras
from keras import ops

import zoo.backend_kernels as backend_kernels
from zoo.errors import ZooError


class OnlineDistillation(backend_kernels.RowSteps, keras.Model):
    """Trains a student and a teacher together with SUAN's eq 17:

        loss = loss1 + loss2 + lambda * loss3
        loss1 = BCE(sigmoid(z), y), loss2 = BCE(sigmoid(z'), y),
        loss3 = BCE(sigmoid(z / t), stop_gradient(sigmoid(z' / t)))

    z and z' are the student's and the teacher's logits; the teacher's tempered probability is a
    soft label, so loss3 sends no gradient into the teacher. lambda defaults to t (the paper sets
    both to 2), which undoes the 1/t scaling of loss3's gradient.

    The teacher may see a longer history (S' vs S): the batch carries the teacher's length and the
    student reads the newest `student.schema.sequence_length` behaviours of it.

    Use: `OnlineDistillation(student, teacher).compile(optimizer=...)`, then `fit` on the ordinary
    (features, labels [B, M]) batches; the trained `student` is saved on its own (a preset).
    `call` returns {"student": z, "teacher": z'}; `compute_loss` is the only training change, so
    it runs on every backend. Compiled metrics (AUC, LogLoss) see the student's pctr = sigmoid(z),
    the model that is deployed; a compiled loss is ignored.

    Args:
        student: a SUAN-family model (LightSUAN), with a layer named "logit".
        teacher: a SUAN-family model (SUAN), with a layer named "logit".
        temperature: t.
        distillation_weight: lambda (None: t).
    """

    def __init__(self, student, teacher, temperature=2.0, distillation_weight=None, **kwargs):
        super().__init__(**kwargs)
        if temperature <= 0:
            raise ZooError(f"temperature t is {temperature}; it must be > 0")
        student_length, teacher_length = student.schema.sequence_length, teacher.schema.sequence_length
        if student_length > teacher_length:
            raise ZooError(
                f"the student reads {student_length} behaviours but the teacher's batches hold only {teacher_length}"
            )
        self.student = student
        self.teacher = teacher
        self.student_logit = student.logit_model()
        self.teacher_logit = teacher.logit_model()
        self.temperature = float(temperature)
        self.distillation_weight = float(temperature if distillation_weight is None else distillation_weight)

    def _student_features(self, features):
        length = self.student.schema.sequence_length
        keys = [k for k in self.student.schema.keys()]
        return {k: (features[k][:, -length:] if k.startswith("hist") else features[k]) for k in keys}

    def call(self, features, training=False):
        return {
            "student": self.student_logit(self._student_features(features), training=training),
            "teacher": self.teacher_logit(features, training=training),
        }

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        z_student, z_teacher = y_pred["student"], y_pred["teacher"]
        y = ops.cast(y, z_student.dtype)
        bce = lambda labels, logits: ops.mean(ops.binary_crossentropy(labels, logits, from_logits=True))  # noqa: E731
        t = self.temperature
        soft_label = ops.stop_gradient(ops.sigmoid(z_teacher / t))
        loss = bce(y, z_student) + bce(y, z_teacher) + self.distillation_weight * bce(soft_label, z_student / t)
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        return super().compute_metrics(x, y, ops.sigmoid(y_pred["student"]), sample_weight)
