"""A team's own impression log, drafted and compared: do the zoo's models beat the trivial baselines?

    python benchmarks/own_data_compare.py                       # din bst deepfm lightsuan, 3 seeds
    python benchmarks/own_data_compare.py --models din --seeds 1 --epochs 2
    python benchmarks/own_data_compare.py --models din --clipnorm 10 --work runs/own_data_clip10 \
        --table benchmarks/reproduced/own_data_compare_clip10     # DIN with FuxiCTR's clipping (issue #40)

The log is MovieLens-100K (../shared/data/movielens-100k/u.data) written as a team would export its
impressions: a CSV with a header, string ids ("u196", "m242"), ISO 8601 times and a 0/1 `liked` (rating
>= 4); the last 15% of rows by time are held back in a later file. The spec is what `spec draft` gives
with only --label/--time/--user/--item; `compare` trains every model over the seeds with early stopping
and scores the spec's test split and every later row (their histories also from the training log)
beside the baselines on the same rows. The work folder (default runs/own_data_compare) keeps every
finished cell: a rerun resumes. The leaderboard is copied to benchmarks/reproduced/own_data_compare/.
"""

import argparse
import csv
import datetime
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
U_DATA = ROOT.parent / "shared" / "data" / "movielens-100k" / "u.data"


def write_team_log(folder, held_back=0.15):
    """(training log, later file) of MovieLens-100K as a team's impression export (see the module)."""
    folder.mkdir(parents=True, exist_ok=True)
    train, later = folder / "impressions.csv", folder / "later.csv"
    if train.exists() and later.exists():
        return train, later
    with open(U_DATA) as f:
        rows = [tuple(int(v) for v in line.split("\t")) for line in f if line.strip()]
    rows.sort(key=lambda r: (r[3], r[0], r[1]))  # by time (ties: user, film)
    cut = int(len(rows) * (1 - held_back))
    for path, part in ((train, rows[:cut]), (later, rows[cut:])):
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["ts", "user_id", "movie_id", "liked"])
            for user, movie, rating, seconds in part:
                moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
                writer.writerow([moment.strftime("%Y-%m-%dT%H:%M:%SZ"), f"u{user}", f"m{movie}", int(rating >= 4)])
    return train, later


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["din", "bst", "deepfm", "lightsuan"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--clipnorm", type=float, help="clip the gradients' global norm (FuxiCTR's 10; default: none)")
    parser.add_argument("--work", default=str(ROOT / "runs" / "own_data_compare"))
    parser.add_argument("--table", default=str(ROOT / "benchmarks" / "reproduced" / "own_data_compare"))
    args = parser.parse_args(argv)
    if not U_DATA.exists():
        sys.exit(f"{U_DATA}: MovieLens-100K is not here")
    sys.path.insert(0, str(ROOT))
    import json

    import zoo
    zoo.configure_process()  # the settings the command line applies (zoo/process_settings.py)

    work = Path(args.work)
    train, later = write_team_log(work)
    spec_path = work / "spec.json"
    if not spec_path.exists():
        spec = zoo.datasets.draft_spec(str(train), label="liked", time="ts", user="user_id", item="movie_id")
        spec_path.write_text(json.dumps(spec, indent=2))
    fresh = not (work / "compare" / "cells").exists()  # every cell trained by this run: its cost can be told
    from zoo.recipes.compare import Comparison

    summarise, timed = Comparison.summarise, {}

    def timed_summarise(self):  # the leaderboard: the baselines, the bootstrap, the tables and the figure
        began = time.perf_counter()
        board = summarise(self)
        timed["summary"] = time.perf_counter() - began
        return board

    Comparison.summarise = timed_summarise
    started = time.perf_counter()
    board = zoo.recipes.compare(args.models, str(train), str(spec_path), str(work / "compare"), seeds=args.seeds,
                                epochs=args.epochs, clipnorm=args.clipnorm, later=str(later))
    whole = time.perf_counter() - started
    table = Path(args.table)
    table.mkdir(parents=True, exist_ok=True)
    for name in ("leaderboard.md", "leaderboard.json", "leaderboard.png"):
        source = work / "compare" / name
        if source.exists() and name == "leaderboard.png":
            shutil.copy(source, table / name)
        elif source.exists():  # paths relative to the repository
            (table / name).write_text(source.read_text().replace(str(ROOT) + os.sep, ""))
    shutil.copy(spec_path, table / "spec.json")
    print((table / "leaderboard.md").read_text())
    print(f"backend {os.environ.get('KERAS_BACKEND', 'tensorflow')}; cells kept in {work / 'compare'}")
    if fresh:  # issue #36's goal: compare adds at most 5% to its models' training time
        cells = [json.loads(path.read_text()) for path in (work / "compare" / "cells").glob("*/seed*.json")]
        training = sum(cell["fit_seconds"] for cell in cells)
        own = timed["summary"] + sum(cell.get("later_seconds", 0.0) for cell in cells)
        print(f"compare took {whole:.1f} s: {training:.1f} s in its models' training (Keras fit, {len(cells)} cells); "
              f"{whole - training - own:.1f} s ({(whole - training - own) / training:.1%}) in what a fit of each "
              "model also does (preparing the data, building the model, reading the splits, scoring the validation "
              f"and test rows, writing the preset); {own:.1f} s ({own / training:.1%}) in compare's own work (scoring "
              f"the later rows, {timed['summary']:.1f} s for the leaderboard: the baselines, the bootstrap, the tables "
              f"and the figure); in all {(whole - training) / training:.1%} on top of the training")


if __name__ == "__main__":
    main()
