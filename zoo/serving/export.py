"""`zoo.export(model_or_preset, path, signature=...)`: a TF Serving SavedModel at <base>/<version>/."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import keras

from zoo.errors import ZooError
from zoo.registry import preset_directory


def _signature_builders():
    from zoo.serving import plain

    builders = {"serving_default": plain.endpoints}
    try:
        from zoo.serving import parallel_candidates

        builders["parallel_candidates"] = parallel_candidates.endpoints
    except ImportError:
        pass
    try:
        from zoo.serving import encode_decode

        builders["encode_decode"] = encode_decode.endpoints
    except ImportError:
        pass
    return builders


def _check_target(path):
    path = Path(path)
    if not path.name.isdigit():
        raise ZooError(
            f"{path}: TF Serving loads <base>/<version>/ with a numeric version: end the path in one (e.g. {path}/1)"
        )
    if path.exists() and any(path.iterdir()):
        raise ZooError(f"{path}: the version directory is not empty; pick a new version number")
    return path


def export(model_or_preset, path, signature="serving_default", **options):
    """Writes a SavedModel for TF Serving.

    Args:
        model_or_preset: a zoo model, a preset directory, or a registered name (its shipped preset).
        path: `<base>/<version>`; the version directory must be new or empty.
        signature: "serving_default" (every model), "parallel_candidates" (LightSUAN: `serving_default`
            scores m2 candidates per request, `score_all` any m1), "encode_decode" (ReST: `encode`,
            `decode` and `serving_default`).
        options: the signature's options (`m2` for parallel_candidates).

    The graph is always built under the TensorFlow backend, so it holds plain TF ops (no
    XlaCallModule) that any TF Serving build runs on CPU or GPU. A model trained under JAX or torch is
    saved as a preset and re-exported in a TensorFlow subprocess.
    """
    path = _check_target(path)
    builders = _signature_builders()
    if signature not in builders:
        raise ZooError(f"unknown signature '{signature}' (signatures: {', '.join(builders)})")
    model = None
    if isinstance(model_or_preset, keras.Model):
        model = model_or_preset
    else:
        preset = preset_directory(model_or_preset)
        from zoo.presets import read_metadata

        if read_metadata(preset).get("weights_sha256") is None:
            raise ZooError(f"{preset}: the preset has no weights; export needs trained weights")
    if keras.backend.backend() != "tensorflow":
        with tempfile.TemporaryDirectory() as scratch:
            if model is not None:
                preset = Path(scratch) / "preset"
                model.save_to_preset(preset)
            _export_in_tensorflow(preset, path, signature, options)
        return path
    if model is None:
        from zoo.presets import load

        model = load(preset)
    _write(model, path, builders[signature], signature, options)
    return path


def _export_in_tensorflow(preset, path, signature, options):
    command = [sys.executable, "-m", "zoo", "export", str(preset), str(path), "--signature", signature]
    for key, value in options.items():
        command += [f"--{key.replace('_', '-')}", str(value)]
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        raise ZooError(lines[-1].removeprefix("error: ") if lines else "export under TensorFlow failed")


def _write(model, path, builder, signature, options):
    if getattr(model, "registered_name", None) is None:
        raise ZooError(f"{type(model).__name__} is not a registered zoo model; only those export")
    endpoints = builder(model, dict(options))
    archive = keras.export.ExportArchive()
    archive.track(model)
    for name, (function, input_signature) in endpoints.items():
        archive.add_endpoint(name, function, input_signature=[input_signature])
    path.parent.mkdir(parents=True, exist_ok=True)
    archive.write_out(str(path), verbose=False)
