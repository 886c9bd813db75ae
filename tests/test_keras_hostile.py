"""Hostile Keras models: Python bytecode in any config field, references by module, and the
container tricks (extra zip members, data before the zip, HDF5 user blocks).

The files under ``tests/corpus/keras_hostile/`` were written by Keras 3.15.1 itself (torch
backend) and then rewritten as an attacker would (``tests/corpus/make_keras_hostile.py``); its
truth file records, per file, whether ``keras.saving.load_model(path, safe_mode=False)`` ran the
payload (a marker file) and what safe mode did. Here the tool must call each hostile file
dangerous in ``scan``, refuse it in every verb (one policy: :func:`registry.load` is what
``show``/``check``/``diff``/``stats``/``report`` call), and run nothing (the marker stays absent).
Keras' own encodings of its built-in functions are not dangerous.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from inspector.adapters.errors import UnsafeContentError
from inspector.adapters.registry import detect, load
from inspector.adapters.security.keras_config import config_items
from inspector.adapters.security.scan import scan_file

from conftest import ROOT, run_cli

CORPUS = ROOT / "tests" / "corpus"
FILES = CORPUS / "keras_hostile"
TRUTH = json.loads((CORPUS / "keras_hostile.truth.json").read_text())
MARKER = "/tmp/inspector-corpus-keras-hostile"
# Keras' legacy .h5 writer stores a lambda loss by its name only ("loss": "<lambda>"): no
# bytecode, and Keras 3.15 fails to load it: benign, as the benign twins
NO_CODE = {"loss.legacy.h5"}
HOSTILE = sorted(n for n, v in TRUTH["files"].items()
                 if v["variant"] != "benign" and n not in NO_CODE)
BENIGN = sorted(n for n, v in TRUTH["files"].items() if v["variant"] == "benign")
# where the bytecode is reported, per variant (.keras config.json; legacy .h5 attributes)
FIELD = {
    "function": "Lambda layer 'payload' (function)",
    "output_shape": "Lambda layer 'payload' (output_shape)",
    "nested": "Lambda layer 'payload' (function)",
    "time_distributed": "Lambda layer 'payload' (function)",
    "arguments": "Lambda layer 'payload' (arguments.g)",
    "loss": "loss",
}


def _copy(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    shutil.copy(FILES / name, path)
    return path


@pytest.mark.parametrize("name", HOSTILE)
def test_keras_written_payload_is_dangerous_and_refused(tmp_path, name):
    facts = TRUTH["files"][name]
    variant = facts["variant"]
    ran = facts["unsafe_mode"]
    # Keras itself runs it: on load, or (a loss) when the model is evaluated
    assert ran["payload_ran"], ran
    assert not facts["safe_mode"]["payload_ran"]
    marker = Path(f"{MARKER}.{variant}")
    marker.unlink(missing_ok=True)
    path = _copy(tmp_path, name)
    r = scan_file(path)
    assert r.verdict == "dangerous", r.to_dict()
    assert r.kind in ("keras", "keras-h5")
    bytecode = [i.text for i in r.items if i.level == "dangerous" and "bytecode" in i.text]
    assert any(FIELD[variant] in t for t in bytecode), bytecode
    with pytest.raises(UnsafeContentError, match="marshalled Python bytecode"):
        load(path, None, allow_unsafe=False)
    with pytest.raises(UnsafeContentError):  # the Python API: inspector.load
        load(path)
    ckpt = load(path, None, allow_unsafe=True)  # listed, nothing run
    assert any(f.severity == "danger" for f in ckpt.findings)
    assert not marker.exists()


def test_every_verb_refuses_lambda_bytecode(tmp_path):
    """The CLI: one line, exit 2, for each verb; listed with --allow-unsafe; scan exit 1."""
    path = _copy(tmp_path, "output_shape.keras")
    out = tmp_path / "r.html"
    for args in (["show"], ["check"], ["stats"], ["report", "-o", str(out)],
                 ["diff", str(path)]):
        proc = run_cli(args[0], str(path), *args[1:])
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1
        assert "output_shape" in proc.stderr and "bytecode" in proc.stderr
    assert run_cli("show", str(path), "--allow-unsafe").returncode == 0
    assert run_cli("scan", str(path)).returncode == 1
    assert not Path(f"{MARKER}.output_shape").exists()


@pytest.mark.parametrize("name", BENIGN)
def test_keras_builtin_functions_are_not_dangerous(tmp_path, name):
    """``Lambda(keras.activations.relu)``, ``Lambda(keras.ops.tanh)``,
    ``loss=keras.losses.mean_squared_error``: Keras writes them as ``"module": "builtins",
    "class_name": "function"`` and loads them in safe mode."""
    facts = TRUTH["files"][name]
    assert facts["safe_mode"]["loader"] == ["loaded"]
    path = _copy(tmp_path, name)
    r = scan_file(path)
    assert r.kind in ("keras", "keras-h5"), r.to_dict()
    if name == "benign_extra_member.keras":
        return  # its extra member is a hostile pickle: next test
    # bytes before a zip are noted (foreign, with that reason), never dangerous
    assert r.verdict == ("foreign" if "prepended" in name else "safe"), r.to_dict()
    assert all("before" in i.text for i in r.items), r.to_dict()
    ckpt = load(path, None, allow_unsafe=False)
    assert not [f for f in ckpt.findings if f.severity == "danger"]
    assert ckpt.format in ("keras-v3", "keras-legacy-h5")


def test_lambda_loss_named_only_is_not_dangerous(tmp_path):
    """Keras' legacy writer keeps only the name "<lambda>" of a lambda loss: nothing to run."""
    facts = TRUTH["files"]["loss.legacy.h5"]
    assert not facts["unsafe_mode"]["payload_ran"]
    path = _copy(tmp_path, "loss.legacy.h5")
    r = scan_file(path)
    assert r.kind == "keras-h5" and r.verdict == "safe", r.to_dict()
    assert load(path, None, allow_unsafe=False).format == "keras-legacy-h5"


