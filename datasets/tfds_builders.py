"""TFDS builders for the six data sets, one per data set with one config per protocol.

Importing this module registers `zoo_criteo`, `zoo_avazu`, `zoo_movielens`, `zoo_amazon_books`,
`zoo_taobao` and `zoo_eleme`. The raw files are never downloaded: put them in the manual dir.

    import tensorflow_datasets as tfds
    from zoo.datasets import tfds_builders
    builder = tfds.builder("zoo_criteo/deres", data_dir=data_dir)
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=raw_folder))
    ds = tfds.load("zoo_criteo/deres", data_dir=data_dir, download=False, as_supervised=True)
    schema = tfds_builders.schema_from_info(builder.info)   # the zoo.Schema (with vocabulary sizes)

An example is {"features": {key: tensor}, "label": [1]} in the input contract (M = 1), with the
protocol's default options (sequence_length...); the Schema and the reader's info (sample_rate...) are
stored in the dataset's metadata. Processing goes through the same reader and cache as
`zoo.datasets.load` (cache dir: $ZOO_DATA_CACHE or ~/.cache/zoo/datasets).
"""

import json

import numpy as np
import tensorflow_datasets as tfds

from zoo.datasets import avazu, criteo, eleme, registry, taobao
from zoo.schema import Schema

_RATINGS = ["hist_item_id", "hist_rating", "hist_time", "user_user_id", "cand_item_id", "cand_time"]
KEYS = {
    ("criteo", "deres"): [f"cand_{n.lower()}" for n in criteo.NUMERIC + criteo.CATEGORICAL],
    ("criteo", "bars"): [f"cand_{n.lower()}" for n in criteo.NUMERIC + criteo.CATEGORICAL],
    ("avazu", "deres"): ["ctx_hour"] + [avazu._key(n) for n in avazu.FIELDS],
    ("avazu", "bars"): ["ctx_hour"] + [avazu._key(n) for n in avazu.FIELDS] + ["ctx_weekday", "ctx_weekend"],
    ("movielens", "rest"): _RATINGS,
    ("amazon_books", "rest"): _RATINGS,
    ("taobao", "suan"): ["hist_item_id", "hist_category", "hist_behavior", "hist_time", "user_user_id",
                         "cand_item_id", "cand_category", "cand_time", "ctx_hour"],
    ("taobao", "ads"): ["hist_item_id"] + [f"user_{n}" for n in taobao.USER_FIELDS.values()]
    + [f"cand_{n}" for n in taobao.CAND_FIELDS.values()] + ["ctx_pid", "ctx_hour", "num_price"],
    ("eleme", "suan"): [f"hist_{v[0]}" for v in eleme.ITEM.values()]
    + [f"hist_{n}" for n in eleme.BEHAVIOUR_ONLY.values()]
    + ["hist_time"] + [f"user_{n}" for n in eleme.USER.values()] + [f"cand_{v[0]}" for v in eleme.ITEM.values()]
    + ["cand_time"] + [f"ctx_{n}" for n in eleme.CONTEXT.values()] + [f"num_{n}" for n in eleme.NUM],
}
CHUNK = 1024


def _spec(key, length):
    shape = (length,) if key.startswith("hist_") else ((1,) if key.startswith("cand_") else ())
    dtype = np.int64 if key in ("hist_time", "cand_time") else (np.float32 if key.startswith("num_") else np.int32)
    return shape, dtype


def schema_from_info(info):
    """The zoo.Schema a built TFDS data set was made with (from its metadata)."""
    return Schema.from_json(info.metadata["schema"])


class _ZooBuilder(tfds.core.GeneratorBasedBuilder):
    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "First release."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = "Put the data set's raw files (as its provider distributes them) in manual_dir."
    NAME = None

    def _info(self):
        protocol = self.builder_config.name
        length = registry.reader_module(self.NAME).OPTIONS[protocol].get("sequence_length", 0)
        inner = {}
        for key in KEYS[self.NAME, protocol]:
            shape, dtype = _spec(key, length)
            inner[key] = tfds.features.Tensor(shape=shape, dtype=dtype)
        return tfds.core.DatasetInfo(
            builder=self,
            description=f"zoo.datasets {self.NAME}, protocol {protocol}: {self.builder_config.description}",
            features=tfds.features.FeaturesDict(
                {
                    "features": tfds.features.FeaturesDict(inner),
                    "label": tfds.features.Tensor(shape=(1,), dtype=np.float32),
                }
            ),
            supervised_keys=("features", "label"),
            metadata=tfds.core.MetadataDict(),
        )

    def _split_generators(self, dl_manager):
        processed = registry.prepare(self.NAME, dl_manager.manual_dir, protocol=self.builder_config.name)
        self.info.metadata["schema"] = processed.schema.to_json()
        self.info.metadata["info"] = json.dumps(processed.info)
        return {
            split: self._generate_examples(processed, split)
            for split in ("train", "validation", "test")
            if processed.num_rows(split)
        }

    def _generate_examples(self, processed, split):
        total = processed.num_rows(split)
        for begin in range(0, total, CHUNK):
            index = np.arange(begin, min(begin + CHUNK, total))
            features, labels = processed.take(split, index)
            for row, number in enumerate(index):
                yield int(number), {
                    "features": {key: values[row] for key, values in features.items()},
                    "label": labels[row],
                }


def _builder(class_name, name):
    protocols = registry.reader_module(name).PROTOCOLS
    configs = [tfds.core.BuilderConfig(name=protocol, description=text) for protocol, text in protocols.items()]
    return type(class_name, (_ZooBuilder,), {"NAME": name, "BUILDER_CONFIGS": configs, "__module__": __name__})


ZooCriteo = _builder("ZooCriteo", "criteo")
ZooAvazu = _builder("ZooAvazu", "avazu")
ZooMovielens = _builder("ZooMovielens", "movielens")
ZooAmazonBooks = _builder("ZooAmazonBooks", "amazon_books")
ZooTaobao = _builder("ZooTaobao", "taobao")
ZooEleme = _builder("ZooEleme", "eleme")
