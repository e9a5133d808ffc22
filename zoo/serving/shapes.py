"""The shape check every signature of the Schema's ids runs first: a request whose tensors do not have
the shapes the signature declares is refused with one line naming the key, never truncated, padded or
broadcast.

TF does not compare a request with the shapes a SignatureDef declares: neither a Python client calling
`loaded.signatures[name](**tensors)` nor TF Serving (gRPC `Predict`, REST `:predict`) does, so a history
of 29 or 31 behaviours reached a graph traced for L = 30 and was scored. So the id signatures
(plain.py, parallel_candidates.py, encode_decode.py) wrap their function in `checked`: asserts that run,
in this order, before the request guard and the model; the first that fails is the one reported:

    rank and every fixed size of each input, in the signature's key order
        "hist_item_id has shape [3, 29] but the signature takes [B, 30]"
    one batch size B for all inputs (the first key's)
        "user_age has 2 rows but hist_item_id has 3: every input needs the same B"
    one number of candidates M for all cand_* inputs (where M is dynamic: parallel candidates, decode)
        "cand_category has shape [3, 5] but cand_item_id has [3, 4]: the cand_* inputs share M"
    the resource budget (zoo/budget.py): each input's values, and the B x M scores asked for
        "cand_item_id asks for 100000 scores (rows x candidates), past the budget of 65,536 per request ..."

What a client sees for a refused shape: the status is INVALID_ARGUMENT and its message is
"assertion failed: [<that line>]" followed by TF's node line "\n\t [[{{node ...}}]]":
    TF Serving       gRPC: that status; REST: HTTP 400 {"error": "<that message>"}
    Python           `loaded.signatures[name](**tensors)` raises tf.errors.InvalidArgumentError, whose text
                     TF prefixes with "Graph execution error:" and the node it was detected at: the line
                     "assertion failed: [...]" is the 5th of 6.

A missing or extra key never reaches the graph, so no SavedModel can word that error; the caller's own
names the key:
    TF Serving gRPC  "input size does not match signature: 12!=13 len({...}) != len({...}). Sent extra: {}.
                     Missing but required: {ctx_hour}."; with as many extra keys as missing ones,
                     "Signature input alias: ctx_hour(feed name: ...) not found in request and no default
                     value provided. ..."
    TF Serving REST  ("inputs" format) "Missing named input: ctx_hour in 'inputs' object."; an extra key is
                     ignored (the server reads the signature's keys only)
    Python           TypeError "Binding inputs to tf.function failed due to `missing a required argument:
                     'ctx_hour'`. Received args: ..." (or "`got an unexpected keyword argument 'foo'`"): the
                     key in the first sentence, then TF's dump of every tensor sent.
"""

import keras


def _declared(spec):
    """A spec's shape in the contract's letters: "[B, 30]"; the only other dynamic axis of an id
    signature is the candidates' M (cand_* [B, M] in score_all and decode)."""
    dims = spec.shape.as_list()
    return "[" + ", ".join(("B" if a == 0 else "M") if d is None else str(d) for a, d in enumerate(dims)) + "]"


def _text(shape):
    """A runtime shape (int32 [rank]) as a string tensor "[3, 29]"."""
    import tensorflow as tf

    return tf.strings.join(["[", tf.strings.reduce_join(tf.strings.as_string(shape), separator=", "), "]"])


def _has_shape(shape, dims):
    """Whether a runtime shape (int32 [rank]) has len(dims) axes and each fixed size of `dims`; safe
    whatever the rank (the shape is padded before it is indexed)."""
    import tensorflow as tf

    rank = len(dims)
    padded = tf.concat([shape, tf.zeros([rank], shape.dtype)], 0)[:rank]
    # The rank from the shape's text: tf.size(shape) is folded into a constant when the graph is traced (the
    # placeholder's rank is static), so a request of another rank would pass it.
    rank_text = tf.strings.regex_full_match(_text(shape), r"\[" + ", ".join([r"\d+"] * rank) + r"\]")
    same = [rank_text] + [tf.equal(padded[a], d) for a, d in enumerate(dims) if d is not None]
    return tf.reduce_all(tf.stack(same))


