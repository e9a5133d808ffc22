"""`serving_default` for every registered model: the Schema's inputs (dynamic batch) -> `pctr` [B, M]."""


def input_signature(schema, num_candidates=None):
    """One tf.TensorSpec per Schema key, named after the key, batch dimension dynamic, ids int32, times int64."""
    import tensorflow as tf

    return {
        key: tf.TensorSpec((None,) + tuple(shape), dtype, name=key)
        for key, (shape, dtype) in schema.input_spec(num_candidates).items()
    }


def endpoints(model, options):
    """{signature name: (function, input signature)} for the plain export."""
    if options:
        raise_unused(options, "serving_default")

    def serve(features):
        return {"pctr": model(features, training=False)}

    return {"serving_default": (serve, input_signature(model.schema))}


def raise_unused(options, signature):
    from zoo.errors import ZooError

    raise ZooError(f"signature '{signature}' takes no option(s) {', '.join(sorted(options))}")
