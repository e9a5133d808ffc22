"""Report figures (matplotlib, written as PNG files; nothing is shown on screen)."""

import os

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_LABELS = {"loss": "loss (the training objective)", "logloss": "LogLoss", "auc": "AUC"}


def _save(figure, path, dpi):
    """figure.savefig written whole (zoo.outputs.new_file: a temporary file renamed into place; a failure
    leaves no partial image and names `path`), in the format of the path's suffix."""
    from zoo.outputs import new_file

    with new_file(path, binary=True) as stream:
        figure.savefig(stream, dpi=dpi, format=os.path.splitext(str(path))[1][1:].lower() or "png")


def _merge_identical_loss(history):
    """Drops `logloss` when it repeats `loss` (a plain binary cross-entropy run): one panel, not two."""
    pairs = [("loss", "logloss"), ("val_loss", "val_logloss")]
    if all((a in history) == (b in history) for a, b in pairs) and "logloss" in history and all(
        np.allclose(history[a], history[b], rtol=1e-5, atol=1e-7) for a, b in pairs if a in history
    ):
        return {k: v for k, v in history.items() if k not in ("logloss", "val_logloss")}, "loss = LogLoss"
    return history, None


def training_curves(history, path, step_history=None):
    """Every metric of a Keras History, training and validation, one panel per metric.

    Without `step_history` the x axis is the epoch (a one-epoch run shows one labelled point per
    curve). With it (`StepLog.history`: the running means Keras reports within each epoch, and the
    step at each epoch's end) the x axis is the training step: training as a line, validation as
    points at the epochs' ends. `loss` and `logloss` share a panel when they are equal.
    """
    from matplotlib.ticker import MaxNLocator

    plt = _pyplot()
    history, merged = _merge_identical_loss({k: list(v) for k, v in history.items()})
    epochs = max(len(v) for v in history.values())
    if step_history and len(step_history["epoch_end"]) != epochs:
        step_history = None  # e.g. a resumed run logged the steps of its last epochs only
    names = sorted({k.removeprefix("val_") for k in history})
    figure, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 3.6), squeeze=False)
    for axis, name in zip(axes[0], names):
        ends = None
        if step_history and name in step_history:
            axis.plot(step_history["step"], step_history[name], marker="." if len(step_history["step"]) < 30 else None,
                      label="training (running mean over the epoch)")
            ends = step_history["epoch_end"]
            axis.set_xlabel("training step")
        for key, label in ((name, "training"), (f"val_{name}", "validation")):
            if key not in history or (ends is not None and key == name):
                continue
            values = history[key]
            x = ends if ends is not None else np.arange(1, len(values) + 1)
            axis.plot(x, values, marker="o", label=label + (" (epoch end)" if ends is not None else ""))
            if len(values) == 1:
                axis.annotate(f"{values[0]:.4f}", (x[0], values[0]), textcoords="offset points", xytext=(6, 4))
        axis.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        if ends is None:
            axis.set_xlim(0.5, epochs + 0.5)
            axis.set_xlabel("epoch")
        axis.set_ylabel(merged if merged and name == "loss" else _LABELS.get(name, name))
        axis.set_title(merged if merged and name == "loss" else name)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    _save(figure, path, dpi=110)
    plt.close(figure)


def roc_curve(labels, scores, path):
    """The ROC curve (true vs false positive rate over every threshold, ties as one step) and its AUC."""
    from zoo.recipes.metrics import auc

    plt = _pyplot()
    labels, scores = np.asarray(labels, "float64").reshape(-1), np.asarray(scores, "float64").reshape(-1)
    order = np.argsort(-scores, kind="mergesort")
    labels, scores = labels[order], scores[order]
    last = np.r_[scores[1:] != scores[:-1], True]  # the last row of each group of equal scores
    tpr = np.r_[0.0, np.cumsum(labels)[last] / max(labels.sum(), 1)]
    fpr = np.r_[0.0, np.cumsum(1 - labels)[last] / max((1 - labels).sum(), 1)]
    figure, axis = plt.subplots(figsize=(4.8, 4.8))
    axis.plot(fpr, tpr, label=f"model, AUC = {auc(labels, scores):.4f}")
    axis.plot([0, 1], [0, 1], linestyle="--", color="grey", label="chance, AUC = 0.5")
    axis.set_xlabel("false positive rate")
    axis.set_ylabel("true positive rate")
    axis.set_title(f"ROC curve ({int(labels.sum()):,} positives, {int((1 - labels).sum()):,} negatives)")
    axis.set_xlim(0, 1)
    axis.set_ylim(0, 1)
    axis.set_aspect("equal")
    axis.grid(alpha=0.3)
    axis.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    _save(figure, path, dpi=110)
    plt.close(figure)


