"""The import budget of the common path, as data: which modules listing a safetensors, MXNet,
GGUF or ONNX file may import (``show --format json`` and the table), checked in a fresh
interpreter. Timings cannot fail CI; an import that slips onto the path can, and this is where
it does: listing one format imports no other format's reader, no pickle verdict machinery and
none of the costly standard modules below.

The probe runs ``python -S`` (no ``site``: an editable install's finder imports ``pathlib`` and
``urllib`` before anything of ours would) with the source tree and the site-packages on
``sys.path``, takes ``sys.modules`` after ``import json, os, sys`` (what any listing needs) and
reports what the CLI's ``main`` added.
"""

from __future__ import annotations

import json
import site
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT

PROBE = """
import json, os, sys
sys.path[1:1] = sys.argv[1].split(os.pathsep)
base = set(sys.modules)
from inspector.cli import main
out, sys.stdout = sys.stdout, open(os.devnull, "w")
try:
    rc = main(sys.argv[2:])
except SystemExit as e:
    rc = e.code
sys.stdout = out
print(json.dumps({"rc": rc, "modules": sorted(set(sys.modules) - base)}))
"""

# The CLI and the listing, whatever the format: the verbs' argument parsers (each verb module
# imports argparse only; its work loads in run()), the report, the registry and the source.
CLI = {
    "inspector", "inspector.cli", "inspector.builtin_schemes", "inspector.compare", "inspector.grouping",
    "inspector.reports", "inspector.reports.listing", "inspector.reports.render",
    "inspector.reports.strict_json", "inspector.reports.text",
    "inspector.adapters", "inspector.adapters.errors", "inspector.adapters.model",
    "inspector.adapters.registry", "inspector.adapters.side_files",
    "inspector.adapters.quant_config", "inspector.adapters.source",
    "inspector.adapters.source_interface",
    # the refusal policy: the error types only, no verdict tables
    "inspector.adapters.security", "inspector.adapters.security.policy",
}
VERBS = "inspector.commands"
# The table adds its own renderers.
TABLE = {"inspector.reports.hyperparameters", "inspector.reports.plain_table"}
STDLIB = {
    "__future__", "argparse", "atexit", "collections.abc", "contextlib", "contextvars",
    "_contextvars", "errno", "gc", "gettext", "locale", "_locale", "math", "mmap", "struct",
    "_struct", "warnings", "binascii", "importlib", "importlib.util", "importlib._abc",
    "importlib._bootstrap", "importlib._bootstrap_external",
}
# format -> (a fixture, the modules its reader brings beyond the CLI's)
FORMATS = {
    "safetensors": ("safetensors/seed001_transformer_lm.safetensors",
                    {"inspector.adapters.safetensors", "inspector.adapters.dtypes",
                     "inspector.adapters.roles"}),
    "mxnet": ("mxnet/mxnet-1.9.1/gluon_save_parameters.params", {"inspector.adapters.mxnet"}),
    # a GGUF that stores a chat template (llama.cpp renders it): its sandbox check is GGUF's own
    "gguf": ("gguf/tiny_llama.gguf", {"inspector.adapters.gguf", "inspector.adapters.dtypes",
                                     "inspector.adapters.security.chat_template"}),
    "onnx": ("onnx/transformer_dynamo.onnx",
             {"inspector.adapters.onnx", "inspector.adapters.onnx_graph",
              "inspector.adapters.onnx_values", "inspector.adapters.protobuf",
              "inspector.adapters.dtypes", "array"}),
}
# Named so that a failure says what it is about: never on these listings' path.
FORBIDDEN = (
    # pathlib brings urllib.parse and ipaddress (5 ms): a listing works on the path's text;
    # locale comes with gettext's lookups of argparse's messages in an English locale;
    # the help text's conversion only when a help text is printed
    "pathlib", "urllib", "ipaddress", "fnmatch", "locale",
    "inspector.help_plain", "inspector.help_text",
    "dataclasses", "inspect", "typing", "ast", "pickle", "zipfile", "tarfile", "tokenize",
    "inspector.adapters.quantized", "inspector.adapters.redaction",
    "inspector.adapters.torch", "inspector.adapters.security.restricted_pickle",
    "inspector.adapters.security.verdicts", "inspector.adapters.security.lists",
    "inspector.adapters.security.examination",
)


