import os
import unittest
from unittest import mock

import numpy as np

from tests.testing import SHARED_DATA, TestCase, small_simulator
from zoo.datasets import avazu, eleme, prepare

CRITEO = SHARED_DATA / "deepctr" / "criteo_sample.txt"


class TfdsBuilderTest(TestCase):
    @unittest.skipUnless(CRITEO.exists(), "shared Criteo sample not available")
    def test_build_then_load_without_download(self):
        import tensorflow_datasets as tfds

        from zoo.datasets import tfds_builders

        data_dir, cache = self.get_temp_dir(), self.get_temp_dir()
        with mock.patch.dict(os.environ, {"ZOO_DATA_CACHE": cache, "TFDS_DATA_DIR": data_dir}):
            builder = tfds.builder("zoo_criteo/deres", data_dir=data_dir)
            builder.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=str(CRITEO.parent)))
            dataset = tfds.load("zoo_criteo/deres", data_dir=data_dir, split="test", download=False, as_supervised=True)
            schema = tfds_builders.schema_from_info(builder.info)
            expected = prepare("criteo", CRITEO, cache_dir=cache)
        self.assertEqual(schema, expected.schema)
        rows = list(dataset.as_numpy_iterator())
        self.assertEqual(len(rows), 15)
        features, labels = expected.take("test", np.arange(15))
        got = sorted((tuple(int(np.ravel(r[0][k])[0]) for k in schema.keys()), float(r[1][0])) for r in rows)
        want = sorted(
            (tuple(int(np.ravel(features[k][i])[0]) for k in schema.keys()), float(labels[i, 0])) for i in range(15)
        )
        self.assertEqual(got, want)

    def test_static_keys_match_the_readers(self):
        from zoo.datasets import tfds_builders

        folder = self.get_temp_dir()
        eleme.write_simulated(os.path.join(folder, "eleme.csv"), small_simulator(), 30, seed=0)
        with open(os.path.join(folder, "train.csv"), "w") as f:
            f.write(",".join(avazu.HEADER) + "\n" + ",".join(["1", "0", "14102100"] + ["a"] * 21) + "\n")
        with open(os.path.join(folder, "u.data"), "w") as f:
            f.write("".join(f"{u}\t{i}\t4\t{100 + i}\n" for u in range(5) for i in range(5)))
        for name, protocol in (("eleme", "suan"), ("avazu", "deres"), ("avazu", "bars"), ("movielens", "rest")):
            processed = prepare(name, folder, protocol=protocol, cache_dir=self.get_temp_dir())
            self.assertEqual(set(tfds_builders.KEYS[name, protocol]), set(processed.schema.keys()), name)
