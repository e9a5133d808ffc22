"""ReST's training-only parts (§2.3): the auxiliary seq-CVR head g_seq and the sigmoid alignment loss.

    trainer = ReSTTrainer(zoo.get("rest", schema=schema))      # wraps the inference model
    trainer.compile(optimizer="adam", loss="binary_crossentropy", metrics=zoo.recipes.default_metrics())
    trainer.fit(train_ds)                                       # L_total = L_ce + λ_seq L_seq + λ_align L_align
    trainer.model.save_to_preset("saved/my_rest")               # the inference model only

The wrapper shares every layer of the ReST model it wraps and adds g_seq and the two projection MLPs;
`trainer.model` never holds them, so presets and export carry none of the training-only parts.
"""

import keras
from keras import ops

import zoo.backend_kernels as backend_kernels
from zoo.errors import ZooError

LAMBDA_SEQ = 0.1  # λ_seq, the weight of Figure 2
# λ_align: the paper does not give it. 0.1 (as λ_seq) keeps the alignment term, which starts near
# log 2 per positive pair and ~e^-10 per negative, a small fraction of L_ce on the simulator.
LAMBDA_ALIGN = 0.1


@keras.saving.register_keras_serializable(package="zoo")
class RestAlignment(keras.layers.Layer):
    """The cross-branch alignment of ReST §2.3: two-layer MLPs and l2 normalisation give z_seq (from
    the sequence [CLS] state) and z_ns (from the non-sequence user features); the pair logits are

        s_ij = z_seq,i^T z_ns,j / τ - b           (learned τ > 0 as τ = exp(log τ), learned b)

    τ starts at 0.1 and b at 10 (SigLIP's initialisation, so every pair starts near "negative").

    Args:
        units: the hidden and output width of both projection MLPs.
    Call:
        cls_state [N, d], user [N, D_u] -> s [N, N].
    """

    def __init__(self, units=32, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.seq_projection = [
            keras.layers.Dense(units, activation="relu", name="seq_hidden"),
            keras.layers.Dense(units, name="seq_out"),
        ]
        self.ns_projection = [
            keras.layers.Dense(units, activation="relu", name="ns_hidden"),
            keras.layers.Dense(units, name="ns_out"),
        ]

    def build(self, cls_state_shape, user_shape):
        for layers, shape in ((self.seq_projection, cls_state_shape), (self.ns_projection, user_shape)):
            layers[0].build(shape)
            layers[1].build(tuple(shape[:-1]) + (self.units,))
        self.log_tau = self.add_weight(shape=(), initializer=keras.initializers.Constant(-2.302585), name="log_tau")
        self.bias = self.add_weight(shape=(), initializer=keras.initializers.Constant(10.0), name="bias")
        self.built = True

    @staticmethod
    def _project(layers, x):
        for layer in layers:
            x = layer(x)
        return x / ops.sqrt(ops.maximum(ops.sum(x * x, axis=-1, keepdims=True), 1e-12))

    def call(self, cls_state, user):
        z_seq = self._project(self.seq_projection, cls_state)
        z_ns = self._project(self.ns_projection, user)
        return ops.matmul(z_seq, ops.transpose(z_ns)) / ops.exp(self.log_tau) - self.bias

    def compute_output_shape(self, cls_state_shape, user_shape):
        return (cls_state_shape[0], user_shape[0])

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units})
        return config


def alignment_loss(logits, same_user):
    """L_align = -1/N^2 Σ_ij log σ(y_ij s_ij), y_ij = +1 for the same user, -1 otherwise."""
    y = 2.0 * ops.cast(same_user, logits.dtype) - 1.0
    return ops.mean(ops.softplus(-y * logits))


class ReSTTrainer(backend_kernels.RowSteps, keras.Model):
    """Trains a ReST model with L_total = L_ce + λ_seq·L_seq + λ_align·L_align (ReST §2.3).

    g_seq (the auxiliary seq-CVR head) reads only sequence-conditioned states: the decoded [CLS] and
    candidate tokens (which attend to H alone, never to the user or context tokens) and the candidate
    embedding a; ŷ_seq = σ(g_seq(H_seq, a)), L_seq = BCE(ŷ_seq, y). The alignment pairs every sample's
    decoded [CLS] state with every row's user features over the batch; a pair is positive when the two
    rows carry the same user_* ids (the same user). Aux losses ignore sample weights.

    The call returns {"pctr", "seq_pctr", "align_logits", "same_user"}; `compute_loss` and
    `compute_metrics` read "pctr" for the compiled loss and metrics, so compile it as the model itself.

    Args:
        model: the ReST model to train (its layers are shared, not copied).
        seq_weight: λ_seq.
        align_weight: λ_align (needs user_ features in the schema when > 0).
        aux_units: hidden width of g_seq and of the alignment MLPs.
    """

    def __init__(self, model, seq_weight=LAMBDA_SEQ, align_weight=LAMBDA_ALIGN, aux_units=32, **kwargs):
        schema = model.schema
        if align_weight and not schema.group("user"):
            raise ZooError("rest: the alignment loss needs user_ features; pass align_weight=0 without them")
        inputs = schema.inputs()
        taps = model.tap_model()(inputs)  # the model's own graph: pctr, decoded Z [B, M, K, d], cand, user
        decoded = taps["decoded"]
        h_seq = ops.concatenate([decoded[:, :, 0], decoded[:, :, -1], taps["cand"]], axis=-1)
        g_seq = keras.Sequential(
            [keras.layers.Dense(aux_units, activation="relu"), keras.layers.Dense(1)], name="g_seq"
        )
        outputs = {"pctr": taps["pctr"], "seq_pctr": ops.sigmoid(ops.squeeze(g_seq(h_seq), axis=-1))}
        if schema.group("user"):
            m = schema.num_candidates
            cls_state = ops.reshape(decoded[:, :, 0], (-1, ops.shape(decoded)[-1]))  # [B M, d]
            user = ops.reshape(ops.repeat(taps["user"][:, None], m, axis=1), (-1, ops.shape(taps["user"])[-1]))
            outputs["align_logits"] = RestAlignment(aux_units, name="alignment")(cls_state, user)
            ids = ops.concatenate([ops.reshape(ops.cast(inputs[f.key], "int32"), (-1, max(f.tags, 1)))  # (tags: S ids)
                                   for f in schema.group("user")], axis=-1)
            ids = ops.reshape(ops.repeat(ids[:, None], m, axis=1), (-1, ids.shape[-1]))  # [B M, F_u]
            outputs["same_user"] = ops.all(ops.equal(ids[:, None, :], ids[None, :, :]), axis=-1)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.model = model
        self.seq_weight = seq_weight
        self.align_weight = align_weight
        self.aux_units = aux_units

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss = super().compute_loss(x, y, y_pred["pctr"], sample_weight, training)
        if self.seq_weight:
            seq = ops.mean(keras.losses.binary_crossentropy(y[..., None], y_pred["seq_pctr"][..., None]))
            loss = loss + self.seq_weight * seq
        if self.align_weight:
            loss = loss + self.align_weight * alignment_loss(y_pred["align_logits"], y_pred["same_user"])
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        return super().compute_metrics(x, y, y_pred["pctr"], sample_weight)
