"""The main job (`python -m zoo demo`, `./scripts/demo.sh`): simulate behaviours, train a model, save
and reload its preset, score a request."""

import os

import keras
import numpy as np

import zoo
from zoo.datasets import BehaviourSimulator


def run(rows=30_000, epochs=3, out="demo_out", seed=0):
    """Simulate data, train a small DIN, report AUC/LogLoss, save and reload a preset, score a request."""
    keras.utils.set_random_seed(seed)
    print(f"[1/5] simulating behaviours (backend: {keras.backend.backend()})")
    simulator = BehaviourSimulator(seed=seed)
    train = simulator.dataset(rows, batch_size=256, seed=seed + 1)
    test = simulator.dataset(rows // 5, batch_size=1024, seed=seed + 2, shuffle=False)

    print(f"[2/5] training din on {rows:,} rows for {epochs} epochs")
    model = zoo.get("din", schema=simulator.schema, attention_units=(32, 16), mlp_units=(64, 32))
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3), loss="binary_crossentropy", metrics=zoo.recipes.default_metrics()
    )
    model.fit(train, epochs=epochs, verbose=1)

    print("[3/5] evaluating on held-out rows")
    metrics = model.evaluate(test, return_dict=True, verbose=0)
    print(f"      AUC {metrics['auc']:.4f}   LogLoss {metrics['logloss']:.4f}")

    preset = os.path.join(out, "din")
    print(f"[4/5] saving the preset to {preset} and reloading it")
    model.save_to_preset(preset, metadata={"metrics": {"test_auc": metrics["auc"], "test_logloss": metrics["logloss"]}})
    restored = zoo.load(preset)

    print("[5/5] scoring a request: one user, five candidates")
    features, _ = simulator.sample(1, seed=seed + 3)
    request = {k: np.repeat(v, 5, axis=0) for k, v in features.items()}
    history = features["hist_category"][0][features["hist_category"][0] > 0]
    recent = list(dict.fromkeys(history[::-1].tolist()))  # distinct categories, most recent first
    unseen = [c for c in range(1, simulator.num_categories + 1) if c not in recent]
    categories = np.array((recent[:2] + unseen)[:5], "int32")
    request["cand_category"] = categories[:, None]
    request["cand_item_id"] = np.array(
        [simulator.items_by_category[c][0] for c in categories], "int32"
    )[:, None]
    scores = restored.score(request)
    same = np.abs(scores - model.predict(request, verbose=0)).max()
    print(f"      the user's recent categories, newest first: {recent[:5]}")
    for item, category, pctr in zip(request["cand_item_id"][:, 0], categories, scores[:, 0]):
        print(f"      candidate item {item:5d} (category {category:3d}): pctr {pctr:.4f}")
    print(f"      reloaded preset agrees with the trained model within {same:.1e}")
