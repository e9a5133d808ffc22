"""Report figures (matplotlib, written as PNG files; nothing is shown on screen)."""

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def training_curves(history, path):
    """Every metric of a Keras History per epoch, training and validation side by side."""
    plt = _pyplot()
    names = sorted({k.removeprefix("val_") for k in history})
    figure, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3), squeeze=False)
    for axis, name in zip(axes[0], names):
        for key, label in ((name, "train"), (f"val_{name}", "validation")):
            if key in history:
                axis.plot(np.arange(1, len(history[key]) + 1), history[key], marker="o", label=label)
        axis.set_title(name)
        axis.set_xlabel("epoch")
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def alpha_heatmap(alpha, path):
    """DeRes Figure 3(a/b): the block weights alpha[l, b] of each layer l over blocks b."""
    plt = _pyplot()
    alpha = np.asarray(alpha)
    figure, axis = plt.subplots(figsize=(1 + 0.6 * alpha.shape[1], 1 + 0.5 * alpha.shape[0]))
    image = axis.imshow(alpha, cmap="viridis", aspect="auto")
    axis.set_xlabel("block b")
    axis.set_ylabel("layer l")
    axis.set_title("alpha[l, b]")
    figure.colorbar(image)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def gate_per_layer(gamma_mean, path):
    """DeRes Figure 3(c): the mean gate gamma_l per layer."""
    plt = _pyplot()
    gamma_mean = np.asarray(gamma_mean)
    figure, axis = plt.subplots(figsize=(5, 3))
    axis.plot(np.arange(1, len(gamma_mean) + 1), gamma_mean, marker="o")
    axis.set_xlabel("layer l")
    axis.set_ylabel("mean gamma_l")
    axis.set_ylim(0, 1)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def scaling_law(fit, path):
    """Measured (compute, AUC) points and the fitted law."""
    from zoo.recipes.scaling import predict

    plt = _pyplot()
    c = np.asarray(fit["points"]["compute"])
    grid = np.geomspace(c.min(), c.max() * 4, 100)
    figure, axis = plt.subplots(figsize=(5, 3))
    axis.scatter(c, fit["points"]["auc"], label="measured")
    axis.plot(grid, predict(fit, grid), label=f"{fit['law']} law, R² = {fit['r2']:.3f}")
    axis.set_xscale("log")
    axis.set_xlabel("compute")
    axis.set_ylabel("AUC")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
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
    axis.set_xlim(max(0.5, float(np.nanmin(low if np.isfinite(low).any() else means)) - 0.01), float(means.max()) + 0.01)
    axis.set_xlabel("test AUC (mean, 95% CI over seeds)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
