"""Write Keras models whose Lambda layer holds marshalled Python bytecode (hostile corpus).

Run in the producer venv (never the tool's): ``KERAS_BACKEND=torch
/work/venvs/keras16/bin/python tests/corpus/make_keras_lambda.py``. Keras itself writes the
files (``model.save``): ``lambda_v3.keras`` (Keras 3 zip, the function as ``__lambda__`` with
base64 marshal code) and ``lambda_legacy.h5`` (HDF5 ``model_config``, the function as
``func_dump`` output). The lambda would create MARKER when Keras deserialises it. The script then
proves the files are live: loading with ``safe_mode=False`` runs the code and creates the
marker; it records that in ``keras_lambda.truth.json`` and removes the marker.
"""

import json
import os
from pathlib import Path

import keras

HERE = Path(__file__).parent
MARKER = "/tmp/inspector-corpus-keras-lambda-pwned"


def build() -> keras.Model:
    inp = keras.Input((4,))
    out = keras.layers.Lambda(
        lambda x: (open("/tmp/inspector-corpus-keras-lambda-pwned", "w").close(), x)[1],
        name="payload",
    )(inp)
    out = keras.layers.Dense(2, name="dense")(out)
    return keras.Model(inp, out)


def main() -> None:
    truth = {"keras": keras.__version__, "backend": keras.backend.backend(), "files": {}}
    model = build()
    for name in ("lambda_v3.keras", "lambda_legacy.h5"):
        path = HERE / name
        model.save(path)
        if os.path.exists(MARKER):
            os.remove(MARKER)
        keras.config.enable_unsafe_deserialization()
        keras.models.load_model(path, safe_mode=False)
        live = os.path.exists(MARKER)
        if live:
            os.remove(MARKER)
        truth["files"][name] = {"payload_ran_under_keras_load_model": live}
    (HERE / "keras_lambda.truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    print(json.dumps(truth))


if __name__ == "__main__":
    main()
