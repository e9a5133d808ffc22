"""`zoo.export(model_or_preset, path, signature=...)`: a TF Serving SavedModel at <base>/<version>/."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import keras

from zoo import presets, registry
from zoo.errors import ZooError
from zoo.outputs import check_apart, new_folder, refuse_filled

# Signature name -> the module under zoo.serving whose `endpoints(model, options)` builds it. A model
# declares the ones it serves (besides serving_default) when it registers (`register(signatures=...)`).
SIGNATURES = {
    "serving_default": "plain",
    "parallel_candidates": "parallel_candidates",
    "encode_decode": "encode_decode",
    "raw": "raw",  # every model whose preset carries a data spec (zoo/serving/raw.py)
}


def _builder(signature):
    import importlib

    if signature == "raw":
        return _raw_and_ids
    return importlib.import_module(f"zoo.serving.{SIGNATURES[signature]}").endpoints


def _raw_and_ids(model, options):
    """The `raw` signature (zoo/serving/raw.py) beside the model's own id signatures (its last registered
    one: parallel_candidates for lightsuan, encode_decode for rest, serving_default otherwise)."""
    from zoo.serving import raw

    primary = registry.entry(model.registered_name).signatures[-1]
    id_options = {"m2": options["m2"]} if "m2" in options and primary == "parallel_candidates" else {}
    endpoints = _builder(primary)(model, id_options)
    endpoints.update(raw.endpoints(model, dict(options)))
    return endpoints


def _check_signature(model_name, signature):
    if signature not in SIGNATURES:
        raise ZooError(f"unknown signature '{signature}' (signatures: {', '.join(SIGNATURES)})")
    served = registry.entry(model_name).signatures
    if signature not in served and signature != "raw":
        owners = [name for name in registry.names() if signature in registry.entry(name).signatures]
        raise ZooError(
            f"signature '{signature}' serves {' and '.join(owners)}; {model_name} exports with {', '.join(served)}"
        )


def _check_target(path):
    path = Path(path)
    if not path.name.isdigit():
        raise ZooError(
            f"{path}: TF Serving loads <base>/<version>/ with a numeric version: end the path in one (e.g. {path}/1)"
        )
    refuse_filled(path)
    return path


def export(model_or_preset, path, signature="serving_default", **options):
    """Writes a SavedModel for TF Serving.

    Args:
        model_or_preset: a zoo model, a preset directory, or a registered name (its shipped preset).
        path: `<base>/<version>`; the version directory must be new or empty. The SavedModel is written into
            `<base>/.<version>.tmp-<pid>` and renamed into place when complete (zoo.outputs.new_folder): TF
            Serving never sees a partial version, a failed or killed export leaves no `<base>/<version>/`,
            and a second export of a version being written is refused.
        signature: "serving_default" (every model), "parallel_candidates" (LightSUAN: `serving_default`
            and `score_all` score any M candidates in ceil(M / m2) passes), "encode_decode" (ReST:
            `encode`, `decode` and `serving_default`).
        options: the signature's options (`m2` for parallel_candidates; for "raw", `preprocessing=` the
            fitted state, by default the model's own `preprocessor`, the one zoo.load attached).
        signature "raw" (a preset trained on a data spec): the `raw` signature, which applies the preset's
            preprocessing inside the graph (zoo/serving/raw.py), beside the model's id signatures.

    The graph is always built under the TensorFlow backend, so it holds plain TF ops (no
    XlaCallModule) that any TF Serving build runs on CPU or GPU. A model trained under JAX or torch is
    saved as a preset and re-exported in a TensorFlow subprocess.
    """
    path = _check_target(path)
    model = None
    if signature == "raw":
        options = dict(options, preprocessing=_raw_state(model_or_preset, options.get("preprocessing")))
    if isinstance(model_or_preset, keras.Model):
        model = model_or_preset
        if getattr(model, "registered_name", None) is None:
            raise ZooError(f"{type(model).__name__} is not a registered zoo model; only those export")
        _check_signature(model.registered_name, signature)
    else:
        preset = presets.resolve(model_or_preset)
        check_apart(path, [preset], flag="export to", folder=True)
        _check_signature(presets.read_config(preset)["model"], signature)
        if presets.read_metadata(preset).get("weights_sha256") is None:
            raise ZooError(f"{preset}: the preset has no weights; export needs trained weights")
    if keras.backend.backend() != "tensorflow":
        with tempfile.TemporaryDirectory() as scratch:
            if model is not None:
                preset = Path(scratch) / "preset"
                model.save_to_preset(preset, preprocessing=options.get("preprocessing"))
            _export_in_tensorflow(preset, path, signature, options)
        return path
    if model is None:
        model = presets.load(preset)
    _write(model, path, _builder(signature), options)
    return path


def _raw_state(model_or_preset, given):
    """The fitted data contract the raw signature serves: `preprocessing=` for a model, the preset's own
    preprocessing.json for a preset (checked: it must carry a data spec)."""
    from zoo.datasets import fitted
    from zoo.serving.raw import check_state

    if given is None and getattr(model_or_preset, "preprocessor", None) is not None:
        given = model_or_preset.preprocessor.state  # a loaded preset's model carries its contract
    if given is None and not isinstance(model_or_preset, keras.Model):
        folder = presets.resolve(model_or_preset)
        if not (folder / fitted.FILE_NAME).is_file():
            raise ZooError(f"{folder}: no preprocessing.json; the raw signature serves presets trained on a data spec")
        given = folder
    if given is None:
        raise ZooError("signature 'raw' of a model object needs a data contract: a model loaded from a preset trained "
                       "on a data spec (model.preprocessor), or preprocessing= (the fitted state it was trained with)")
    state = fitted.read_preprocessing(given)
    check_state(state)
    return state


def _export_in_tensorflow(preset, path, signature, options):
    """Runs `python -m zoo.serving` (zoo/serving/__main__.py) with the export's arguments as JSON."""
    request = {"preset": str(preset), "path": str(path), "signature": signature, "options": options}
    command = [sys.executable, "-m", "zoo.serving", json.dumps(request)]
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        raise ZooError(lines[-1].removeprefix("error: ") if lines else "export under TensorFlow failed")


def _write(model, path, builder, options):
    """The SavedModel of `model`'s endpoints at `path`, written whole or not at all: a failure (a full disk:
    TensorFlow's ResourceExhausted, OutOfRange or an OSError) is one line naming `path`."""
    import tensorflow as tf

    endpoints = builder(model, dict(options))
    archive = keras.export.ExportArchive()
    archive.track(model)
    for name, (function, input_signature) in endpoints.items():
        for resource in getattr(function, "resources", ()):  # e.g. the raw signature's lookup tables
            archive.track(resource)
        archive.add_endpoint(name, function, input_signature=[input_signature])
    with new_folder(path) as scratch:
        try:
            archive.write_out(str(scratch), verbose=False)
        except (tf.errors.OpError, OSError) as error:
            what = (getattr(error, "strerror", None) or getattr(error, "message", None) or str(error)).strip()
            raise ZooError(f"{path}: the export failed, nothing written ({what.splitlines()[0]})") from None
