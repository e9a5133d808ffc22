"""Logs that grow, replayed a day at a time: train from yesterday's preset, or retrain on everything?

    python benchmarks/daily_retraining.py                  # days 1..4 train, each next day scored
    python benchmarks/daily_retraining.py --days 8 --model din
    python benchmarks/daily_retraining.py --days 8 --item-min-count 2 --work runs/daily_retraining_mc2 \
        --table benchmarks/reproduced/daily_retraining_mc2           # items seen once go to the OOV id
    python benchmarks/daily_retraining.py --days 8 --item-max-size 12000 --work runs/daily_retraining_cap \
        --table benchmarks/reproduced/daily_retraining_cap           # the item table capped: LRU eviction

The Taobao UserBehavior sample (../shared/data/taobao-userbehavior) is written as a team's event log,
one CSV per day (`kind` view/like/basket/order, `ts` ISO text, `who`, `what`, `cat`; positives basket and
order), and its spec drafted from the first day with the README's flags. Then, for each day d >= 2, three
models score day d + 1 (its rows' histories and statistics from every earlier day, `evaluate
--history-from`):

- frozen: the model fitted on day 1, never trained again;
- from yesterday: `fit --from` the previous day's preset on day d (its vocabularies grown), days 1..d-1
  read for the histories and running statistics of day d's rows (`--history-from`);
- the same without `--history-from` (day d's histories from day d alone);
- full retrain: a fresh fit on days 1..d.

Each row of the table: the AUC of each on day d + 1, the share of day d + 1's rows whose item is unknown to
each, and each fit's wall time. The work folder (default runs/daily_retraining) keeps every finished
cell (a rerun resumes); the table goes to benchmarks/reproduced/daily_retraining/.
"""

import argparse
import csv
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
USER_BEHAVIOR = ROOT.parent / "shared" / "data" / "taobao-userbehavior" / "UserBehavior.csv"
KINDS = {"pv": "view", "fav": "like", "cart": "basket", "buy": "order"}


