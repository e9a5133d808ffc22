"""`serving_default` for every registered model: the Schema's inputs (dynamic batch) -> `pctr` [B, M],
`repaired_ids` [B], `repaired_numerics` [B] (the request guard, zoo/serving/guard.py)."""

from zoo.datasets.pipeline import tensor_specs
from zoo.serving import guard


def endpoints(model, options):
    """{signature name: (function, input signature)} for the plain export."""
    if options:
        raise_unused(options, "serving_default")

    def serve(features):
        features, repaired = guard.repair(model.schema, features)
        return {"pctr": model(features, training=False), **repaired}

    return {"serving_default": (serve, tensor_specs(model.schema))}


def raise_unused(options, signature):
    from zoo.errors import ZooError

    raise ZooError(f"signature '{signature}' takes no option(s) {', '.join(sorted(options))}")