def test_pickle_member_of_a_keras_zip_is_examined(tmp_path):
    """A .keras zip with ``assets/data.pkl``: detected as Keras (not a torch zip), its config
    examined, and the pickle member examined too (pickle.load would run it)."""
    path = _copy(tmp_path, "benign_extra_member.keras")
    member = zipfile.ZipFile(path).read("assets/data.pkl")
    marker = Path(f"{MARKER}.pickle")
    marker.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-c",
                    "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"],
                   input=member, check=True, timeout=60)
    assert marker.exists()  # the real loader runs it
    marker.unlink()
    assert detect(path)[0].name == "keras"
    r = scan_file(path)
    assert r.kind == "keras" and r.verdict == "dangerous"
    assert [(i.where, i.text.split(" ")[0]) for i in r.items] == [("assets/data.pkl", "os.system")]
    hostile = _copy(tmp_path, "function_extra_member.keras")
    assert detect(hostile)[0].name == "keras"
    assert any("bytecode" in i.text for i in scan_file(hostile).items)
    assert not marker.exists()


@pytest.mark.parametrize("name,kind", [
    ("function_prepended.keras", "keras"), ("benign_prepended.keras", "keras"),
    ("function_userblock.legacy.h5", "keras-h5"), ("benign_userblock.legacy.h5", "keras-h5"),
])
def test_text_before_the_model_is_not_text(tmp_path, name, kind):
    """4 KiB of text before a .keras zip (zipfile and Keras find it by its end record) and a
    legacy .h5 with a 4096-byte user block of text (libhdf5 finds the superblock there)."""
    path = _copy(tmp_path, name)
    head = path.read_bytes()[:4096]
    assert b"\0" not in head and head.decode()  # plain text
    r = scan_file(path)
    assert r.kind == kind
    benign = "foreign" if name.endswith(".keras") else "safe"  # bytes before a zip: noted
    assert r.verdict == (benign if name.startswith("benign") else "dangerous"), r.to_dict()
    assert load(path, allow_unsafe=True).format in ("keras-v3", "keras-legacy-h5")


# ---------------------------------------------------------------- variants of the config


def _lambda_node() -> dict:
    """The ``__lambda__`` node Keras wrote for the function variant."""
    config = json.loads(zipfile.ZipFile(FILES / "function.keras").read("config.json"))
    found = []

    def walk(n):
        if isinstance(n, dict):
            if n.get("class_name") == "__lambda__":
                found.append(n)
            for v in n.values():
                walk(v)
        elif isinstance(n, list):
            for v in n:
                walk(v)

    walk(config)
    return found[0]


def _lambda_layer(**fields) -> dict:
    return {"module": "keras.layers", "class_name": "Lambda",
            "config": {"name": "payload", "function": {
                "module": "builtins", "class_name": "function", "config": "relu",
                "registered_name": "function"}, **fields}}


