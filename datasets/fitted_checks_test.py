"""A preset's preprocessing.json edited by someone who recomputes its checksum (or written badly by a tool) is
refused on reading, in one line naming the file and the field: each test fits a real state, saves it in a
preset, tampers one field, records the new sha256 in metadata.json as such an edit would, and reads it."""

import copy
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from tests.testing import TestCase
from zoo.datasets import prepare, read_preprocessing
from zoo.datasets.fitted_checks import shown
from zoo.errors import ZooError

SAVED = Path(__file__).resolve().parent.parent / "saved"
RATINGS = [f"u{u}\tm{(u + k) % 8 + 1}\t{1 + (u + k) % 5}\t{880000000 + 1000 * k + u}"
           for u in range(6) for k in range(8)]


def impression_state(folder, change=None):
    """The fitted state of the impression log's spec (price standardized), the spec edited by `change`."""
    from tests.impression_logs import impression_spec, write_impression_log

    spec = impression_spec(sequence_length=4)
    spec["columns"]["price"]["scale"] = "standardize"
    if change is not None:
        change(spec)
    os.makedirs(folder)
    log = write_impression_log(os.path.join(folder, "log.csv"), rows=200)
    return prepare(spec, log, cache_dir=folder, verbose=False).preprocessing()


def movielens_state(folder):
    """The fitted state of the movielens reader (its vocabularies) on 6 users x 8 ratings."""
    os.makedirs(os.path.join(folder, "ml"))
    with open(os.path.join(folder, "ml", "u.data"), "w") as f:
        f.write("".join(line + "\n" for line in RATINGS))
    return prepare("movielens", os.path.join(folder, "ml"), cache_dir=folder, sequence_length=4,
                   verbose=False).preprocessing()


def save_preset(state, folder):
    import zoo
    from tests.model_configs import SMALL
    from tests.testing import small_simulator

    zoo.save(zoo.get("din", schema=small_simulator().schema, **SMALL["din"]), folder, preprocessing=state)
    return folder