def reliability_diagram(calibration, path):
    """Predicted vs observed CTR per bin (`zoo.recipes.metrics.calibration`), the diagonal, and the ECE."""
    plt = _pyplot()
    per_bin = calibration["per_bin"]
    predicted, observed = np.asarray(per_bin["mean_pctr"]), np.asarray(per_bin["observed_ctr"])
    low = min(predicted.min(), observed.min(), calibration["mean_pctr"], calibration["observed_ctr"])
    high = max(predicted.max(), observed.max(), calibration["mean_pctr"], calibration["observed_ctr"])
    pad = 0.1 * (high - low) + 1e-3
    low, high = max(0.0, low - pad), min(1.0, high + pad)  # the bins' range: CTRs crowd a narrow band
    rows = per_bin["rows"]
    figure, axis = plt.subplots(figsize=(5.6, 6.2))
    axis.plot([low, high], [low, high], linestyle="--", color="grey", label="perfectly calibrated")
    axis.plot(predicted, observed, marker="o",
              label=f"{calibration['bins']} equal-frequency bins of pCTR ({min(rows):,}-{max(rows):,} rows each)")
    axis.axvline(calibration["mean_pctr"], color="C1", alpha=0.6, linestyle=":", label="mean predicted CTR")
    axis.axhline(calibration["observed_ctr"], color="C2", alpha=0.6, linestyle=":", label="observed CTR")
    axis.set_xlim(low, high)
    axis.set_ylim(low, high)
    axis.set_aspect("equal")
    axis.set_xlabel("predicted CTR (mean pCTR in the bin)")
    axis.set_ylabel("observed CTR (positive rate in the bin)")
    axis.set_title(
        f"calibration: ECE {calibration['ece']:.4f}\nmean pCTR {calibration['mean_pctr']:.4f} vs observed CTR "
        f"{calibration['observed_ctr']:.4f}", fontsize=10,
    )
    axis.grid(alpha=0.3)
    axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=7)
    figure.tight_layout()
    _save(figure, path, dpi=110)
    plt.close(figure)


def score_histograms(labels, scores, path, bins=40):
    """The predicted pCTR of the positive and of the negative rows, each as a share of its label's rows."""
    plt = _pyplot()
    labels, scores = np.asarray(labels).reshape(-1), np.asarray(scores, "float64").reshape(-1)
    low, high = float(scores.min()), float(scores.max())
    edges = np.linspace(low, max(high, low + 1e-6), bins + 1)  # the scores' range: CTRs crowd a narrow band
    figure, axis = plt.subplots(figsize=(6, 3.8))
    for value, name, color in ((0, "negatives", "C0"), (1, "positives", "C3")):
        chosen = scores[labels == value]
        if len(chosen):
            axis.hist(chosen, bins=edges, weights=np.full(len(chosen), 1.0 / len(chosen)), histtype="stepfilled",
                      alpha=0.35, color=color, edgecolor=color, label=f"{name} ({len(chosen):,} rows)")
    axis.set_xlabel("predicted pCTR")
    axis.set_ylabel("share of the label's rows")
    axis.set_title("predicted pCTR by label")
    axis.legend(fontsize=8)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    _save(figure, path, dpi=110)
    plt.close(figure)


def _hatch_missing(axis, missing):
    """Grey hatched cells where `missing` [rows, columns] is True (an imshow's NaN cells)."""
    from matplotlib.patches import Rectangle

    for row, column in zip(*np.nonzero(missing)):
        axis.add_patch(Rectangle((column - 0.5, row - 0.5), 1, 1, facecolor="0.9", edgecolor="0.6", hatch="//",
                                 linewidth=0))


def alpha_heatmap(alpha, path):
    """DeRes Figure 3(a/b): the mean block weight alpha[l, b] of layer l (1..L) over blocks b (B_0 is the
    embedding); hatched cells are blocks not formed yet at that layer (no weight exists there)."""
    plt = _pyplot()
    alpha = np.asarray(alpha, "float64")
    layers, blocks = alpha.shape
    figure, axis = plt.subplots(figsize=(max(6.0, 2.5 + 0.9 * blocks), max(4.0, 1.6 + 0.55 * layers)))
    image = axis.imshow(np.ma.masked_invalid(alpha), cmap="viridis", aspect="auto")
    _hatch_missing(axis, ~np.isfinite(alpha))
    if alpha.size <= 300:
        low, high = np.nanmin(alpha), np.nanmax(alpha)
        for (row, column), value in np.ndenumerate(alpha):
            if np.isfinite(value):
                dark = high > low and (value - low) / (high - low) < 0.6
                axis.text(column, row, f"{value:.2f}", ha="center", va="center", fontsize=8,
                          color="white" if dark else "black")
    axis.set_xticks(range(blocks), ["B0\n(embedding)"] + [f"B{b}" for b in range(1, blocks)])
    axis.set_yticks(range(layers), [str(l) for l in range(1, layers + 1)])
    axis.set_xlabel("block b")
    axis.set_ylabel("layer l")
    axis.set_title("mean alpha[l, b] (hatched: block not formed yet at layer l)", fontsize=10)
    figure.colorbar(image, label="mean alpha over tokens")
    figure.tight_layout()
    _save(figure, path, dpi=110)
    plt.close(figure)


