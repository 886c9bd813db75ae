"""Hostile chat templates, Hugging Face folders, Hydra configs and HDF5 user blocks
(``tests/corpus/redteam5``, written and checked against the real loaders by
``make_redteam5.py``: ``redteam5.truth.json`` records, per file and loader, whether the payload
ran). Whatever a real loader executes, ``scan`` calls dangerous (exit 1); a checkpoint holding
it (the GGUF and HDF5 files, the folders, a folder given the template) is refused by ``show``
in one line and by ``inspector.load``. What no loader executes is never called dangerous."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import inspector
from inspector.adapters.security.scan import scan_file

from conftest import run_cli

HERE = Path(__file__).parent / "corpus" / "redteam5"
FILES = HERE / "files"
TRUTH = json.loads((HERE / "redteam5.truth.json").read_text())["files"]
EXECUTED = sorted(n for n, row in TRUTH.items() if "executed" in row.values())
QUIET = sorted(n for n in TRUTH if n not in EXECUTED)
CHECKPOINTS = [n for n in EXECUTED if n.startswith("hf_") or n.endswith((".gguf", ".h5"))]
# the name a template file has in a model folder, by its corpus name's ending
TEMPLATE_NAMES = ("tokenizer_config.json", "chat_template.json", "chat_template.jinja")


def verdicts(name: str) -> list[str]:
    path = FILES / name
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [scan_file(p).verdict for p in files]


def test_the_corpus_is_live() -> None:
    """The truth covers every file written, and the real loaders ran most payloads."""
    assert sorted(p.name for p in FILES.iterdir()) == sorted(TRUTH)
    assert len(EXECUTED) >= 20


@pytest.mark.parametrize("name", EXECUTED)
def test_scan_calls_what_a_loader_runs_dangerous(name: str) -> None:
    path = FILES / name
    assert "dangerous" in verdicts(name), name
    assert run_cli("scan", str(path)).returncode == 1


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_show_and_load_refuse(name: str) -> None:
    with pytest.raises(inspector.UnsafeContentError):
        inspector.load(FILES / name)
    proc = run_cli("show", str(FILES / name))
    assert proc.returncode == 2, proc.stdout[-500:]
    assert proc.stderr.count("\n") == 1 and "refused" in proc.stderr, proc.stderr


@pytest.mark.parametrize("name", [n for n in EXECUTED if n.endswith(TEMPLATE_NAMES)])
def test_a_folder_with_the_template_is_refused(name: str, tmp_path: Path) -> None:
    """The same template in a model folder, under the name transformers reads it by."""
    folder = tmp_path / "model"
    shutil.copytree(FILES / "hf_relative_import", folder)
    for p in folder.glob("*.py"):
        p.unlink()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    real = next(t for t in TEMPLATE_NAMES if name.endswith(t))
    shutil.copy(FILES / name, folder / real)
    with pytest.raises(inspector.UnsafeContentError):
        inspector.load(folder)


@pytest.mark.parametrize("name", QUIET)
def test_what_no_loader_runs_is_not_dangerous(name: str) -> None:
    assert "dangerous" not in verdicts(name), name


def test_a_nemo_prefix_does_not_vet_an_attribute_chain(tmp_path: Path) -> None:
    """Hydra's ``_locate`` imports the longest module prefix and walks the rest as attributes:
    ``nemo.collections.asr.os.system`` is ``os.system``, whatever prefix it starts with."""
    config = tmp_path / "model_config.yaml"
    for target, verdict in (("nemo.collections.asr.os.system", "dangerous"),
                            ("nemo.collections.asr.models.__builtins__.eval", "dangerous"),
                            ("nemo.collections.asr.models.EncDecCTCModel", "safe")):
        config.write_text(f"encoder:\n  _target_: {target}\n  _args_: [x]\n")
        assert scan_file(config).verdict == verdict, target
