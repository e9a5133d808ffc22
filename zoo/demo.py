"""The main job (`./scripts/demo.sh`, `python -m zoo demo`): what the zoo is for, end to end on the
embedded behaviour simulator, each step printing what it proves.

  1 data     simulated behaviour rows in the input contract (train / validation / test, by seed)
  2 train    LightSUAN (sparse attention: window k, dilation r; one UAB) by the `distill` recipe: trained
             online with a 2-UAB SUAN teacher (SUAN §3.3.2, eq 17); held-out AUC / LogLoss of both
  3 score    requests of m1 candidates each: one target-aware pass per candidate (each scored alone) vs
             ceil(m1 / m2) parallel passes that encode the history once (the history cache, §3.3.1):
             candidates per second and their agreement
  4 tune     a small KerasTuner search: each trial fine-tunes the student (warm start) with another
             window k and dilation r; a line per trial, the table, the best trial
  5 preset   the distilled student saved as a preset and reloaded (equal predictions)
  6 serve    a SavedModel with the parallel-candidate signatures (`serving_default` and `score_all`,
             any m1 in passes of m2), called from a TensorFlow-only process (keras and zoo blocked): its
             signatures and its agreement with Keras

It runs under any backend (the export is traced under TensorFlow, in a subprocess when needed);
scripts/demo.sh runs it under TensorFlow. `run(...)` takes the sizes, so a test runs it small.
"""

import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import keras
import numpy as np

import zoo
from zoo.datasets import BehaviourSimulator
from zoo.errors import ZooError
from zoo.recipes.metrics import auc, logloss

# The demo's LightSUAN (the `distilsuan` preset's size) and its SUAN teacher.
STUDENT = {"num_layers": 1, "num_heads": 2, "mlp_units": (64, 32), "window_size": 8, "dilation": 2,
           "parallel_candidates": 16}
TEACHER = {"num_layers": 2, "num_heads": 2, "mlp_units": (64, 32)}
# The recipe's fields the demo changes for its small data: more, smaller steps at a higher rate (the
# distill recipe's 1e-3 and batch 256 are the paper's, for billions of rows).
BATCH, LEARNING_RATE = 128, 3e-3


def _jit_compile():
    """JAX compiles each step (its own way to run); TensorFlow runs its graphs without XLA, whose
    compile time a few minutes of CPU training do not repay; torch runs eagerly."""
    return "auto" if keras.backend.backend() == "jax" else False

# Runs in a fresh interpreter that cannot import keras or zoo: the SavedModel needs TensorFlow alone.
_CLIENT = """
import json, sys, time
sys.modules["keras"] = None
sys.modules["zoo"] = None
import numpy as np
import tensorflow as tf

export_dir, request_path, scores_path = sys.argv[1:]
loaded = tf.saved_model.load(export_dir)
signatures = {}
for name, function in loaded.signatures.items():
    specs = function.structured_input_signature[1]
    signatures[name] = {
        "inputs": {k: [s.dtype.name, [-1 if d is None else d for d in s.shape.as_list()]] for k, s in specs.items()},
        "outputs": sorted(function.structured_outputs),
    }
score_all = loaded.signatures["score_all"]
specs = score_all.structured_input_signature[1]
request = {k: tf.constant(v, dtype=specs[k].dtype) for k, v in np.load(request_path).items()}
score_all(**request)  # the first call runs the graph's one-time set-up
start = time.perf_counter()
pctr = score_all(**request)["pctr"].numpy()
seconds = time.perf_counter() - start
np.save(scores_path, pctr)
print(json.dumps({"signatures": signatures, "seconds": seconds}))
"""


def _say(step, text):
    print(f"[{step}/6] {text}", flush=True)


def _detail(text):
    print(f"      {text}", flush=True)


def _request(simulator, features, users, m1, seed):
    """`users` rows of `features` (the longest histories), each with m1 random candidates shown at the
    row's time."""
    rows = np.argsort(-(features["hist_item_id"] > 0).sum(1), kind="stable")[:users]
    request = {k: v[rows] for k, v in features.items()}
    rng = np.random.default_rng(seed)
    items = rng.integers(1, simulator.num_items + 1, (users, m1))
    request["cand_item_id"] = items.astype("int32")
    request["cand_category"] = simulator.item_category[items].astype("int32")
    request["cand_time"] = np.repeat(request["cand_time"][:, :1], m1, axis=1)
    return request