class FittedChecksTest(TestCase):
    @classmethod
    def setUpClass(cls):
        root = tempfile.mkdtemp(prefix="zoo-test-")
        cls.addClassCleanup(shutil.rmtree, root, True)
        cls.spec_preset = save_preset(impression_state(os.path.join(root, "spec")), os.path.join(root, "spec_preset"))
        cls.reader_preset = save_preset(movielens_state(os.path.join(root, "movielens")),
                                        os.path.join(root, "movielens_preset"))

    def tampered(self, change, preset=None, text=None):
        """A copy of a preset whose preprocessing.json `change(state)` edited (or whose file is `text`), its
        sha256 recomputed into metadata.json; returns (the folder, its preprocessing.json's path)."""
        folder = os.path.join(self.get_temp_dir(), "preset")
        shutil.copytree(preset or self.spec_preset, folder)
        path = os.path.join(folder, "preprocessing.json")
        if text is None:
            with open(path) as f:
                state = json.load(f)
            change(state)
            text = json.dumps(state)  # NaN and Infinity as Python's json writes them
        with open(path, "w") as f:
            f.write(text)
        metadata_path = os.path.join(folder, "metadata.json")
        with open(metadata_path) as f:
            metadata = json.load(f)
        metadata["preprocessing_sha256"] = hashlib.sha256(text.encode()).hexdigest()
        with open(metadata_path, "w") as f:
            json.dump(metadata, f)
        return folder, path

    def assertRefused(self, cases, preset=None):
        """Each (change, message after "<file>: ") of `cases` is refused in exactly that one line."""
        for change, message in cases:
            folder, path = self.tampered(change, preset)
            with self.subTest(message=message), self.assertRaises(ZooError) as caught:
                read_preprocessing(folder)
            self.assertEqual(str(caught.exception), f"{path}: {message}")

    def state(self, preset=None):
        with open(os.path.join(preset or self.spec_preset, "preprocessing.json")) as f:
            return json.load(f)

    def test_running_statistics_counts_and_priors(self):
        table = self.state()["fitted"]["statistics:item_id"]
        values = len(table["values"])
        counted = "fitted.statistics:item_id"

        def at(field, index, value):
            return lambda state: state["fitted"]["statistics:item_id"][field].__setitem__(index, value)

        whole = "a count is a whole number from 0 to 2**53"
        self.assertRefused([
            (at("rows", 0, "2"), f'{counted}.rows[0] is "2" ({whole})'),
            (at("rows", 1, float("nan")), f"{counted}.rows[1] is NaN ({whole})"),
            (at("positives", 2, -1), f"{counted}.positives[2] is -1 ({whole})"),
            (at("rows", 3, 1e300), f"{counted}.rows[3] is 1e+300 ({whole})"),
            (at("positives", 0, table["rows"][0] + 1),
             f"{counted}.positives[0] is {table['rows'][0] + 1} (a value's positives are at most its rows, "
             f"{table['rows'][0]})"),
            (lambda state: state["fitted"]["statistics:item_id"]["rows"].pop(),
             f"{counted}.rows holds {values - 1:,} counts but {counted}.values holds {values:,} values (one count "
             "per value)"),
            (lambda state: state["fitted"]["statistics:item_id"]["positives"].append(0),
             f"{counted}.positives holds {values + 1:,} counts but {counted}.values holds {values:,} values (one count "
             "per value)"),
            (at("values", 1, table["values"][0]),
             f'{counted}.values[1] is "{table["values"][0]}" (each value is counted once; {counted}.values[0] is the '
             "same)"),
            (lambda state: state["fitted"].pop("statistics:item_id"),
             f'{counted} is missing (the spec\'s statistics key "item_id" is bucketed with it)'),
            (lambda state: state["fitted"]["statistics:item_id"].pop("values"),
             f"{counted}.values is missing (counts per value need their values)"),
            (lambda state: state["fitted"].pop("statistics"),
             "fitted.statistics is missing (the spec's statistics smooth every rate toward its prior)"),
            (lambda state: state["fitted"]["statistics"].update(prior=float("nan")),
             "fitted.statistics.prior is NaN (a rate prior must lie in [0, 1])"),
            (lambda state: state["fitted"]["statistics"].update(prior=1.5),
             "fitted.statistics.prior is 1.5 (a rate prior must lie in [0, 1])"),
        ])

    def test_bucket_edges(self):
        edges = self.state()["fitted"]["statistics:user_id"]["edges"]
        path = "fitted.statistics:user_id.edges"

        def edit(index, change):
            return lambda state: change(state["fitted"]["statistics:user_id"]["edges"][index])

        self.assertRefused([
            (lambda state: state["fitted"]["statistics:user_id"].pop("edges"),
             f"{path} is missing (each statistic (seen, positives, rate) is bucketed by its edges)"),
            (lambda state: state["fitted"]["statistics:user_id"]["edges"].pop(),
             f"{path} is {json.dumps(edges[:2])[:57]}... (three lists of bucket edges: seen, positives, rate)"),
            (edit(0, lambda e: e.reverse()),
             f"{path}[0][1] is {edges[0][-2]} (bucket edges increase strictly; {path}[0][0] is {edges[0][-1]})"),
            (edit(2, lambda e: e.__setitem__(1, float("nan"))),
             f"{path}[2][1] is NaN (bucket edges are finite numbers)"),
            (edit(0, lambda e: e.insert(1, e[0])),
             f"{path}[0][1] is {edges[0][0]} (bucket edges increase strictly; {path}[0][0] is {edges[0][0]})"),
            (edit(1, lambda e: e.__setitem__(0, "0")), f'{path}[1][0] is "0" (bucket edges are finite numbers)'),
            (edit(0, lambda e: e.extend(range(100, 120))),
             f"{path}[0] holds {len(edges[0]) + 20} edges but the spec's 20 statistics buckets have at most 19"),
        ])

    def test_numeric_fill(self):
        self.assertRefused([
            (lambda state: state["spec"]["columns"]["price"].update(fill="median"),
             "spec column 'price': 'fill' should be \"mean\" or a finite number within +-1e9, found 'median'"),
            (lambda state: state["fitted"]["price"].update(fill="2.5"),
             'fitted.price.fill is "2.5" (a numeric column\'s fill value is a finite number)'),
            (lambda state: state["fitted"]["price"].update(fill=float("inf")),
             "fitted.price.fill is Infinity (a numeric column's fill value is a finite number)"),
            (lambda state: state["fitted"]["price"].pop("fill"),
             "fitted.price.fill is missing (missing values are filled with the fitted fill)"),
        ])

    def test_vocabularies(self):
        tokens = self.state()["fitted"]["item_id"]["tokens"]
        self.assertRefused([
            (lambda state: state["fitted"]["device"]["tokens"].__setitem__(2, 7),
             "fitted.device.tokens[2] is 7 (a vocabulary's tokens are texts, as a file's values are read)"),
            (lambda state: state["fitted"]["item_id"]["tokens"].append(tokens[3]),
             f'fitted.item_id.tokens[{len(tokens)}] is "{tokens[3]}" (a vocabulary lists each token once; '
             "fitted.item_id.tokens[3] is the same)"),
            (lambda state: state["fitted"]["item_id"].update(tokens="sku-0001"),
             'fitted.item_id.tokens is "sku-0001" (a vocabulary lists its tokens in id order)'),
        ])
        # A reader's vocabularies (the readers look their ids up in them) hold at least one token.
        self.assertRefused([
            (lambda state: state["fitted"]["item_id"].update(tokens=[]),
             "fitted.item_id.tokens is [] (the movielens reader's vocabularies hold at least one token)"),
        ], preset=self.reader_preset)

    def test_a_vocabularys_last_seen_times(self):
        rule = "a vocabulary's last_seen lists each token's latest time (whole unix seconds), in id order"
        size = len(self.state()["fitted"]["item_id"]["tokens"])
        self.assertRefused([
            (lambda state: state["fitted"]["item_id"].update(last_seen=[1] * (size - 1)),
             f"fitted.item_id.last_seen is {shown([1] * (size - 1))} ({rule})"),
            (lambda state: state["fitted"]["item_id"].update(last_seen=[-1] * size),
             f"fitted.item_id.last_seen is {shown([-1] * size)} ({rule})"),
        ])

    def test_numeric_scaler(self):
        rule = "a scaler's standard deviation is a positive finite number"
        self.assertRefused([
            (lambda state: state["fitted"]["price"].update(mean="3.1"),
             'fitted.price.mean is "3.1" (a scaler\'s mean is a finite number)'),
            (lambda state: state["fitted"]["price"].update(std=0), f"fitted.price.std is 0 ({rule})"),
            (lambda state: state["fitted"]["price"].update(std=-1.5), f"fitted.price.std is -1.5 ({rule})"),
            (lambda state: state["fitted"]["price"].update(std=float("nan")), f"fitted.price.std is NaN ({rule})"),
            (lambda state: state["fitted"]["price"].pop("std"),
             "fitted.price.std is missing (a scaler needs its mean and standard deviation)"),
            (lambda state: [state["fitted"]["price"].pop(key) for key in ("mean", "std")],
             'fitted.price.std is missing (the spec\'s column scales by "standardize")'),
            (lambda state: state["fitted"]["price"].update(log1p=False),
             "fitted.price.log1p is false (the spec's column says log1p true)"),
            (lambda state: state["fitted"]["price"].update(edges=[1.0, 2.0], buckets=3),
             "fitted.price.edges is [1.0, 2.0] (the spec's column has buckets null)"),
            (lambda state: [state["fitted"]["price"].pop(key) for key in ("mean", "std")]
             + [state["fitted"]["price"].update(min=1.0, max=0.5)],
             "fitted.price.max is 0.5 (a scaler's greatest value is at least its least value)"),
            (lambda state: [state["fitted"]["price"].pop(key) for key in ("mean", "std")]
             + [state["fitted"]["price"].update(min=1.0, max=2.0)],
             'fitted.price.max is 2.0 (the spec\'s column scales by "standardize")'),
        ])

    def test_a_deeply_nested_file_is_one_line(self):
        folder, path = self.tampered(None, text="[" * 100_000 + "]" * 100_000)
        with self.assertRaises(ZooError) as caught:
            read_preprocessing(folder)
        self.assertEqual(str(caught.exception), f"{path}: not a JSON preprocessing file (nested deeper than Python's "
                                                "JSON reader goes; a fitted state is a few levels deep)")

    def test_tables_kinds_and_the_rest_of_the_state(self):
        titles = len(self.state()["fitted"]["title"]["tokens"])
        self.assertRefused([
            (lambda state: state["fitted"]["device"].update(kind="dictionary"),
             'fitted.device.kind is "dictionary" (kinds: vocabulary, hashed, shared, numeric, quantile_buckets, '
             "statistics)"),
            (lambda state: state["fitted"].update(device=["ios", "web"]),
             'fitted.device is ["ios", "web"] (a fitted table is an object with a \'kind\')'),
            (lambda state: state["fitted"].update(price={"kind": "vocabulary", "tokens": ["1"]}),
             "fitted.price.kind is \"vocabulary\" (the spec's numeric column 'price' is applied with a numeric)"),
            (lambda state: state["fitted"].pop("device"),
             "fitted.device is missing (the spec's categorical column 'device' is applied with it)"),
            (lambda state: state["fitted"].update(title={"kind": "hashed", "buckets": 0}),
             "fitted.title.buckets is 0 (hash buckets are a whole number of at least 1)"),
            (lambda state: state["fitted"].update(title={"kind": "hashed", "buckets": 5}),
             f"the fitted hashing of 'title' makes 7 ids but the schema's cand_title has vocabulary_size {titles + 2}: "
             "the hashing and the schema come from different fits"),
            (lambda state: state["fitted"].update(extra={"kind": "shared", "column": "price"}),
             'fitted.extra.column is "price" (a shared table names a fitted vocabulary or hashed table)'),
            (lambda state: state["info"].update(sample_rate=-0.5), "info.sample_rate is -0.5 (the rate the fit "
                                                                   "kept negatives at is a finite number >= 0)"),
            (lambda state: state.update(info=[]), "info is [] (the preprocessing's 'info' is an object)"),
            (lambda state: state["schema"].update(sequence=4),
             "schema: schema has unknown key(s) sequence (allowed: features, num_candidates, sequence_length, time)"),
            (lambda state: state["spec"]["time"].update(format="yyyy"),
             "spec 'time.format': 'yyyy' is not unix_s, unix_ms, iso8601 or a strptime format"),
            (lambda state: state["spec"]["label"].update(column=3),
             self.spec_message(lambda spec: spec["label"].update(column=3))),
        ])

    def spec_message(self, change):
        """The message DataSpec gives a spec changed by `change` (the file's one line quotes it)."""
        from zoo.datasets.spec import DataSpec

        spec = copy.deepcopy(self.state()["spec"])
        change(spec)
        with self.assertRaises(ZooError) as caught:
            DataSpec.read(spec)
        return str(caught.exception)

    def test_a_tampered_preset_fails_to_load_before_its_model_is_built(self):
        import zoo

        folder, path = self.tampered(lambda state: state["fitted"]["price"].update(std=0))
        with self.assertRaises(ZooError) as caught:
            zoo.load(folder)
        self.assertEqual(str(caught.exception), f"{path}: fitted.price.std is 0 (a scaler's standard deviation is a "
                                                "positive finite number)")


class ValidStatesTest(TestCase):
    """Every state the zoo ships or the suite fits passes the checks unchanged."""

    def test_the_shipped_presets(self):
        shipped = sorted(SAVED.glob("*/preprocessing.json"))
        self.assertTrue(shipped, "no shipped preset carries a preprocessing.json")
        for path in shipped:
            with self.subTest(preset=path.parent.name):
                self.assertEqual(read_preprocessing(path.parent)["format"], "zoo.datasets.preprocessing")

    def test_the_states_the_suite_fits(self):
        folder = self.get_temp_dir()
        states = {
            "movielens": movielens_state(os.path.join(folder, "movielens")),
            "spec standardized": impression_state(os.path.join(folder, "standardized")),
            "spec hashed, no feedback": impression_state(os.path.join(folder, "hashed"), lambda spec: (
                spec["columns"]["title"].update(hash_buckets=64),
                spec.update(history={"from": "log", "fields": ["item_id"], "feedback": False},
                            statistics={"keys": ["item_id"]}))),
        }
        for name, state in states.items():
            with self.subTest(state=name):
                self.assertEqual(read_preprocessing(state), state)
