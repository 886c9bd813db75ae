"""``inspector show`` output, byte for byte, on a few real fixtures (JSON and markdown).

The goldens in ``tests/golden/`` were recorded before the listing path was made fast (issue
18): speed work must not change one byte of the report (the tables were recorded later, after
issue 20 changed them deliberately, through tabulate alone: ``--regen`` turns the plain-cell
table writer off). They change only with a deliberate
change of the output; regenerate them with ``python tests/test_golden_listing.py --regen`` and
review the diff.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

import pytest

from inspector.cli import main

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"

# (golden stem, fixture path relative to the repo root, extra arguments)
CASES = [
    ("torch_ddp_lm", "fixtures/torch/ddp_transformer_lm.pt", ()),
    ("torch_legacy_lstm", "fixtures/torch/lstm_bidir_legacy.pt", ()),
    ("torch_dtype_zoo", "fixtures/torch/dtype_zoo.pt", ()),
    ("safetensors_dtype_zoo", "fixtures/safetensors/dtype_zoo.safetensors", ()),
    ("safetensors_sharded", "fixtures/safetensors/sharded/model.safetensors.index.json", ()),
    ("mxnet_csr", "fixtures/mxnet/mxnet-1.9.1/csr.params", ()),
    ("sockeye_rnn_per_layer",
     "fixtures/sockeye/sockeye1_rnn_lstm_l2-2_e8-8_h16_mlp_ctxgate_init-last_residual",
     ("--per-layer",)),
    ("sockeye_rnn", "fixtures/sockeye/sockeye1_rnn_lstm_l2-2_e8-8_h16_mlp_ctxgate_init-last_residual",
     ()),
    ("hf_llama_tied", "fixtures/hf/llama_bias_tied", ()),
    ("hf_gpt2_dir", "fixtures/dirs/hf_gpt2_safetensors", ("--groups",)),
    ("keras_weights_h5", "fixtures/keras/bidirectional_lstm.weights.h5", ()),
    ("keras2_lm_adam", "fixtures/keras/keras2_lm_adam.h5", ()),
]
FORMATS = {"json": "json", "markdown": "md", "table": "txt"}


def _show(path: str, fmt: str, extra: tuple[str, ...]) -> str:
    out = io.StringIO()
    cwd = os.getcwd()
    columns = os.environ.pop("COLUMNS", None)  # piped output: full names, no fitting
    os.chdir(ROOT)  # the report carries the path as given: keep it relative
    try:
        with contextlib.redirect_stdout(out):
            code = main(["show", path, "--format", fmt, *extra])
    finally:
        os.chdir(cwd)
        if columns is not None:
            os.environ["COLUMNS"] = columns
    assert code == 0
    return out.getvalue()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("stem", "path", "extra"), CASES, ids=[c[0] for c in CASES])
def test_listing_is_unchanged(stem: str, path: str, extra: tuple[str, ...], fmt: str) -> None:
    expected = (GOLDEN / f"{stem}.{FORMATS[fmt]}").read_text(encoding="utf-8")
    assert _show(path, fmt, extra) == expected


if __name__ == "__main__" and sys.argv[1:] == ["--regen"]:
    # Recorded through tabulate alone: the plain-cell table writer must give the same bytes.
    import inspector.reports.plain_table as plain

    plain.plain_table = lambda *args, **kwargs: None
    GOLDEN.mkdir(exist_ok=True)
    for stem, path, extra in CASES:
        for fmt, ext in FORMATS.items():
            (GOLDEN / f"{stem}.{ext}").write_text(_show(path, fmt, extra), encoding="utf-8")
