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
        seeds=(0, 1, 2),
        notes="SUAN §4.1.4: Adam, binary cross-entropy, one epoch (industrial single-pass training).",
    ),
    "distill": Recipe(
        name="distill",
        learning_rate=1e-3,
        batch_size=256,
        epochs=1,
        trainer="distillation",
        trainer_options={
            "teacher": "suan",
            "teacher_hyperparameters": {},
            "temperature": 2.0,
            "distillation_weight": None,
        },
        notes="SUAN §3.3.2 / eq 17: a high-grade SUAN teacher and the LightSUAN student trained together "
        "online in one pass; loss1 + loss2 + λ·loss3 with temperature t and λ = t = 2. The teacher is "
        "built on the student's schema with the class defaults unless teacher_hyperparameters say otherwise.",
    ),
    "rest": Recipe(
        name="rest",
        learning_rate=1e-3,
        weight_decay=1e-4,
        batch_size=4096,
        epochs=20,
        early_stopping_patience=2,
        seeds=(0, 1, 2),
        trainer="rest_auxiliary",
        trainer_options={"seq_weight": 0.1, "align_weight": 0.1},
        batching="prefix",
        group_size=8,
        grid={"learning_rate": (1e-4, 5e-4, 1e-3), "weight_decay": (1e-4, 5e-4, 1e-3)},
        notes="ReST public-data protocol (§4.1, §2.3-2.4): AdamW, lr and weight decay searched in "
        "{1e-4, 5e-4, 1e-3} on the validation split (defaults: 1e-3, 1e-4); batch 4096; at most 20 "
        "epochs; early stopping on validation AUC; L_ce + λ_seq L_seq + λ_align L_align (λ_seq = 0.1 "
        "as Figure 2; λ_align not given, 0.1); user-level shared-prefix batches of 8 samples per user "
        "(group size not given in the paper). The auxiliary losses apply to ReST models; other models "
        "in a ReST table train with the same optimiser, batches and stopping, cross-entropy only.",
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
        grid={"learning_rate": (5e-4, 1e-3, 2e-3)},
        notes="DeRes §4: Adam lr 1e-3, betas 0.9/0.999, 5% linear warm-up then cosine decay, "
        "gradient clipping at norm 1.0, dropout 0.1, early stopping on validation AUC (patience 3), "
        "several seeds; the learning rate picked on validation from a small grid.",
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