def gate_per_layer(gamma_mean, path, gamma_std=None):
    """DeRes Figure 3(c): the mean gate gamma_l per layer l (1..L), +- its s.d. across channels."""
    plt = _pyplot()
    gamma_mean = np.asarray(gamma_mean, "float64")
    layers = np.arange(1, len(gamma_mean) + 1)
    figure, axis = plt.subplots(figsize=(5.5, 3.6))
    axis.plot(layers, gamma_mean, marker="o", label="mean gamma_l")
    if gamma_std is not None:
        std = np.asarray(gamma_std, "float64")
        axis.fill_between(layers, gamma_mean - std, gamma_mean + std, alpha=0.25, label="+- s.d. across channels")
    axis.set_xticks(layers)
    axis.set_xlabel("layer l")
    axis.set_ylabel("gate gamma_l (1: identity path)")
    axis.set_ylim(0, 1)
    axis.set_title("DeRes gate per layer")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    _save(figure, path, dpi=110)
    plt.close(figure)


def history_attention(stats, path):
    """SUAN/LightSUAN: the candidate's self-attention weights over one request's history, per UAB and
    head (`SUAN.introspect`); hatched: behaviours the (sparse) pattern does not attend to."""
    plt = _pyplot()
    attention = np.asarray(stats["attention"], "float64")  # [l, h, L + 1]
    layers, heads, columns = attention.shape
    length = columns - 1
    valid = np.asarray(stats["hist_valid"], bool)
    first = int(np.argmax(valid)) if valid.any() else length
    shown = np.concatenate([attention[:, :, first:length], attention[:, :, length:]], axis=2)
    grid = shown.reshape(layers * heads, -1)
    width = min(16.0, max(7.0, 2.5 + 0.12 * grid.shape[1]))
    figure, axis = plt.subplots(figsize=(width, max(2.8, 1.6 + 0.45 * grid.shape[0])))
    image = axis.imshow(np.ma.masked_invalid(grid), cmap="magma_r", aspect="auto", vmin=0)
    _hatch_missing(axis, ~np.isfinite(grid))
    offsets = list(range(first - length, 0))  # the behaviour's slot relative to the candidate (-1: newest)
    step = max(1, len(offsets) // 12)
    ticks = [t for t in range(0, len(offsets), step) if step == 1 or t < len(offsets) - 2] + [len(offsets)]
    axis.set_xticks(ticks, [str(offsets[t]) for t in ticks[:-1]] + ["candidate\nitself"])
    axis.set_yticks(range(grid.shape[0]), [f"UAB {l + 1}, head {h + 1}" for l in range(layers) for h in range(heads)])
    axis.set_xlabel(f"behaviour (position relative to the candidate; {len(offsets)} real behaviours, newest at -1)")
    skipped = "\nhatched: behaviours the sparse pattern does not attend to" if not np.isfinite(grid).all() else ""
    axis.set_title(f"{stats.get('model', 'SUAN')}: the candidate's attention over one request's history "
                   f"(batch row {stats['row']}){skipped}", fontsize=10)
    figure.colorbar(image, label="attention weight")
    figure.tight_layout()
    _save(figure, path, dpi=110)
    plt.close(figure)


_UNITS = ((365 * 86400, "year"), (91.25 * 86400, "quarter"), (7 * 86400, "week"), (86400, "day"), (3600, "hour"),
          (60, "minute"), (1, "second"))


def _granularity_name(tau):
    if tau == 0:
        return "RoPE (index)"
    for seconds, name in _UNITS:
        if tau % seconds == 0:
            count = tau / seconds
            return f"RoTE, tau = {name}" if count == 1 else f"RoTE, tau = {count:g} {name}s"
    return f"RoTE, tau = {tau} s"


def rote_positions(stats, path):
    """ReST: each encoder head's RoPE/RoTE rotation position b_i over one request's history
    (`ReST.introspect`), and how many distinct positions each head tells apart."""
    plt = _pyplot()
    positions = np.asarray(stats["positions"], "float64")  # [H, L], NaN on padding
    taus = list(stats["time_granularities"])
    valid = np.isfinite(positions[0])
    index = np.arange(int(valid.sum())) + 1
    names = [f"head {h + 1}: {_granularity_name(tau)}" for h, tau in enumerate(taus)]
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, max(3.4, 1.4 + 0.4 * len(names))),
                                         gridspec_kw={"width_ratios": [1.6, 1]})
    for h, name in enumerate(names):
        left.plot(index, positions[h][valid], marker=".", label=name)
    left.set_yscale("symlog", linthresh=1)
    left.set_xlabel("behaviour (1 = the user's first, oldest)")
    left.set_ylabel("rotation position b_i (symlog)")
    left.set_title(f"ReST RoPE/RoTE position per head (request row {stats['row']})", fontsize=10)
    left.grid(alpha=0.3)
    left.legend(fontsize=7)
    distinct = np.asarray(stats["distinct_positions"])
    right.barh(range(len(names)), distinct, height=0.6, color=[f"C{h % 10}" for h in range(len(names))])
    right.set_yticks(range(len(names)), names, fontsize=8)
    right.invert_yaxis()
    right.set_xlabel(f"distinct positions among the {int(valid.sum())} behaviours")
    right.set_title("what each head tells apart", fontsize=10)
    for h, value in enumerate(distinct):
        right.text(value, h, f" {int(value)}", va="center", fontsize=8)
    figure.tight_layout()
    _save(figure, path, dpi=110)
    plt.close(figure)


