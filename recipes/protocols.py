"""The papers' training protocols as `Recipe`s: `get_recipe("deres", epochs=3)`."""

import dataclasses

from zoo.errors import ZooError
from zoo.recipes.recipe import Recipe

RECIPES = {
    "suan": Recipe(
        name="suan",
        learning_rate=1e-3,
        batch_size=256,
        epochs=1,
        notes="SUAN §4.1.4: Adam, binary cross-entropy, one epoch (industrial single-pass training).",
    ),
    "distill": Recipe(
        name="distill",
        learning_rate=1e-3,
        batch_size=256,
        epochs=1,
        notes="SUAN §3.3.2 / eq 17: SUAN teacher and LightSUAN student trained together online; "
        "temperature t and weight λ are the distillation model's hyperparameters (λ = t = 2).",
    ),
    "rest": Recipe(
        name="rest",
        learning_rate=1e-3,
        weight_decay=1e-4,
        batch_size=4096,
        epochs=20,
        early_stopping_patience=2,
        notes="ReST public-data protocol: Adam, lr and weight decay searched in {1e-4, 5e-4, 1e-3} "
        "(defaults here: 1e-3, 1e-4); batch 4096; at most 20 epochs; early stopping on validation AUC.",
    ),
    "deres": Recipe(
        name="deres",
        learning_rate=1e-3,
        beta_1=0.9,
        beta_2=0.999,
        batch_size=4096,
        epochs=20,
        warmup_fraction=0.05,
        cosine=True,
        clipnorm=1.0,
        early_stopping_patience=3,
        seeds=(0, 1, 2),
        model_overrides={"dropout": 0.1},
        notes="DeRes §4: Adam lr 1e-3, betas 0.9/0.999, 5% linear warm-up then cosine decay, "
        "gradient clipping at norm 1.0, dropout 0.1, early stopping on validation AUC (patience 3), "
        "several seeds.",
    ),
}


def get_recipe(recipe, **overrides):
    """A Recipe by name (or the Recipe itself), with fields overridden; unknown names/fields fail in one line."""
    if isinstance(recipe, Recipe):
        base = recipe
    elif recipe in RECIPES:
        base = RECIPES[recipe]
    else:
        raise ZooError(f"unknown recipe '{recipe}' (recipes: {', '.join(sorted(RECIPES))})")
    fields = {f.name for f in dataclasses.fields(Recipe)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ZooError(f"recipe has no field {', '.join(unknown)} (fields: {', '.join(sorted(fields))})")
    return dataclasses.replace(base, **overrides)