def _best_seconds(function, repeats):
    function()  # compiles the scorer
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def _next_version(base):
    """TF Serving's next version folder under `base` (1 when there is none)."""
    versions = [int(p.name) for p in base.glob("*") if p.name.isdigit()] if base.is_dir() else []
    return base / str(max(versions, default=0) + 1)


def _serve(export_dir, request):
    """Runs `_CLIENT` on the export in a TensorFlow-only interpreter: (its report, score_all's pctr)."""
    with tempfile.TemporaryDirectory() as scratch:
        request_path, scores_path = Path(scratch) / "request.npz", Path(scratch) / "pctr.npy"
        np.savez(request_path, **request)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KERAS_BACKEND")}
        env.update(TF_CPP_MIN_LOG_LEVEL="3")
        result = subprocess.run(
            [sys.executable, "-c", _CLIENT, str(Path(export_dir).resolve()), str(request_path), str(scores_path)],
            capture_output=True, text=True, env=env, cwd=scratch,
        )
        if result.returncode != 0:
            lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
            raise ZooError(f"the TensorFlow-only client failed: {lines[-1] if lines else 'no output'}")
        return json.loads(result.stdout.strip().splitlines()[-1]), np.load(scores_path)


def run(rows=20_000, epochs=5, out="demo_out", seed=0, candidates=512, requests=8, tuning_rows=4_000,
        trials=3, simulator_options=None):
    """The demo (see the module docstring). `rows` training rows (a fifth as many validation and test
    rows), `epochs` of the distill recipe, `requests` requests of `candidates` candidates each,
    `trials` KerasTuner trials on `tuning_rows` rows; files go to `out` (the preset, the tuning
    project, a new export version). Returns what it printed, as numbers."""
    logging.getLogger("tensorflow").setLevel(logging.ERROR)  # tf.function retracing notes in the tuner
    start = time.perf_counter()
    out = Path(out)
    keras.utils.set_random_seed(seed)
    results = {}

    _say(1, f"simulating behaviours (backend {keras.backend.backend()})")
    simulator = BehaviourSimulator(seed=seed, **(simulator_options or {}))
    schema = simulator.schema
    train = simulator.dataset(rows, batch_size=256, seed=seed + 1)
    held_out = max(rows // 5, 64)
    val = simulator.dataset(held_out, batch_size=1024, seed=seed + 2, shuffle=False)
    test_features, test_labels = simulator.sample(held_out, seed=seed + 3)
    _detail(f"{rows:,} training rows, {held_out:,} validation and {held_out:,} test rows; "
            f"L = {schema.sequence_length} behaviours, {len(schema.features)} features")

    _say(2, f"distilling SUAN into LightSUAN online (distill recipe, eq 17, t = λ = 2): {epochs} epochs, "
            f"batch {BATCH}, learning rate {LEARNING_RATE}")
    student = zoo.get("lightsuan", schema=schema, **STUDENT)
    options = {"teacher": "suan", "teacher_hyperparameters": TEACHER, "temperature": 2.0, "distillation_weight": None}
    history = zoo.recipes.fit(student, train, val, recipe="distill", epochs=epochs, learning_rate=LEARNING_RATE,
                              batch_size=BATCH, trainer_options=options, jit_compile=_jit_compile(), verbose=2)
    teacher = history.trainer.teacher
    scores = {"LightSUAN (student)": student.predict(test_features, batch_size=1024, verbose=0),
              "SUAN (teacher)": teacher.predict(test_features, batch_size=1024, verbose=0)}
    shapes = {"LightSUAN (student)": f"{STUDENT['num_layers']} UAB, k = {STUDENT['window_size']}, "
                                     f"r = {STUDENT['dilation']}, {student.count_params():,} parameters",
              "SUAN (teacher)": f"{TEACHER['num_layers']} UABs, full attention, {teacher.count_params():,} parameters"}
    for name, score in scores.items():
        results[name] = {"auc": auc(test_labels, score), "logloss": logloss(test_labels, score)}
        _detail(f"{name:20s} test AUC {results[name]['auc']:.4f}  LogLoss {results[name]['logloss']:.4f}  "
                f"({shapes[name]})")

    m2 = student.parallel_candidates
    _say(3, f"scoring {requests} requests x {candidates} candidates: a pass per candidate, or "
            f"{math.ceil(candidates / m2)} passes of m2 = {m2} with the history cache")
    request = _request(simulator, test_features, requests, candidates, seed + 4)
    total = requests * candidates
    alone = _best_seconds(lambda: student.score_candidates(request, parallel_candidates=1, use_cache=False), 2)
    parallel_scores = student.score_candidates(request)
    parallel = _best_seconds(lambda: student.score_candidates(request), 2)
    separate = student.score_candidates(request, parallel_candidates=1, use_cache=False)
    results["scoring"] = {"alone_per_s": total / alone, "parallel_per_s": total / parallel,
                          "max_difference": float(np.abs(parallel_scores - separate).max())}
    _detail(f"each candidate alone:  {total / alone:10,.0f} candidates/s")
    _detail(f"parallel + cache:      {total / parallel:10,.0f} candidates/s   ({alone / parallel:.1f}x; "
            f"the same scores within {results['scoring']['max_difference']:.1e})")
    recent = [int(c) for c in request["hist_category"][0][::-1] if c > 0]
    top = np.argsort(-parallel_scores[0])[:5]
    _detail(f"request 1: recent categories {list(dict.fromkeys(recent))[:4]}, "
            f"its top 5 candidates' {[int(request['cand_category'][0, i]) for i in top]}")

    _say(4, f"KerasTuner: {trials} trials fine-tune the student with other sparse patterns (k, r), "
            f"one epoch of {tuning_rows:,} rows each")
    fixed = {k: v for k, v in STUDENT.items() if k not in ("window_size", "dilation")}
    tuner = zoo.recipes.tune(
        "lightsuan", simulator.dataset(tuning_rows, batch_size=64, seed=seed + 5),
        simulator.dataset(max(tuning_rows // 4, 64), batch_size=1024, seed=seed + 6, shuffle=False),
        schema=schema, search=["k", "r"], max_trials=trials, directory=out / "tuning", overwrite=True,
        warm_start=student, seed=seed, jit_compile=_jit_compile(), **fixed,
    )
    best = tuner.oracle.get_best_trials(1)[0]
    results["tuning"] = {"best": dict(best.hyperparameters.values), "val_auc": best.score}
    values = ", ".join(f"{k} = {v}" for k, v in best.hyperparameters.values.items())
    _detail(f"best trial: {values} (val_auc {best.score:.4f})")

    preset = out / "lightsuan"
    _say(5, f"saving the student as a preset in {preset} and reloading it")
    metrics = {"test_auc": results["LightSUAN (student)"]["auc"],
               "test_logloss": results["LightSUAN (student)"]["logloss"]}
    student.save_to_preset(preset, metadata={"training_data": "simulator", "recipe": "distill", "metrics": metrics})
    restored = zoo.load(preset)
    same = float(np.abs(restored.predict(test_features, batch_size=1024, verbose=0)
                        - scores["LightSUAN (student)"]).max())
    results["preset_difference"] = same
    _detail(f"the reloaded preset predicts the same pCTR within {same:.1e}")

    export_dir = _next_version(out / "export" / "lightsuan")
    _say(6, f"exporting a SavedModel (parallel_candidates, m2 = {m2}) to {export_dir}; "
            "calling it from a TensorFlow-only process")
    zoo.export(preset, export_dir, signature="parallel_candidates", m2=m2)
    report, served = _serve(export_dir, request)
    for name, signature in sorted(report["signatures"].items()):
        shape = signature["inputs"]["cand_item_id"][1]
        _detail(f"signature {name}: {len(signature['inputs'])} inputs, cand_* {shape} -> "
                f"{', '.join(signature['outputs'])}")
    difference = float(np.abs(served - parallel_scores).max())
    results["serving"] = {"signatures": sorted(report["signatures"]), "max_difference": difference}
    _detail(f"score_all on the {total:,} candidates: {total / report['seconds']:,.0f} candidates/s, "
            f"max |SavedModel - Keras| = {difference:.1e}")
    results["seconds"] = time.perf_counter() - start
    print(f"done in {results['seconds']:.0f} s; the preset and the export are in {out}/", flush=True)
    return results
