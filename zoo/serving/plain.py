"""`serving_default` for every registered model: the Schema's inputs (dynamic batch) -> `pctr` [B, M],
`repaired_ids` [B], `repaired_numerics` [B] (the request guard, zoo/serving/guard.py). A request whose
shapes are not the declared ones (a history of another length than L, another M, mismatched batch
sizes) is refused with one line naming the key (zoo/serving/shapes.py)."""

from zoo.datasets.pipeline import tensor_specs
from zoo.serving import guard, shapes


def endpoints(model, options):
    """{signature name: (function, input signature)} for the plain export."""
    if options:
        raise_unused(options, "serving_default")

    def serve(features):
        features, repaired = guard.repair(model.schema, features)
        return {"pctr": model(features, training=False), **repaired}

    specs = tensor_specs(model.schema)
    return {"serving_default": (shapes.checked(serve, specs), specs)}


def raise_unused(options, signature):
    from zoo.errors import ZooError

    raise ZooError(f"signature '{signature}' takes no option(s) {', '.join(sorted(options))}")
