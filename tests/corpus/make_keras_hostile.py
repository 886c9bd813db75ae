"""Write hostile Keras models (and their benign twins) with Keras itself, and prove them live.

Run in the producer venv (never the tool's): ``KERAS_BACKEND=torch
/work/venvs/h5-keras/bin/python tests/corpus/make_keras_hostile.py`` (keras 3.15.1 on torch
2.13.0 CPU). Each hostile model's Python lambda, wherever Keras serialises it (a Lambda's
``function`` or ``output_shape``, a Lambda inside a nested Sequential or a TimeDistributed, a
Lambda's ``arguments``, a loss), creates ``MARKER.<variant>`` when it runs. The files are then
derived without Keras the way an attacker would: extra members in the ``.keras`` zip
(``assets/data.pkl``), 4 KiB of text before the zip, a legacy ``.h5`` rewritten with a 4096-byte
user block. For every file the script loads it with ``keras.saving.load_model(path,
safe_mode=False)`` (and with the default ``safe_mode=True``) in a fresh interpreter and records
in ``keras_hostile.truth.json`` whether the marker appeared. The benign twin uses Keras'
built-in functions (``Lambda(keras.activations.relu)``, ``loss=keras.losses.mean_squared_error``)
and must load in safe mode.
"""

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE / "keras_hostile"
MARKER = "/tmp/inspector-corpus-keras-hostile"


ARGUMENT_PAYLOAD = lambda x: (open("/tmp/inspector-corpus-keras-hostile.arguments", "w").close(), x)[1]  # noqa: E731,E501
CALL_ARGUMENT = lambda x, g: g(x)  # noqa: E731
LOSS_PAYLOAD = lambda y, p: (open("/tmp/inspector-corpus-keras-hostile.loss", "w").close(), (y - p) ** 2)[1]  # noqa: E731,E501


def build(variant: str):
    import keras

    marker = f"{MARKER}.{variant}"
    # a real lambda: Keras serialises only functions named <lambda> as bytecode
    touch = eval(f"lambda x: (open({marker!r}, 'w').close(), x)[1]")
    inp = keras.Input((4,))
    if variant == "function":
        out = keras.layers.Lambda(touch, name="payload")(inp)
    elif variant == "output_shape":
        shape = eval(f"lambda s: (open({marker!r}, 'w').close(), s)[1]")
        out = keras.layers.Lambda(keras.activations.relu, output_shape=shape,
                                  name="payload")(inp)
    elif variant == "nested":
        inner = keras.Sequential([keras.Input((4,)), keras.layers.Lambda(touch, name="payload")],
                                 name="inner")
        out = inner(inp)
    elif variant == "time_distributed":
        seq = keras.layers.Reshape((2, 2))(inp)
        out = keras.layers.TimeDistributed(keras.layers.Lambda(touch, name="payload"),
                                           name="td")(seq)
        out = keras.layers.Flatten()(out)
    elif variant == "arguments":
        # the payload in `arguments` (the function only calls it)
        out = keras.layers.Lambda(CALL_ARGUMENT, name="payload",
                                  arguments={"g": ARGUMENT_PAYLOAD})(inp)
    elif variant == "loss":
        out = keras.layers.Dense(2, name="dense")(inp)
    elif variant == "benign":
        out = keras.layers.Lambda(keras.activations.relu, name="relu")(inp)
        out = keras.layers.Lambda(keras.ops.tanh, name="tanh")(out)
    else:
        raise ValueError(variant)
    out = keras.layers.Dense(2, name="head")(out)
    model = keras.Model(inp, out)
    if variant == "loss":
        model.compile(loss=LOSS_PAYLOAD, optimizer="sgd")
    elif variant == "benign":
        model.compile(loss=keras.losses.mean_squared_error,
                      metrics=[keras.metrics.mean_absolute_error], optimizer="adam")
    return model


PICKLE_PAYLOAD = (b"\x80\x02cos\nsystem\nX" + len(f"touch {MARKER}.pickle").to_bytes(4, "little")
                  + f"touch {MARKER}.pickle".encode() + b"\x85R.")

LOADER = """
import sys, keras, numpy as np
path, safe = sys.argv[1], sys.argv[2] == "safe"
try:
    model = keras.saving.load_model(path, safe_mode=safe)
    print("loaded")
    if sys.argv[3] == "loss":  # a loss runs when the model is evaluated or trained
        model.evaluate(np.zeros((2, 4)), np.zeros((2, 2)), verbose=0)
        print("loaded, evaluated")
except Exception as e:
    print("refused:", type(e).__name__, str(e)[:200])
"""


def load(path: Path, variant: str, safe: bool) -> dict:
    marker = Path(f"{MARKER}.{variant}")
    marker.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, "-c", LOADER, str(path), "safe" if safe else "unsafe",
                           variant],
                          capture_output=True, text=True, timeout=300)
    ran = marker.exists()
    marker.unlink(missing_ok=True)
    return {"payload_ran": ran, "loader": proc.stdout.strip().splitlines()[-1:]}


def derive(variant: str) -> list[Path]:
    """The attacker's rewrites of the Keras-written files, and the files themselves."""
    import pickle

    import h5py

    keras_path = OUT / f"{variant}.keras"
    h5_path = OUT / f"{variant}.legacy.h5"
    out = [keras_path, h5_path]
    if variant in ("function", "benign"):
        extra = OUT / f"{variant}_extra_member.keras"
        shutil.copy(keras_path, extra)
        with zipfile.ZipFile(extra, "a") as z:
            # the hostile model carries a plain pickle; the benign one a pickle that calls
            # os.system (written opcode by opcode: what torch.load / pickle.load would run)
            z.writestr("assets/data.pkl", pickle.dumps({"w": [1.0, 2.0]}, protocol=2)
                       if variant == "function" else PICKLE_PAYLOAD)
        prepended = OUT / f"{variant}_prepended.keras"
        prepended.write_bytes(b"# notes\n" * 512 + keras_path.read_bytes())
        userblock = OUT / f"{variant}_userblock.legacy.h5"
        with h5py.File(h5_path) as src, h5py.File(userblock, "w", userblock_size=4096) as dst:
            for k, v in src.attrs.items():
                dst.attrs[k] = v
            for k in src:
                src.copy(src[k], dst, name=k)
        with open(userblock, "r+b") as f:
            f.write((b"plain text notes\n" * 241)[:4096])  # the whole user block is text
        out += [extra, prepended, userblock]
    return out


VARIANTS = ("function", "output_shape", "nested", "time_distributed", "arguments", "loss",
            "benign")


def main() -> None:
    import keras

    OUT.mkdir(exist_ok=True)
    truth_path = HERE / "keras_hostile.truth.json"
    truth = {"keras": keras.__version__, "backend": keras.backend.backend(), "files": {}}
    if truth_path.exists():
        truth["files"] = json.loads(truth_path.read_text())["files"]
    for variant in sys.argv[1:] or VARIANTS:
        model = build(variant)
        model.save(OUT / f"{variant}.keras")
        model.save(OUT / f"{variant}.legacy.h5")
        Path(f"{MARKER}.{variant}").unlink(missing_ok=True)
        for path in derive(variant):
            truth["files"][path.name] = {
                "variant": variant,
                "unsafe_mode": load(path, variant, safe=False),
                "safe_mode": load(path, variant, safe=True),
            }
            print(path.name, truth["files"][path.name], flush=True)
            truth_path.write_text(json.dumps(truth, indent=1) + "\n")


if __name__ == "__main__":
    main()
