import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class SuanSwiGLU(keras.layers.Layer):
    """SUAN §3.2.3 feed-forward network (eq 16), hidden width 3d, no biases:

        E_FFN = (swish(E_AFN W1^FFN) * E_AFN W2^FFN) W3^FFN,   W1, W2: d x 3d,  W3: 3d x d.
    """

    def build(self, input_shape):
        d = int(input_shape[-1])
        add = lambda name, shape: self.add_weight(name=name, shape=shape, initializer="glorot_uniform")  # noqa: E731
        self.gate_kernel = add("gate_kernel", (d, 3 * d))  # W1
        self.up_kernel = add("up_kernel", (d, 3 * d))  # W2
        self.down_kernel = add("down_kernel", (3 * d, d))  # W3
        self.built = True

    def call(self, x):
        return ops.matmul(ops.silu(ops.matmul(x, self.gate_kernel)) * ops.matmul(x, self.up_kernel), self.down_kernel)

    def compute_output_shape(self, input_shape):
        return input_shape