VARIANTS = {
    "mask": (lambda lam: _lambda_layer(mask=lam), "(mask)"),
    "bidirectional": (lambda lam: {"class_name": "Bidirectional", "config": {
        "name": "bidi", "layer": _lambda_layer(function=lam)}}, "Lambda layer 'payload'"),
    "deep_nesting": (lambda lam: {"class_name": "Sequential", "config": {"name": "outer",
                     "layers": [{"class_name": "Functional", "config": {"name": "inner",
                                 "layers": [_lambda_layer(output_shape=lam)]}}]}},
                     "(output_shape)"),
    "keras2_output_shape": (lambda lam: {"class_name": "Lambda", "config": {
        "name": "payload", "function": "relu", "function_type": "function",
        "output_shape": lam["config"]["code"], "output_shape_type": "lambda"}},
        "(output_shape)"),
    "keras2_mask": (lambda lam: {"class_name": "Lambda", "config": {
        "name": "payload", "function": "relu", "function_type": "function",
        "mask": [lam["config"]["code"], None, None], "mask_type": "lambda"}}, "(mask)"),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_bytecode_in_any_field_or_wrapper(tmp_path, variant):
    """Keras' own ``__lambda__`` node (or its Keras 2 func_dump code) moved to other fields and
    wrappers of the Keras-written config: a .keras rewritten with it is dangerous, refused."""
    make, label = VARIANTS[variant]
    node = make(_lambda_node())
    items = config_items({"class_name": "Functional", "config": {"name": "m",
                                                                 "layers": [node]}})
    assert [lvl for lvl, _ in items] == ["dangerous"], items
    assert "bytecode" in items[0][1] and label in items[0][1], items
    path = tmp_path / f"{variant}.keras"
    with zipfile.ZipFile(FILES / "benign.keras") as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "config.json":
                config = json.loads(data)
                config["config"]["layers"].append(node)
                data = json.dumps(config).encode()
            dst.writestr(info, data)
    assert scan_file(path).verdict == "dangerous"
    with pytest.raises(UnsafeContentError):
        load(path, None, allow_unsafe=False)


@pytest.mark.parametrize("ref,level", [
    ({"module": "builtins", "class_name": "function", "config": "relu"}, None),
    ({"module": "builtins", "class_name": "function", "config": "mean_squared_error"}, None),
    ({"module": "keras.layers", "class_name": "Dense", "config": {}}, None),
    ({"module": "keras.src.models.functional", "class_name": "Functional"}, None),
    ({"module": "builtins", "class_name": "function", "config": "my_double"}, "foreign"),
    # built by from_config with the config's data: an unvetted class's code runs (--trust)
    ({"module": "my_project.layers", "class_name": "Block", "config": {},
      "registered_name": "my_project>Block"}, "dangerous"),  # built with the file's config
    ({"class_name": "Block", "config": {}}, "foreign"),  # Keras 2: by name, registered only
    ({"class_name": "Custom>Adam", "config": {}}, None),  # tf.keras 2's own optimizer name
    ({"module": "keras.layers", "class_name": "NoSuchLayer", "config": {}}, "dangerous"),
    ({"module": "keras_hub.src.models", "class_name": "Backbone", "config": {}}, "dangerous"),
    ({"module": "keras.ops", "class_name": "function", "config": "relu"}, None),
    ({"module": "keras.src.ops.numpy", "class_name": "function", "config": "add"}, None),
    ({"module": "keras.utils", "class_name": "function", "config": "plot_model"}, "dangerous"),
    ({"module": "builtins", "class_name": "function", "config": "eval"}, "dangerous"),
    ({"module": "os", "class_name": "function", "config": "system"}, "dangerous"),
    ({"module": "subprocess", "class_name": "Popen", "config": {}}, "dangerous"),
    ({"module": "my_project.ops", "class_name": "function", "config": "run"}, "dangerous"),
    ({"module": "keras.config", "class_name": "function",
      "config": "enable_unsafe_deserialization"}, "dangerous"),
    ({"module": "keras.utils", "class_name": "function", "config": "get_file"}, "dangerous"),
])
def test_module_references(ref, level):
    """Keras classes reviewed as data and its modelling functions: safe; an object found only
    among the loader's registered objects by name: foreign; a class of another module built
    through from_config with the file's config, a Keras class or function outside the reviewed
    lists, a function Keras before 3.9 imported and called, and the non-modelling Keras APIs:
    dangerous."""
    items = config_items({"class_name": "Dense", "config": {"name": "d", "activation": ref}})
    assert [lvl for lvl, _ in items] == ([level] if level else []), items


@pytest.mark.parametrize("vocabulary,level", [
    ("/etc/passwd", "dangerous"), ("../../secrets/tokens.txt", "dangerous"),
    ("vocab.txt", "foreign"), (["a", "b"], None),
])
def test_lookup_vocabulary_file(vocabulary, level):
    """``StringLookup(vocabulary=path)``: Keras reads the file when it builds the layer."""
    items = config_items({"module": "keras.layers", "class_name": "StringLookup",
                          "config": {"name": "lookup", "vocabulary": vocabulary}})
    assert [lvl for lvl, _ in items] == ([level] if level else []), items


def test_config_walk_is_bounded():
    deep: list = []
    node = deep
    for _ in range(100_000):  # deep nesting: no recursion
        node.append([])
        node = node[0]
    assert config_items(deep) == []
    wide = [[0] * 1000 for _ in range(2100)]
    assert [lvl for lvl, _ in config_items(wide)] == ["error"]


def test_truth_file_is_the_corpus():
    assert sorted(TRUTH["files"]) == sorted(p.name for p in FILES.iterdir())
    assert TRUTH["keras"].startswith("3.")
