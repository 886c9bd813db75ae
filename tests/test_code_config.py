"""Configuration that carries code, and code shipped beside the weights.

The fixtures (``fixtures/code_config``) were written by the real producers (Keras 3.15.1,
OmegaConf / hydra-core, jinja2) and their truths record whether the real loader ran the payload
(a marker file). Every file whose loader runs it is ``dangerous`` in ``scan`` and refused by
``show`` and ``inspector.load``; every benign twin stays safe or foreign. The slow tests run
the real loaders again from the producer venvs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from inspector.adapters.errors import UnsafeContentError
from inspector.adapters.registry import load
from inspector.adapters.security.chat_template import examine_template
from inspector.adapters.security.config_targets import target_items
from inspector.adapters.security.keras_config import config_items
from inspector.adapters.security.python_source import examine_source
from inspector.adapters.security.scan import scan_file

from conftest import FIXTURES, load_truth, run_cli

HERE = FIXTURES / "code_config"
TRUTHS = sorted(HERE.rglob("*.truth.json"))
KERAS_PY = Path("/work/venvs/keras/bin/python")
HYDRA_OLD_PY = Path("/work/venvs/hydra132/bin/python")
MARKER = "inspector_payload_ran"


def _target(truth_path: Path) -> Path:
    return truth_path.with_name(truth_path.name[: -len(".truth.json")])


@pytest.mark.parametrize("truth_path", TRUTHS, ids=lambda p: str(p.relative_to(HERE)))
def test_scan_follows_the_loader(truth_path):
    """dangerous exactly where the real loader ran the payload (or would build an unvetted
    object); the benign twins safe or foreign."""
    truth = load_truth(truth_path)
    res = scan_file(_target(truth_path))
    if truth["verdict"] == "dangerous":
        assert res.verdict == "dangerous", res.to_dict()
    else:
        assert res.verdict in ("safe", "foreign"), res.to_dict()
        assert not truth["loader_ran_payload"]


@pytest.mark.parametrize("name", ["torch_module_wrapper_payload.keras", "lambda_payload.keras"])
def test_dangerous_keras_is_refused_by_every_verb(name):
    with pytest.raises(UnsafeContentError):
        load(HERE / name)
    proc = run_cli("show", str(HERE / name))
    assert proc.returncode == 2 and "refused" in proc.stderr, proc.stderr


def test_nested_checkpoint_is_examined_with_the_torch_walk():
    """The base64 torch.save bytes are read as a torch zip: the payload's global is named,
    with the member it sits in."""
    res = scan_file(HERE / "torch_module_wrapper_payload.keras")
    texts = " ".join(i.text for i in res.items)
    assert "torch-zip" in texts and "posix.system" in texts and "data.pkl" in texts
    # torch.nn.Linear is vetted: the benign file is safe, nothing to report, yet its bytes
    # were walked (the same examination names the module's class, constructed and vetted)
    import base64
    import zipfile

    from inspector.adapters.security.embedded import examine_embedded

    benign = HERE / "torch_module_wrapper.keras"
    assert scan_file(benign).verdict == "safe"
    with zipfile.ZipFile(benign) as z:
        layers = json.loads(z.read("config.json"))["config"]["layers"]
    module = next(x["config"]["module"] for x in layers if x["class_name"] == "TorchModuleWrapper")
    nested = examine_embedded(base64.b64decode(module), "module", "torch.load")
    linear = [g for g in nested.globals if g["name"] == "torch.nn.modules.linear.Linear"]
    assert nested.kind == "torch-zip" and nested.verdict == "safe"
    assert [(g["use"], g["verdict"]) for g in linear] == [("constructed", "safe")]


def _hf_dir(tmp_path: Path, source: Path | None = None, config_extra: dict | None = None) -> Path:
    """A real HF model folder (GPT-2, safetensors) with code-carrying side files added."""
    d = tmp_path / "model"
    shutil.copytree(FIXTURES / "dirs" / "hf_gpt2_safetensors", d)
    config = json.loads((d / "config.json").read_text())
    config.update(config_extra or {})
    (d / "config.json").write_text(json.dumps(config))
    if source is not None:
        for f in source.iterdir():
            if f.is_file() and f.name != "config.json" and not f.name.endswith(".truth.json"):
                shutil.copy(f, d / f.name)
    return d


@pytest.mark.parametrize("folder,verdict", [("remote_code_payload", "dangerous"),
                                            ("remote_code", "foreign")])
def test_auto_map_code_in_a_model_folder(tmp_path, folder, verdict):
    """auto_map's module is read with ast: os.system at import time refuses the folder; the
    benign twin lists, its code reported."""
    d = _hf_dir(tmp_path, HERE / folder, {"auto_map": {"AutoModel": "modeling_demo.DemoModel"}})
    assert scan_file(d / "config.json").verdict == verdict
    if verdict == "dangerous":
        with pytest.raises(UnsafeContentError, match="os.system"):
            load(d)
        assert run_cli("show", str(d)).returncode == 2
    else:
        ckpt = load(d)
        assert any("modeling_demo.py" in f.message for f in ckpt.findings)


def test_auto_map_to_missing_or_remote_code_is_not_examined(tmp_path):
    d = _hf_dir(tmp_path, None, {"auto_map": {"AutoModel": "modeling_gone.M",
                                              "AutoConfig": "other/repo--configuration_x.C"}})
    res = scan_file(d / "config.json")
    texts = [i.text for i in res.items if i.level == "error"]
    assert res.verdict == "error" and len(texts) == 2, res.to_dict()
    assert any("modeling_gone.py" in t for t in texts) and any("other/repo" in t for t in texts)


@pytest.mark.parametrize("name,refused", [("tokenizer_config_payload.json", True),
                                          ("tokenizer_config.json", False)])
def test_chat_template_in_a_model_folder(tmp_path, name, refused):
    d = _hf_dir(tmp_path)
    shutil.copy(HERE / name, d / "tokenizer_config.json")
    if refused:
        with pytest.raises(UnsafeContentError, match="sandbox"):
            load(d)
    else:
        assert not [f for f in load(d).findings if f.severity == "danger"]


# ---------------------------------------------------------------------------------------------
# the rules, case by case


@pytest.mark.parametrize("source,dangerous", [
    ("import os\nos.system('id')\n", "os.system"),
    ("from subprocess import Popen as P\nP(['id'])\n", "subprocess.Popen"),
    ("__import__('os').system('id')\n", "os.system"),
    ("import importlib\nimportlib.import_module('subprocess').run(['id'])\n", "subprocess.run"),
    ("import os\ngetattr(os, 'system')('id')\n", "os.system"),
    ("import os as o\nrun = o.system\nrun('id')\n", "os.system"),
    ("exec(open('x').read())\n", "exec"),
    ("import importlib\nname = 'o' + 's'\nimportlib.import_module(name)\n",
     "importlib.import_module"),
    ("import torch, os\nfrom torch import nn\nclass M(nn.Module):\n  pass\n"
     "p = os.path.join('a', 'b')\nv = open(p).read()\nx = getattr(nn, 'Linear')(2, 2)\n", None),
])
def test_python_source(source, dangerous):
    items = examine_source(source.encode(), "modeling_x.py")
    bad = [t for lv, t in items if lv == "dangerous"]
    if dangerous:
        assert bad and dangerous in bad[0], items
    else:
        assert not bad and items[-1][0] == "foreign" and "torch" in items[-1][1], items


def test_python_source_bounds():
    assert examine_source(b"def (:\n", "x.py")[0][0] == "error"
    assert examine_source(b"x = 1\n" * (1 << 20), "x.py")[0][0] == "error"  # 6 MiB


@pytest.mark.parametrize("template", [
    "{{ ().__class__.__base__.__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ lipsum.__globals__['os'].popen('id') }}",
    "{{ x|attr('__class__') }}",
    "{{ x|attr('_' ~ '_class_' ~ '_') }}",
    "{{ x|attr(['_', '_class', '__']|join) }}",
    "{{ x|attr(name) }}",
    "{{ x['__cla' + 'ss__'] }}",
    "{{ x[('%c' % 95) * 2 ~ 'class' ~ ('%c' % 95) * 2] }}",
    "{{ self._TemplateReference__context }}",
    "{{ joiner.__init__ }}",
    "{{ request.application }}",
    "{% include 'other.j2' %}",
])
def test_templates_leaving_the_sandbox(template):
    assert [lv for lv, _ in examine_template(template)] == ["dangerous"], template


def test_benign_real_format_templates_are_clean():
    truth = load_truth(HERE / "tokenizer_config.json.truth.json")
    config = json.loads((HERE / "tokenizer_config.json").read_text())
    assert len(config["chat_template"]) == 4 and set(truth["rendered"]) == {
        t["name"] for t in config["chat_template"]}
    for t in config["chat_template"]:
        assert examine_template(t["template"]) == [], t["name"]


def test_template_without_jinja2_is_still_examined(monkeypatch):
    """Without jinja2: a plain template is clean, '__' in an expression dangerous, anything
    else not fully examined (an error line), never clean."""
    import builtins

    real = builtins.__import__

    def no_jinja(name, *a, **k):
        if name.startswith("jinja2"):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_jinja)
    assert examine_template("{{ cycler.__init__ }}")[0][0] == "dangerous"
    assert examine_template("{% for m in messages %}{{ m['content'] }}{% endfor %}") == []
    # what only the tree walk would judge is not called clean
    assert examine_template("{{ x[('a_b'[1]) * 2 ~ 'class'] }}")[0][0] == "error"


@pytest.mark.parametrize("config,nemo,level", [
    ({"_target_": "os.system", "command": "id"}, False, "dangerous"),
    ({"a": [{"_target_": "subprocess.run", "args": ["id"]}]}, False, "dangerous"),
    ({"_target_": "mypkg.build"}, False, "dangerous"),  # unvetted: instantiate calls it
    ({"_target_": "torch.optim.AdamW", "lr": 0.1}, False, None),
    ({"cls": "os.system", "params": {"command": "id"}}, True, "dangerous"),  # Hydra 0.x
    ({"cls": "some.Class"}, False, None),  # no params: not Hydra's
    ({"target": "nemo.collections.asr.models.EncDecCTCModel"}, True, None),
    ({"target": "nemo.collections.asr.models.EncDecCTCModel"}, False, None),  # not NeMo's
    ({"target": "mypkg.Model"}, True, "dangerous"),
    ({"encoder": {"_target_": "nemo.collections.asr.modules.ConvASREncoder"}}, False,
     "dangerous"),  # NeMo's namespace is vetted only in a NeMo model config
])
def test_config_targets(config, nemo, level):
    items = target_items(config, nemo)
    assert [lv for lv, _, _ in items] == ([level] if level else []), items


@pytest.mark.parametrize("node,level", [
    ({"class_name": "TFSMLayer", "config": {"name": "t", "filepath": "/tmp/sm"}}, "dangerous"),
    ({"module": "keras.layers", "class_name": "TorchModuleWrapper",
      "config": {"name": "w", "module": "not base64!"}}, "error"),
    ({"module": "evil", "class_name": "Lambda", "config": {"name": "l"}}, "dangerous"),
    ({"class_name": "JaxLayer", "config": {"name": "j", "call_fn": {
        "module": "my.jax", "class_name": "function", "config": "apply"}}}, "dangerous"),
    # tf.keras 2 op layers: a TensorFlow function / op / attribute named in the config
    ({"class_name": "TFOpLambda", "config": {"name": "t", "function": "io.write_file"}},
     "dangerous"),
    ({"class_name": "TFOpLambda", "config": {"name": "t", "function": "compat.v1.py_func"}},
     "dangerous"),
    ({"class_name": "TFOpLambda", "config": {"name": "t", "function": "math.add"}}, None),
    ({"class_name": "TFOpLambda", "config": {"name": "t", "function": "reshape"}}, None),
    ({"class_name": "SlicingOpLambda", "config": {"name": "t",
                                                  "function": "__operators__.getitem"}}, None),
    ({"class_name": "InstanceMethod", "config": {"name": "i", "attr_name": "__class__"}},
     "dangerous"),
    ({"class_name": "InstanceProperty", "config": {"name": "i", "attr_name": "flat_values"}},
     None),
    ({"class_name": "ClassMethod", "config": {"name": "c", "cls_symbol": "RaggedTensor",
                                              "method_name": "from_row_splits"}}, None),
    ({"class_name": "TensorFlowOpLayer", "config": {"name": "o", "node_def": {
        "op": "WriteFile"}}}, "dangerous"),
    ({"class_name": "TensorFlowOpLayer", "config": {"name": "o", "node_def": {
        "op": "AddV2"}}}, None),
])
def test_keras_code_carriers(node, level):
    items = config_items({"class_name": "Sequential", "config": {"name": "s", "layers": [node]}})
    assert [lv for lv, _ in items] == ([level] if level else []), items


# ---------------------------------------------------------------------------------------------
# the real loaders run the payloads (producer venvs)


def _run_in(tmp_path, python: Path, code: str, *args: str) -> bool:
    if not python.exists():
        pytest.skip(f"no producer venv at {python}")
    subprocess.run([str(python), "-c", code, *args], cwd=tmp_path, capture_output=True,
                   timeout=600, env={"KERAS_BACKEND": "torch", "PATH": "/usr/bin:/bin",
                        "PYTHONDONTWRITEBYTECODE": "1"})
    return (tmp_path / MARKER).exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["torch_module_wrapper_payload.keras", "lambda_payload.keras"])
def test_keras_load_model_runs_the_payload(tmp_path, name):
    code = ("import sys, keras; keras.saving.load_model(sys.argv[1], safe_mode=False)")
    assert _run_in(tmp_path, KERAS_PY, code, str(HERE / name))
    assert scan_file(HERE / name).verdict == "dangerous"


@pytest.mark.slow
def test_keras_benign_twin_loads_without_running_anything(tmp_path):
    code = ("import sys, keras; m = keras.saving.load_model(sys.argv[1], safe_mode=False); "
            "assert m.count_params() == 8")
    assert not _run_in(tmp_path, KERAS_PY, code, str(HERE / "torch_module_wrapper.keras"))


@pytest.mark.slow
def test_hydra_instantiate_runs_the_payload(tmp_path):
    code = ("import sys; from hydra.utils import instantiate; from omegaconf import OmegaConf; "
            "instantiate(OmegaConf.load(sys.argv[1]).model)")
    assert _run_in(tmp_path, HYDRA_OLD_PY, code, str(HERE / "hydra_payload.yaml"))
    assert scan_file(HERE / "hydra_payload.yaml").verdict == "dangerous"


@pytest.mark.slow
def test_unsandboxed_jinja_runs_the_template(tmp_path):
    code = ("import sys, json, jinja2; t = json.load(open(sys.argv[1]))['chat_template']; "
            "jinja2.Environment().from_string(t).render(messages=[])")
    assert _run_in(tmp_path, KERAS_PY, code, str(HERE / "tokenizer_config_payload.json"))


@pytest.mark.slow
def test_transformers_dynamic_module_runs_the_payload(tmp_path):
    """transformers' get_class_from_dynamic_module (from_pretrained(trust_remote_code=True)
    for an auto_map entry) imports the module, and its os.system runs."""
    code = ("import sys, os; os.environ['HF_MODULES_CACHE'] = os.path.abspath('m'); "
            "os.environ['HF_HUB_OFFLINE'] = '1'; from transformers.dynamic_module_utils import "
            "get_class_from_dynamic_module as g; g('modeling_demo.DemoModel', sys.argv[1])")
    assert _run_in(tmp_path, KERAS_PY, code, str(HERE / "remote_code_payload"))
    assert scan_file(HERE / "remote_code_payload" / "config.json").verdict == "dangerous"



ATOMS = ["x", "m", "'a_b'", "'_'", "'c'", "'%c'", "cycler", "bos_token", "1", "'\\x5f'",
         "messages", "namespace(a=1)", "'<|im_start|>'", "loop.index0"]
POSTFIX = [".y", "._y", ".__class__", "[0]", "['_a']", "['b']", "[k]", "[x ~ 'c']", "[1:]",
           "|attr('y')", "|attr(k)", "|list", "|join", "|replace('a', '')", "|format(95)",
           "|trim", "(1)"]
BINARY = [" ~ ", " + ", " * ", " % "]


def _expr(rng, depth=0):
    e = rng.choice(ATOMS)
    for _ in range(rng.randint(0, 2)):
        e += rng.choice(POSTFIX)
    if depth < 2 and rng.random() < 0.5:
        e = f"({e}{rng.choice(BINARY)}{_expr(rng, depth + 1)})"
    return e


@pytest.mark.parametrize("seed", range(3))
def test_the_fast_path_never_skips_what_the_walk_flags(seed):
    """The text pre-check that spares importing jinja2 is a superset of the syntax-tree walk:
    whenever the walk flags a template, the pre-check sends it to the walk."""
    import random

    from inspector.adapters.security import chat_template as C

    rng = random.Random(seed)
    flagged = clean = 0
    for _ in range(2000):
        text = f"{{% set k = {_expr(rng)} %}}{{{{ {_expr(rng)} }}}}"
        tree = C._parse(text)
        if isinstance(tree, str):  # a filter then a subscript: not Jinja syntax
            continue
        if C._walk(tree):
            flagged += 1
            assert not C._plain(text), text
        else:
            clean += 1
    assert flagged > 100 and clean > 20, (flagged, clean)


def test_oversized_and_broken_side_files_are_error_lines(tmp_path):
    """Sizes are checked before a file is read; a broken file is one error line."""
    big = tmp_path / "modeling_big.py"
    with open(big, "wb") as f:
        f.truncate(64 << 20)  # sparse: nothing is allocated unless it is read
    assert scan_file(big).verdict == "error"
    (tmp_path / "modeling_bad.py").write_text("def (:\n")
    (tmp_path / "config.json").write_text('{"auto_map": {"AutoModel": "modeling_bad.M"}')
    # (a template with none of what the walk looks for is clean unparsed: Jinja renders it or
    # fails, and nothing it holds reaches outside the sandbox)
    (tmp_path / "tokenizer_config.json").write_text(
        '{"chat_template": "{% for %}{{ x.__class__ }}"}')
    (tmp_path / "model_config.yaml").write_text("target: [unclosed\n")
    for name in ("modeling_bad.py", "config.json", "tokenizer_config.json",
                 "model_config.yaml"):
        res = scan_file(tmp_path / name)
        assert res.verdict == "error" and len(res.items) == 1, (name, res.to_dict())
    deep = tmp_path / "chat_template.jinja"
    deep.write_text("{{ x" + "[a ~ b]" * 5000 + " }}")
    assert scan_file(deep).verdict in ("dangerous", "error")


def test_listing_a_gguf_with_a_plain_template_does_not_import_jinja2(tmp_path):
    """The common path stays fast: a real-format template is cleared by the text check."""
    import sys

    from test_gguf import OK_KV, W, _gguf

    template = json.loads((HERE / "tokenizer_config.json").read_text())["chat_template"][0]
    path = tmp_path / "chat.gguf"
    path.write_bytes(_gguf(OK_KV + [("tokenizer.chat_template", 8, template["template"])], W))
    probe = ("import sys; from inspector.adapters.registry import load; load(sys.argv[1]); "
             "print('jinja2' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.split() == ["False"], out.stdout + out.stderr
