"""The zoo's command line: `python -m zoo list | demo`.

Every command answers `--help`. A bad argument exits with status 2 and one line on stderr.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _list(args):
    import zoo

    rows = zoo.list_models()
    width = max(len(row["name"]) for row in rows)
    for row in rows:
        parameters = f"{row['parameters']:,}" if row["parameters"] else "-"
        print(f"{row['name']:<{width}}  {parameters:>10} params  {row['description']}")
        print(f"{'':<{width}}  {'':>10}         {row['paper']}")


def _demo(args):
    """Simulate data, train a small DIN, report AUC/LogLoss, save and reload a preset, score a request."""
    import keras
    import numpy as np

    import zoo
    from zoo.datasets import BehaviourSimulator

    keras.utils.set_random_seed(args.seed)
    print(f"[1/5] simulating behaviours (backend: {keras.backend.backend()})")
    simulator = BehaviourSimulator(seed=args.seed)
    train = simulator.dataset(args.rows, batch_size=256, seed=args.seed + 1)
    test = simulator.dataset(args.rows // 5, batch_size=1024, seed=args.seed + 2, shuffle=False)

    print(f"[2/5] training din on {args.rows:,} rows for {args.epochs} epochs")
    model = zoo.get("din", schema=simulator.schema, attention_units=(32, 16), mlp_units=(64, 32))
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3), loss="binary_crossentropy", metrics=zoo.recipes.default_metrics()
    )
    model.fit(train, epochs=args.epochs, verbose=1)

    print("[3/5] evaluating on held-out rows")
    metrics = model.evaluate(test, return_dict=True, verbose=0)
    print(f"      AUC {metrics['auc']:.4f}   LogLoss {metrics['logloss']:.4f}")

    preset = os.path.join(args.out, "din")
    print(f"[4/5] saving the preset to {preset} and reloading it")
    model.save_to_preset(preset, metadata={"metrics": {"test_auc": metrics["auc"], "test_logloss": metrics["logloss"]}})
    restored = zoo.load(preset)

    print("[5/5] scoring a request: one user, five candidates")
    features, _ = simulator.sample(1, seed=args.seed + 3)
    request = {k: np.repeat(v, 5, axis=0) for k, v in features.items()}
    recent = features["hist_category"][0][features["hist_category"][0] > 0][-3:]
    categories = np.array([recent[-1], recent[0], 1, 2, 3], "int32")
    request["cand_category"] = categories[:, None]
    request["cand_item_id"] = np.array(
        [simulator.items_by_category[c][0] for c in categories], "int32"
    )[:, None]
    scores = restored.score(request)
    same = np.abs(scores - model.predict(request, verbose=0)).max()
    print(f"      the user's last categories: {recent.tolist()}")
    for item, category, pctr in zip(request["cand_item_id"][:, 0], categories, scores[:, 0]):
        print(f"      candidate item {item:5d} (category {category:3d}): pctr {pctr:.4f}")
    print(f"      reloaded preset agrees with the trained model within {same:.1e}")


def _parser():
    parser = argparse.ArgumentParser(prog="python -m zoo", description="keras-ctr-zoo command line")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list the registered models").set_defaults(run=_list)
    demo = commands.add_parser("demo", help=_demo.__doc__)
    demo.add_argument("--rows", type=int, default=30_000, help="training rows to simulate (default 30000)")
    demo.add_argument("--epochs", type=int, default=2, help="training epochs (default 2)")
    demo.add_argument("--out", default="demo_out", help="where to write the preset (default demo_out/)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.set_defaults(run=_demo)
    return parser


def main(argv=None):
    from zoo.errors import ZooError

    args = _parser().parse_args(argv)
    try:
        args.run(args)
    except ZooError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