def _probe(*argv: str) -> dict:
    paths = [str(ROOT), *site.getsitepackages()]
    proc = subprocess.run(
        [sys.executable, "-S", "-c", PROBE, ":".join(paths), *argv],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _fixture(relative: str) -> str:
    path = FIXTURES / relative
    if not path.exists():
        pytest.skip(f"no fixture {relative}")
    return str(path)


@pytest.mark.parametrize("table", [False, True], ids=["json", "table"])
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_listing_imports_only_its_budget(fmt, table):
    relative, own = FORMATS[fmt]
    argv = ["show", _fixture(relative)] if table else ["show", "--format", "json",
                                                        _fixture(relative)]
    result = _probe(*argv)
    assert result["rc"] == 0
    got = set(result["modules"])
    # the verb's own module and its shared options: the other verbs are not parsed
    verbs = {VERBS, f"{VERBS}.show", f"{VERBS}.options"}
    allowed = CLI | STDLIB | own | verbs | (TABLE if table else set())
    extra = sorted(m for m in got - allowed if not m.startswith("_"))
    forbidden = sorted(m for m in got if m in FORBIDDEN or any(
        m.startswith(f + ".") for f in FORBIDDEN))
    assert forbidden == [], forbidden
    assert extra == [], extra
    # the probe saw the listing: the format's own reader was imported
    assert own - {"array"} <= got, sorted(own - got)


ENTRY_PROBE = """
import json, os, sys
sys.path[1:1] = sys.argv[1].split(os.pathsep)
base = set(sys.modules)
sys.argv[1:] = ["--version"]
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
import atexit
atexit.register(lambda: os.write(2, json.dumps(sorted(set(sys.modules) - base)).encode()))
from inspector.entry import console_main
console_main()
"""


def test_the_command_answers_version_before_the_cli():
    """``inspector --version`` (the installed command's entry point) imports the package and
    the entry module (and how it exits) only: not the command line module, argparse or any reader."""
    paths = [str(ROOT), *site.getsitepackages()]
    proc = subprocess.run([sys.executable, "-S", "-c", ENTRY_PROBE, ":".join(paths)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    modules = set(json.loads(proc.stderr))
    ours = {m for m in modules if m.startswith("inspector")}
    # (inspector.adapters: the source tree maps its adapters/ directory in at import)
    assert ours <= {"inspector", "inspector.entry", "inspector.process_exit",
                    "inspector.adapters"}, sorted(ours)
    assert not {"argparse", "pathlib", "re", "json", "typing"} & modules, sorted(modules)


def test_version_imports_nothing_but_the_cli():
    result = _probe("--version")
    assert result["rc"] == 0
    ours = {m for m in result["modules"] if m.startswith("inspector")}
    assert ours == {"inspector", "inspector.cli", "inspector.adapters",
                    "inspector.adapters.errors"}, sorted(ours)
    assert not {"argparse", "pathlib", "typing", "dataclasses"} & set(result["modules"])


def _real_files():
    for base in (FIXTURES, ROOT / "tests" / "corpus"):
        for p in sorted(base.rglob("*")):
            if p.is_file() and p.stat().st_size:
                yield p


def test_file_gates_pass_every_file_their_sniff_claims():
    """Each FILE_GATES test is a necessary condition of its module's sniff: on every real file
    (fixtures and the hostile corpus) a sniff that claims the file has its gate pass."""
    from inspector.adapters import registry
    from inspector.adapters.errors import InspectorError
    from inspector.adapters.source import as_source

    claimed = {m: 0 for m in registry.FILE_GATES}
    for p in _real_files():
        source = as_source(p)
        head = source.head(registry.SNIFF_BYTES)
        for module, gate in registry.FILE_GATES.items():
            try:
                variant = registry._builtin_adapter(module).sniff(head, source)
            except (InspectorError, OSError, ValueError):
                continue
            if variant is not None:
                claimed[module] += 1
                assert gate(head, source.name), (p, module)
    # files of the gated formats were seen
    for module in ("safetensors", "gguf", "onnx", "mxnet", "dcp", "deepspeed", "ctranslate2"):
        assert claimed[f"inspector.adapters.{module}"], module
