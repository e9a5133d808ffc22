"""Calls every signature of an exported SavedModel the way TF Serving would, importing TensorFlow only.

    python tests/serving_check.py EXPORT_DIR CASES.npz

CASES.npz holds, for each signature S, its inputs as "S/in/<key>" and the Keras model's outputs as
"S/out/<key>"; "S@tag/..." is another request to the same signature S (reported as "S@tag"). For each
request the script checks, within 1e-5:
  - a direct call of the loaded signature;
  - a PredictRequest (tensorflow_serving.apis protos) whose TensorProtos are turned back into tensors
    with tf.make_ndarray, as the gRPC server does;
  - a REST body {"inputs": {...}} (columnar format) parsed from JSON and cast to the signature's dtypes,
    as the REST server does.
It prints one JSON line: {"signatures": {...: max abs error per path}, "modules": [...]}. keras and zoo
are blocked from importing, so the export provably runs on TensorFlow alone.
"""

import json
import sys

# Prove the export needs neither: any attempt to import them fails in this process.
sys.modules["keras"] = None
sys.modules["zoo"] = None

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow_serving.apis import predict_pb2  # noqa: E402


def main(export_dir, cases_path):
    loaded = tf.saved_model.load(export_dir)
    cases = np.load(cases_path)
    names = sorted({k.split("/")[0] for k in cases.files})
    report = {}
    for name in names:
        signature = name.split("@")[0]
        function = loaded.signatures[signature]
        specs = function.structured_input_signature[1]
        inputs = {k.split("/", 2)[2]: cases[k] for k in cases.files if k.startswith(f"{name}/in/")}
        expected = {k.split("/", 2)[2]: cases[k] for k in cases.files if k.startswith(f"{name}/out/")}

        def error(outputs):
            return max(float(np.max(np.abs(outputs[k].numpy() - v))) for k, v in expected.items())

        direct = function(**{k: tf.constant(v, dtype=specs[k].dtype) for k, v in inputs.items()})
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "zoo"
        request.model_spec.signature_name = signature
        for key, value in inputs.items():
            request.inputs[key].CopyFrom(tf.make_tensor_proto(value, dtype=specs[key].dtype))
        wire = predict_pb2.PredictRequest.FromString(request.SerializeToString())
        grpc = function(**{k: tf.constant(tf.make_ndarray(v)) for k, v in wire.inputs.items()})
        body = {"signature_name": signature, "inputs": {k: v.tolist() for k, v in inputs.items()}}
        body = json.loads(json.dumps(body))  # NaN and Infinity included, as TF Serving's REST parser takes them
        rest = function(**{k: tf.constant(np.asarray(v), dtype=specs[k].dtype) for k, v in body["inputs"].items()})
        report[name] = {
            "direct": error(direct),
            "predict_request": error(grpc),
            "rest_json": error(rest),
            "input_dtypes": {k: spec.dtype.name for k, spec in specs.items()},
            "outputs": sorted(direct),
        }
    print(json.dumps({"signatures": report, "modules": sorted(m for m in ("keras", "zoo") if sys.modules.get(m))}))


if __name__ == "__main__":
    main(*sys.argv[1:])