def scaling_law(fit, path):
    """Measured (compute, AUC) points and the fitted law."""
    from zoo.recipes.scaling import predict

    plt = _pyplot()
    c = np.asarray(fit["points"]["compute"])
    grid = np.geomspace(c.min(), c.max() * 4, 100)
    figure, axis = plt.subplots(figsize=(5, 3))
    axis.scatter(c, fit["points"]["auc"], label="measured")
    bounds = fit.get("at_bounds")
    caveat = f" ({', '.join(bounds)} at bound: not determined)" if bounds else ""
    axis.plot(grid, predict(fit, grid), label=f"{fit['law']} law, R² = {fit['r2']:.3f}{caveat}")
    axis.set_xscale("log")
    axis.set_xlabel("compute")
    axis.set_ylabel("AUC")
    axis.legend()
    figure.tight_layout()
    _save(figure, path, dpi=100)
    plt.close(figure)


def table_auc(rows, path):
    """A reproduced table: each row's mean test AUC with its 95 % interval over seeds."""
    plt = _pyplot()
    rows = sorted(rows, key=lambda r: r["auc_mean"])
    means = np.array([r["auc_mean"] for r in rows])
    low = np.array([r["auc_ci95"][0] for r in rows])
    errors = np.where(np.isfinite(low), means - low, 0.0)
    figure, axis = plt.subplots(figsize=(6, 1 + 0.35 * len(rows)))
    axis.barh([r["label"] for r in rows], means - 0.5, left=0.5, xerr=errors, color="#4c72b0", capsize=3)
    lowest = float(np.nanmin(low if np.isfinite(low).any() else means))
    axis.set_xlim(max(0.5, lowest - 0.01), float(means.max()) + 0.01)
    axis.set_xlabel("test AUC (mean, 95% CI over seeds)")
    figure.tight_layout()
    _save(figure, path, dpi=100)
    plt.close(figure)


def leaderboard(board, path):
    """A comparison (zoo.recipes.compare): each model's mean AUC (± s.d. over seeds) on each set of scored
    rows, beside the baselines' AUC on the same rows (dashed lines)."""
    plt = _pyplot()
    sets = list(board["baselines"])
    figure, axes = plt.subplots(1, len(sets), figsize=(5 * len(sets), 2.2 + 0.4 * len(board["models"])), squeeze=False)
    for axis, name in zip(axes[0], sets):
        models = sorted(board["models"], key=lambda m: m[name]["auc"]["mean"])
        means = np.array([m[name]["auc"]["mean"] for m in models])
        errors = np.array([m[name]["auc"]["sd"] or 0.0 for m in models])
        axis.barh([m["model"] for m in models], means - 0.5, left=0.5, xerr=errors, color="#4c72b0", capsize=3)
        values = list(means)
        for k, (base, metrics) in enumerate(sorted(board["baselines"][name].items(), key=lambda item: item[1]["auc"])):
            if metrics["auc"] > 0.5:
                axis.axvline(metrics["auc"], linestyle="--", color=f"C{k + 1}", label=f"{base} {metrics['auc']:.4f}")
                values.append(metrics["auc"])
        axis.set_xlim(max(0.5, min(values) - 0.01), max(values) + 0.01)
        axis.set_xlabel(f"{name} AUC (mean ± s.d. over seeds)")
        axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=2, frameon=False)
    figure.tight_layout()
    _save(figure, path, dpi=100)
    plt.close(figure)
