import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class FactorizationMachine(keras.layers.Layer):
    """The degree-2 factorization machine (Rendle, Factorization Machines, ICDM 2010, eq 1 and lemma 3.1):

        y(x) = w_0 + sum_i w_i x_i + sum_{i<j} <v_i, v_j> x_i x_j
        sum_{i<j} <v_i, v_j> x_i x_j = 1/2 sum_f [ (sum_i v_{i,f} x_i)^2 - sum_i v_{i,f}^2 x_i^2 ]   (O(k n))

    Over fields (DeepFM §2.1, FM component): the input holds, per field, the factor token v_i x_i
    (FieldTokens: the embedding of the field's value; for a numeric field v_f * value) and the
    first-order term w_i x_i, so the sums run over the F fields. w_0 is this layer's weight.

    Call:
        factors [..., F, k], linear [..., F] -> y [..., 1] (a logit; sigmoid gives FM's pCTR).
    """

    def build(self, factors_shape, linear_shape=None):
        self.bias = self.add_weight(shape=(1,), initializer="zeros", name="bias")  # w_0
        self.built = True

    def call(self, factors, linear):
        square_of_sum = ops.square(ops.sum(factors, axis=-2))  # [..., k]
        sum_of_squares = ops.sum(ops.square(factors), axis=-2)  # [..., k]
        pairwise = 0.5 * ops.sum(square_of_sum - sum_of_squares, axis=-1, keepdims=True)
        return self.bias + ops.sum(linear, axis=-1, keepdims=True) + pairwise

    def compute_output_shape(self, factors_shape, linear_shape=None):
        return tuple(factors_shape)[:-2] + (1,)