def write_days(folder):
    """[day file] of the sample as one event log per day of China's time (UTC+8, the log's own), in time
    order (days with few rows dropped); the times written are UTC's."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(USER_BEHAVIOR) as f:
        rows = [line.strip().split(",") for line in f if line.count(",") == 4]  # (the sample's last line is cut)
    by_day = {}
    for user, item, category, kind, seconds in rows:
        moment = datetime.datetime.fromtimestamp(int(seconds), datetime.timezone.utc)
        by_day.setdefault((moment + datetime.timedelta(hours=8)).date(), []).append((moment, user, item, category, KINDS[kind]))
    days = [day for day in sorted(by_day) if len(by_day[day]) >= 1000]
    files = []
    for day in days:
        path = folder / f"{day.isoformat()}.csv"
        if not path.exists():
            with open(path, "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["kind", "ts", "who", "what", "cat"])
                for moment, user, item, category, kind in sorted(by_day[day]):
                    writer.writerow([kind, moment.strftime("%Y-%m-%d %H:%M:%S"), user, item, category])
        files.append(path)
    return files


def zoo(*argv, out=None):
    """Runs `python -m zoo ...`; (seconds, stdout). A failure stops the benchmark with its stderr."""
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "zoo", *map(str, argv)], capture_output=True, text=True, cwd=ROOT)
    if result.returncode:
        sys.exit(f"python -m zoo {' '.join(map(str, argv))} failed:\n{result.stderr[-3000:]}")
    return time.perf_counter() - start, result.stdout


def concatenated(files, path):
    """One CSV of `files` (one header)."""
    if not path.exists():
        with open(path, "w") as out:
            for index, file in enumerate(files):
                with open(file) as f:
                    lines = f.readlines()
                out.writelines(lines if index == 0 else lines[1:])
    return path


def unknown_share(preset, day, earlier):
    """The share of `day`'s rows whose item the preset's vocabulary lacks."""
    with open(Path(preset) / "preprocessing.json") as f:
        known = set(json.load(f)["fitted"]["what"]["tokens"])
    with open(day) as f:
        items = [row["what"] for row in csv.DictReader(f)]
    return sum(item not in known for item in items) / len(items)


def table_growth(preset):
    """"12,000 (2,731)": the item table's tokens after a fit from yesterday and how many it evicted (lineage)."""
    with open(Path(preset) / "metadata.json") as f:
        grown = json.load(f)["lineage"]["vocabularies"]["what"]
    return f"{grown['after']:,} ({grown['evicted']:,})"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=4, help="the last training day (scoring the next)")
    parser.add_argument("--model", default="din")
    parser.add_argument("--work", default=str(ROOT / "runs" / "daily_retraining"))
    parser.add_argument("--table", default=str(ROOT / "benchmarks" / "reproduced" / "daily_retraining"))
    parser.add_argument("--item-min-count", type=int, default=None,
                        help="set the drafted spec's item column's min_count (the draft's own when left out)")
    parser.add_argument("--seed", type=int, default=0, help="every fit's seed (default 0)")
    parser.add_argument("--item-max-size", type=int, default=None,
                        help="cap the item column's table (max_size): fits from yesterday evict the least recently "
                             "seen items at the cap")
    args = parser.parse_args(argv)
    if not USER_BEHAVIOR.exists():
        sys.exit(f"{USER_BEHAVIOR}: the Taobao UserBehavior sample is not here")
    work = Path(args.work)
    days = write_days(work / "days")
    if args.days + 1 > len(days):
        sys.exit(f"--days {args.days}: the sample has {len(days)} days")
    spec = work / "spec.json"
    if not spec.exists():
        zoo("spec", "draft", days[0], "--label", "kind", "--positive", "order,basket", "--time", "ts", "--user", "who",
            "--item", "what", "--out", spec)
        drafted = json.loads(spec.read_text())
        if args.item_min_count is not None:  # (an item seen once is noise to a model that retrains every day?)
            drafted["columns"]["what"]["min_count"] = args.item_min_count
        if args.item_max_size is not None:  # (a table bounded over the days: the least recently seen evicted)
            drafted["columns"]["what"]["max_size"] = args.item_max_size
        spec.write_text(json.dumps(drafted, indent=1))
    cells = work / "cells.json"
    done = json.loads(cells.read_text()) if cells.exists() else {}

    def cell(name, run):
        if name not in done:
            done[name] = run()
            cells.write_text(json.dumps(done, indent=1))
        return done[name]

    def fit(out, *flags):
        return cell(f"fit {out}", lambda: {"seconds": zoo("fit", args.model, *flags, "--seed", args.seed,
                                                           "--out", work / out)[0]})

    def auc(preset, day, earlier):
        def run():
            history = concatenated(earlier, work / f"history-{len(earlier)}.csv")
            _, out = zoo("evaluate", preset, "--data", day, "--history-from", history)
            return {"auc": json.loads(out)["auc"], "unknown_items": unknown_share(preset, day, earlier)}
        return cell(f"auc {preset} {day.name}", run)

    fit("day1", "--data", days[0], "--spec", spec)
    capped = args.item_max_size is not None  # (a column more: the item table of the fit from yesterday)
    lines = ["| trained through | scored | frozen (day 1) | from yesterday | the same, no --history-from | full retrain | "
             "unknown items: frozen / from yesterday / full | fit s: from yesterday / full |"
             + (" items in the table from yesterday (evicted) |" if capped else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|" if capped else "")]
    previous = {"from": work / "day1" / "preset", "alone": work / "day1" / "preset"}
    for d in range(2, args.days + 1):
        scored, earlier = days[d], days[:d]
        history = concatenated(days[:d - 1], work / f"history-{d - 1}.csv")
        step = fit(f"from-history-{d}", "--from", previous["from"], "--data", days[d - 1], "--history-from", history)
        fit(f"from-{d}", "--from", previous["alone"], "--data", days[d - 1])
        full = fit(f"full-{d}", "--data", concatenated(earlier, work / f"through-{d}.csv"), "--spec", spec)
        previous = {"from": work / f"from-history-{d}" / "preset", "alone": work / f"from-{d}" / "preset"}
        results = {name: auc(work / folder / "preset", scored, earlier)
                   for name, folder in (("frozen", "day1"), ("from", f"from-history-{d}"), ("alone", f"from-{d}"),
                                        ("full", f"full-{d}"))}
        lines.append(f"| {days[d - 1].stem} | {scored.stem} | {results['frozen']['auc']:.4f} | "
                     f"{results['from']['auc']:.4f} | {results['alone']['auc']:.4f} | {results['full']['auc']:.4f} | "
                     f"{results['frozen']['unknown_items']:.1%} / {results['from']['unknown_items']:.1%} / "
                     f"{results['full']['unknown_items']:.1%} | {step['seconds']:.0f} / {full['seconds']:.0f} |"
                     + (f" {table_growth(work / f'from-history-{d}' / 'preset')} |" if capped else ""))
        print(lines[-1], flush=True)
    table = Path(args.table)
    table.mkdir(parents=True, exist_ok=True)
    variant = "".join(f" --{flag} {value}" for flag, value in (("item-min-count", args.item_min_count),
                                                                  ("item-max-size", args.item_max_size),
                                                                  ("seed", args.seed or None))
                      if value is not None)
    (table / "README.md").write_text(f"# Daily retraining ({args.model}, `python benchmarks/daily_retraining.py "
                                     f"--days {args.days}{variant}`)\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
