"""Threads sharing one model (a Python scoring service answers requests in threads) get the serial results
from every entry point, on every backend.

Under JAX, Keras' predict detaches a model's weights while it runs and compiles them donated, so two
threads scoring one model used to fail ("Array has been deleted", "'NoneType' object is not callable":
4 threads x 12 din.score calls, 35 errors) or hang (lightsuan score_candidates, rest encode + decode).
Each model's entry points now run one call at a time (zoo.guards.entry_lock).
"""

import threading

import keras
import numpy as np

import zoo
from tests.model_configs import SMALL
from tests.testing import TestCase, small_simulator
from zoo.errors import ZooError

THREADS, CALLS = 8, 50


class ThreadsTest(TestCase):
    def test_threads_get_the_serial_results(self):
        simulator = small_simulator()
        features, _ = simulator.sample(4, seed=4)
        many, _ = simulator.sample(12, seed=5)
        with_candidates = dict(features, cand_time=np.repeat(features["cand_time"], 3, axis=1) + np.arange(3),
                               **{k: many[k].reshape(4, 3) for k in ("cand_item_id", "cand_category")})
        candidates = {k: v for k, v in with_candidates.items() if not k.startswith("hist")}
        short = dict(features, hist_item_id=features["hist_item_id"][:, 1:])
        din, light, rest = (zoo.get(name, schema=simulator.schema, **SMALL[name])
                            for name in ("din", "lightsuan", "rest"))
        calls = {
            "din.score": lambda: din.score(features),
            "din.predict": lambda: din.predict(features, verbose=0),
            "din.predict_on_batch": lambda: din.predict_on_batch(features),
            "din(features)": lambda: keras.ops.convert_to_numpy(din(features)),
            "din.score of a bad request": lambda: din.score(short),
            "lightsuan.score": lambda: light.score(features),
            "lightsuan.score_candidates": lambda: light.score_candidates(with_candidates),
            "rest.score": lambda: rest.score(features),
            "rest.encode + decode": lambda: rest.decode(rest.encode(features), candidates),
        }
        names = list(calls)

        def outcome(name):
            try:
                return np.asarray(calls[name]())
            except ZooError as error:
                return f"ZooError: {error}"
            except Exception as error:  # noqa: BLE001 - what a thread got, compared with the serial outcome
                return f"{type(error).__name__}: {error}"

        serial = {name: outcome(name) for name in names}
        self.assertTrue(serial["din.score of a bad request"].startswith("ZooError: hist_item_id has length 7"))
        results = [[] for _ in range(THREADS)]

        def work(thread):
            for i in range(CALLS):
                name = names[(thread + i) % len(names)]  # every entry point runs in several threads at once
                results[thread].append((name, outcome(name)))

        threads = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        self.assertFalse(any(thread.is_alive() for thread in threads), "a thread hangs")
        differences = []
        for name, got in (pair for thread in results for pair in thread):
            expected = serial[name]
            same = (isinstance(got, str) and got == expected) or (
                not isinstance(got, str) and not isinstance(expected, str) and got.shape == expected.shape
                and np.allclose(got, expected, atol=1e-6))
            if not same:
                differences.append(f"{name}: {str(got)[:120]}")
        self.assertEqual(sum(map(len, results)), THREADS * CALLS)
        self.assertEqual(differences, [], f"{len(differences)} of {THREADS * CALLS} calls differ from the serial ones")
