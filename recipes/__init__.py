"""zoo.recipes: the papers' training protocols, metrics, reports, scaling-law fits and tuning."""

from zoo.recipes.baselines import baseline_scores
from zoo.recipes.calibration import calibrate, fit_calibration
from zoo.recipes.compare import Comparison, compare
from zoo.recipes.data_source import DataSource
from zoo.recipes.distillation import OnlineDistillation
from zoo.recipes.distributed import make_distribution
from zoo.recipes.data_check import check_dataset, check_schema
from zoo.recipes.evaluate import StepLog, evaluate
from zoo.recipes.fit import compile_for, data_options, fit, model_overrides
from zoo.recipes.metrics import (auc, bootstrap_aucs, calibration, default_metrics, gauc, logloss, paired_bootstrap,
                                 rela_impr)
from zoo.recipes.protocols import RECIPES, get_recipe
from zoo.recipes.raw_rows import calibrate_file, calibrate_preset
from zoo.recipes.recipe import Recipe
from zoo.recipes.scaling import fit_scaling_law
from zoo.recipes.sparse_table_adam import SparseTableAdam
from zoo.recipes.thread_tuner import ThreadTuner
from zoo.recipes.train import train

_TUNING = ("tune", "save_best", "ZooHyperModel")


def __getattr__(name):
    # KerasTuner (and the TensorFlow it imports) loads only when tuning is used.
    if name in _TUNING:
        from zoo.recipes import tuning

        return getattr(tuning, name)
    raise AttributeError(f"module 'zoo.recipes' has no attribute '{name}'")
