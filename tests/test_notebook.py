"""docs/examples/audit.ipynb runs top to bottom in a real IPython kernel and shows what it says.

The notebook is executed by nbclient with the ``python3`` kernel of this environment (ipykernel),
from ``docs/examples`` as Jupyter would (its first cell finds the repository root). Each cell the
assertions read is tagged in the notebook's metadata: ``html`` cells must display ``text/html``,
``count`` / ``verdict`` / ``diff`` / ``scan`` cells must print the numbers and words of the
producers' truth. The cells tagged ``new-api`` call ``inspector.check``, ``inspector.diff`` and
``inspector.scan``.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "docs" / "examples" / "audit.ipynb"


@pytest.fixture(scope="module")
def executed():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=60, kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()
    return nb


def _tagged(nb, tag: str) -> list:
    cells = [c for c in nb.cells if tag in c.get("metadata", {}).get("tags", [])]
    assert cells, f"no cell tagged {tag!r}"
    return cells


def _text(cell) -> str:
    parts = []
    for out in cell.outputs:
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.data.get("text/plain", ""))
    return "".join(parts)


def test_no_cell_raised(executed) -> None:
    for cell in executed.cells:
        if cell.cell_type == "code":
            assert not [o for o in cell.outputs if o.output_type == "error"], cell.source


def test_html_displays(executed) -> None:
    for cell in _tagged(executed, "html"):
        html = [o.data["text/html"] for o in cell.outputs
                if o.output_type in ("execute_result", "display_data") and "text/html" in o.data]
        assert html and "<table" in html[0], cell.source


def test_listing_counts_the_producers_parameters(executed) -> None:
    # the parameter count transformers gave for this Llama when it wrote the fixture
    (cell,) = _tagged(executed, "count")
    totals = ast.literal_eval(_text(cell))
    truth = json.loads((ROOT / "fixtures/dirs/hf_llama_bin.truth.json").read_text())
    assert totals["parameters"] == truth["parameter_count"] == 8784


def test_check_verdict(executed) -> None:
    # Sockeye logged 11,622 parameters for this model, and every group matches its args.yaml
    (cell,) = _tagged(executed, "verdict")
    assert _text(cell).split() == ["inspector.check/1", "verified"]


def test_diff_summary(executed) -> None:
    # MXNet's own comparison of the two checkpoints (13 changed; 12, the frozen encoder, equal)
    (cell,) = _tagged(executed, "diff")
    summary = ast.literal_eval(_text(cell))
    truth = json.loads((ROOT / "fixtures/diff/sockeye1_consecutive/pair.truth.json").read_text())
    equal = [t["equal"] for t in truth["tensors"]]
    assert (summary["changed"], summary["unchanged"]) == (equal.count(False), equal.count(True))
    assert summary["changed"] == 13
    assert summary["added"] == summary["removed"] == summary["reshaped"] == 0


def test_scan_summary(executed) -> None:
    (cell,) = _tagged(executed, "scan")
    shown = ast.literal_eval(_text(cell))
    verdicts = shown["verdicts"]
    assert sorted(verdicts) == ["fixtures/security/train_namespace.pt",
                                "fixtures/security/whole_module_legacy.pt"]
    for path, verdict in verdicts.items():
        truth = json.loads((ROOT / (path + ".truth.json")).read_text())
        # torch.load(weights_only=True) refused both files when the producer wrote them
        assert truth["torch_weights_only_loads"] is False
        user_classes = [g for g in truth["pickle_globals"] if g.startswith("__main__.")]
        if user_classes:
            # torch.save(model) of a class defined in the training script: a loader constructs
            # it, and a class of the user's own program cannot be vetted (docs/security.md)
            assert user_classes == ["__main__.TinyLM"] and verdict == "dangerous", path
        else:
            # the only global torch's own allowlist lacks is argparse.Namespace, which the
            # security page's vetted set holds (no pickle methods: BUILD fills __dict__)
            assert truth["torch_unsafe_globals"] == ["argparse.Namespace"], path
            assert verdict == "safe", path
    assert shown["exit_code"] == 1  # picklescan's code when any file is dangerous
