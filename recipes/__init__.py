"""zoo.recipes: training protocols, losses and metrics."""

from zoo.recipes.metrics import default_metrics
