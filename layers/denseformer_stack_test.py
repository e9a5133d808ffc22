import numpy as np

from tests.references import deres_layer_branch
from tests.testing import TestCase
from zoo.errors import ZooError
from zoo.layers.denseformer_stack import DenseFormerStack


def inputs():
    rng = np.random.default_rng(0)
    return rng.normal(size=(2, 3, 8)).astype("float32"), np.array([[True, True, True], [True, False, True]])


class DenseFormerStackTest(TestCase):
    def test_layer_basics(self):
        x, valid = inputs()
        self.run_layer_test(DenseFormerStack, {"num_layers": 2, "num_heads": 2}, (x,), (2, 3, 8), call_kwargs={"valid": valid})

    def test_depth_weighted_average_in_numpy(self):
        # DenseFormer §3: X_l = Y_{l-1} + f_l(Y_{l-1}), Y_l = sum_{j<=l} a_{l,j} X_j, with fixed a.
        x, valid = inputs()
        stack = DenseFormerStack(num_layers=3, num_heads=2)
        stack(x, valid=valid)
        a = [np.array([0.5, 0.8]), np.array([-0.3, 0.4, 1.1]), np.array([0.2, 0.1, -0.5, 0.9])]
        for weight, value in zip(stack.dwa_weights, a):
            weight.assign(value.astype("float32"))
        outputs, y = [x.astype("float64")], x.astype("float64")
        for l, sublayer in enumerate(stack.transformer_layers):
            outputs.append(y + deres_layer_branch(sublayer, y, valid))
            y = sum(a[l][j] * outputs[j] for j in range(l + 2))
        self.assertAllClose(stack(x, valid=valid), y, atol=1e-4)

    def test_starts_as_the_residual_only_stack(self):
        x, valid = inputs()
        stack = DenseFormerStack(num_layers=2, num_heads=2)
        out = stack(x, valid=valid)
        y = x.astype("float64")
        for sublayer in stack.transformer_layers:
            y = y + deres_layer_branch(sublayer, y, valid)
        self.assertAllClose(out, y, atol=1e-4)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ZooError, "num_layers"):
            DenseFormerStack(num_layers=0)
        with self.assertRaisesRegex(ZooError, "num_heads is 0"):
            DenseFormerStack(num_heads=0)
        with self.assertRaisesRegex(ZooError, "divisible"):
            DenseFormerStack(num_layers=1, num_heads=3)(np.zeros((1, 2, 8), "float32"))