def _checks(specs, features, shared=None):
    """The checks in order, each a function returning (condition, message), built once the previous one
    passed (a batch size is read only once every rank is known to be right). `shared`: {what: [keys]}
    whose dynamic second axis must agree (default: the dynamic cand_* keys, "M")."""
    import tensorflow as tf

    keys = list(specs)
    checks = []
    for key in keys:
        def fixed(key=key):
            shape = tf.shape(features[key])
            message = [key, " has shape ", _text(shape), " but the signature takes ", _declared(specs[key])]
            return _has_shape(shape, specs[key].shape.as_list()), tf.strings.join(message)

        checks.append(fixed)
    for key in keys[1:]:
        def batch(key=key, first=keys[0]):
            rows, expected = tf.shape(features[key])[0], tf.shape(features[first])[0]
            message = [key, " has ", tf.strings.as_string(rows), " rows but ", first, " has ",
                       tf.strings.as_string(expected), ": every input needs the same B"]
            return tf.equal(rows, expected), tf.strings.join(message)

        checks.append(batch)
    if shared is None:
        shared = {"the cand_* inputs share M": [k for k in keys if k.startswith("cand_") and specs[k].shape[1] is None]}
    for what, group in shared.items():
        for key in group[1:]:
            def agree(key=key, first=group[0], what=what):
                shape, expected = tf.shape(features[key]), tf.shape(features[first])
                message = [key, " has shape ", _text(shape), " but ", first, " has ", _text(expected), ": ", what]
                return tf.equal(shape[1], expected[1]), tf.strings.join(message)

            checks.append(agree)
    by_m = next((group for what, group in shared.items() if what.endswith("share M") and group), [])
    candidates = by_m[0] if by_m else next((k for k in keys if k.startswith("cand_")), keys[0] if keys else None)
    checks += _budget_checks(specs, features, candidates)
    return checks


def _budget_checks(specs, features, candidates):
    """The request's size against the resource budget (zoo/budget.py), once its shapes are right: every
    input's values (B x L, B x H, ...) within BUDGET["request_values"], and the scores asked for (B x M of
    the first cand_* input, else B) within BUDGET["request_scores"]: "<key> holds 2,000,000 values, past the
    budget of ...". Read when the graph is traced (an export keeps the budget it was made with)."""
    import tensorflow as tf

    from zoo.budget import BUDGET

    checks = []
    for key in specs:
        def values(key=key, limit=BUDGET["request_values"]):
            size = tf.size(features[key], out_type=tf.int64)
            message = [key, " holds ", tf.strings.as_string(size), f" values, past the budget of {limit:,} per input "
                       "(request_values in zoo/budget.py): send fewer rows per request"]
            return size <= limit, tf.strings.join(message)

        checks.append(values)
    if candidates is not None:
        def scores(key=candidates, limit=BUDGET["request_scores"]):
            shape = tf.shape(features[key], out_type=tf.int64)
            asked = shape[0] * (shape[1] if specs[key].shape.rank > 1 else 1)  # (its rank checked already)
            message = [key, " asks for ", tf.strings.as_string(asked), f" scores (rows x candidates), past the budget "
                       f"of {limit:,} per request (request_scores in zoo/budget.py): send fewer rows or "
                       "candidates per request"]
            return asked <= limit, tf.strings.join(message)

        checks.append(scores)
    return checks


def check(specs, features, shared=None):
    """`features` (key -> tensor) as they are, once every shape check of `specs` (key -> tf.TensorSpec,
    the signature's inputs) has passed; else the first failing check raises InvalidArgumentError
    "assertion failed: [<one line naming the key>]" when the graph runs."""
    import tensorflow as tf

    passed = []
    for build in _checks(specs, features, shared):
        with tf.control_dependencies(passed):
            condition, message = build()
            passed = [tf.debugging.Assert(condition, [message])]
    with tf.control_dependencies(passed):
        return {key: tf.identity(value) for key, value in features.items()}


def checked(function, specs, shared=None):
    """`function` (one dict argument, as `zoo.export` traces it) behind `check` of the signature's
    `specs` (and `shared` second axes). The export traces it under TensorFlow; called eagerly under JAX or
    torch (tests of the endpoints) it is `function` itself."""

    def serve(features):
        if keras.backend.backend() != "tensorflow":
            return function(features)
        return function(check(specs, features, shared))

    return serve
