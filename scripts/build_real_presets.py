"""Builds the presets trained on real public data, from the cells of the reproduced tables (seed 0).

    python scripts/build_real_presets.py rest_movielens --path ../shared/data/movielens-100k
    python scripts/build_real_presets.py suan_userbehavior distilsuan_userbehavior \
        --path ../shared/data/taobao-userbehavior/UserBehavior.csv

    python scripts/build_real_presets.py rest_movielens --calibrate --path ../shared/data/movielens-100k

Each preset is one row of a table in recipes/reproduce.py (the same hyperparameters, recipe and data
options), trained with seed 0 under the TensorFlow backend, tested on the protocol's test split, and
saved with its fitted preprocessing (`preprocessing.json`: the vocabularies the reader fitted on the
training data), so `zoo.datasets.load(<data>, <raw rows>, preprocessing="saved/<preset>")` turns a
user's raw rows into batches this preset scores, without refitting. The data never enters the
repository: MovieLens and Taobao UserBehavior are for research use under their own terms (see the
preset's metadata.json). `--calibrate` then fits Platt scaling on the protocol's validation split
(`python -m zoo calibrate`, kept only where it lowers the validation LogLoss; the recorded test metrics
become the calibrated preset's) and recomputes the reference scores.
"""

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import keras

import zoo
from zoo import datasets
from zoo.recipes.raw_rows import score_raw_rows
from zoo.recipes.reproduce import Reproduction, get_table

SAVED = Path(__file__).resolve().parents[1] / "saved"

LICENCES = {
    "movielens": "MovieLens 100K (GroupLens, University of Minnesota): research use; no redistribution of the "
                 "data; cite Harper & Konstan 2015. The data is not in this repository.",
    "taobao": "Taobao UserBehavior (Alibaba, Tianchi): research use only under the Tianchi data licence; no "
              "redistribution. The data is not in this repository.",
}

PRESETS = {
    "rest_movielens": {"table": "rest-table2", "row": "ReST", "data_options": {"sequence_length": 50}},
    "suan_userbehavior": {"table": "suan-table2", "row": "SUAN", "data_options": {"sequence_length": 50}},
    "distilsuan_userbehavior": {"table": "suan-table2", "row": "DistilSUAN k=8 r=2",
                                "data_options": {"sequence_length": 50}},
}


def build(name, path, seed=0):
    spec = PRESETS[name]
    table = get_table(spec["table"])
    reproduction = Reproduction(table, path, out=f"/tmp/zoo_real_presets/{name}", rows=[spec["row"]], grid=False,
                                data_options=spec["data_options"], log=print)
    row = reproduction.selected[0]
    model, result, _, _ = reproduction.train_cell(row, seed)
    processed = datasets.prepare(table.data, path, verbose=False, **reproduction.data_options)
    state = processed.preprocessing()
    folder = SAVED / name
    model = _inference_copy(model)
    model.save_to_preset(
        folder,
        metadata={
            "training_data": {
                "data": table.data, "protocol": state["protocol"], "raw_file": Path(path).name,
                "options": reproduction.data_options, "split": "the protocol's train split; early stopping on "
                "its validation split", "licence": LICENCES[table.data],
            },
            "metrics": {"test_auc": result["test_auc"], "test_logloss": result["test_logloss"],
                        "test_gauc": result["test_gauc"], "test_rows": result["test_rows"]},
            "recipe": result["recipe"], "seed": seed, "table_row": f"{table.name}: {row.label}",
            "built_by": f"python scripts/build_real_presets.py {name} --path <{table.data} raw data>",
        },
        preprocessing=state,
    )
    add_reference(folder, table.data, path)
    print(f"{name}: test AUC {result['test_auc']:.4f}, LogLoss {result['test_logloss']:.4f} -> {folder}")
    shutil.rmtree(f"/tmp/zoo_real_presets/{name}", ignore_errors=True)


def calibrate(name, path):
    """Platt scaling of a built preset on its protocol's validation split, written into its own folder
    (`python -m zoo calibrate`), then its reference scores recomputed."""
    from zoo.__main__ import main as command_line

    data, folder = get_table(PRESETS[name]["table"]).data, SAVED / name
    if command_line(["calibrate", str(folder), "--data", data, "--path", str(path), "--out", str(folder)]) != 0:
        sys.exit(f"{name}: calibration failed")
    add_reference(folder, data, path)


def _inference_copy(model):
    """The trained model without its optimizer (a compiled model's weights file also holds Adam's moments)."""
    copy = type(model).from_config(model.get_config())
    copy.set_weights(model.get_weights())
    return copy


def user_lines(raw_file, count=40):
    """Line numbers (1-based) of the first `count` rows of the file's first user (the first field)."""
    delimiter = "\t" if raw_file.name == "u.data" else ","
    first, lines = None, []
    with open(raw_file, encoding="utf-8-sig") as f:
        for number, line in enumerate(f, 1):
            user = line.split(delimiter, 1)[0]
            first = first or user
            if user == first:
                lines.append(number)
                if len(lines) == count:
                    break
    return lines


def raw_file(data, path):
    path = Path(path)
    return path / "u.data" if data == "movielens" and path.is_dir() else path


def write_lines(source, lines, directory):
    """Those lines of `source`, in a file of the same name in `directory` (the reader detects the format by it)."""
    wanted, target = set(lines), Path(directory) / source.name
    with open(source, encoding="utf-8-sig") as f, open(target, "w") as out:
        out.writelines(line for number, line in enumerate(f, 1) if number in wanted)
    return target


def add_reference(folder, data, path):
    """metadata.json's "reference": which raw lines (numbers only: the data is not redistributed) and the
    scores this preset gives them in scoring mode; tests/real_presets_test.py checks every backend gives
    the same scores from the user's copy of the data."""
    source = raw_file(data, path)
    lines = user_lines(source)
    model = zoo.load(folder)
    with tempfile.TemporaryDirectory() as tmp:
        scores, samples = score_raw_rows(model, data, write_lines(source, lines, tmp), folder, cache_dir=tmp)
    metadata_path = folder / "metadata.json"
    metadata = json.loads(metadata_path.read_text())
    metadata["reference"] = {"data": data, "file": source.name, "lines": lines,
                             "sample_lines": [lines[int(x) - 1] for x in samples], "scores": [float(x) for x in scores]}
    metadata_path.write_text(json.dumps(metadata, indent=2))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+", help=f"presets to build ({', '.join(PRESETS)})")
    parser.add_argument("--path", required=True, help="the data set's raw file or folder")
    parser.add_argument("--calibrate", action="store_true",
                        help="(re)calibrate a built preset on its validation split, then its reference scores")
    parser.add_argument("--reference-only", action="store_true",
                        help="only (re)compute the reference scores of a built preset")
    args = parser.parse_args(argv)
    if keras.backend.backend() != "tensorflow":
        sys.exit("build the real-data presets under KERAS_BACKEND=tensorflow (the tables' backend)")
    for name in args.names:
        if name not in PRESETS:
            sys.exit(f"unknown preset '{name}' (known: {', '.join(PRESETS)})")
        if args.reference_only:
            add_reference(SAVED / name, get_table(PRESETS[name]["table"]).data, args.path)
        elif args.calibrate:
            calibrate(name, args.path)
        else:
            build(name, args.path)
            calibrate(name, args.path)


if __name__ == "__main__":
    main()
