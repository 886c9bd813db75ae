"""Seed 000's breakdown of a Sockeye 1 RNN model, reproduced on real Sockeye 1.18 checkpoints.

The expected group counts are computed here from the seed's formulas (section 3 of
``/work/shared/seeds/000_*.txt``) and each model's own hyperparameters (its ``args.yaml`` and
vocabulary files); the tool only supplies the grouping of the real file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import inspector
from inspector.adapters.yaml_safe import load_yaml

from conftest import FIXTURES

SEED_GROUPS = ["enc2decinit", "hidden", "decoder_lx", "birnn", "encoder_lx", "io"]
BIG = Path("/work/big/sockeye_seed000")  # `make_fixtures.py --big`, not committed (319 MB)


def seed000_counts(cell: str, sn: int, tn: int, se: int, te: int, h: int, vs: int, vt: int):
    """Seed 000, section 3, with b -> (vs, vt), num_layers sn:tn, num_embed se:te, hidden h."""
    g = 4 if cell == "lstm" else 3  # decoder_lx/encoder_lx: s1 = 4h (lstm) or 3h (gru)
    half = g * h // 2  # birnn: s1 = 2h (lstm) or 3h/2 (gru); h2h s2 = h/2, i2h s2 = e
    counts = {
        # x = 0..2n-1 (lstm) or 0..n-1 (gru); s1 = s2 = h, plus the (h,) bias
        "enc2decinit": (2 * tn if cell == "lstm" else tn) * (h * h + h),
        "hidden": h * 2 * h + h,  # s1 = h, s2 = 2h
        # layer 0's i2h s2 is the seed's "?": its example shows 1024 = num_embed + hidden
        # (input feeding); layers 1.. take h. h2h s2 = h. Two (s1,) biases per layer.
        "decoder_lx": sum(g * h * ((te + h) if x == 0 else h) + g * h * h + 2 * g * h
                          for x in range(tn)),
        "birnn": 2 * (half * se + half * (h // 2) + 2 * half),
        # x = 0..n-2: "when n=1, these parameters do not exist"
        "encoder_lx": (sn - 1) * (2 * g * h * h + 2 * g * h),
        "io": vs * se + vt * te + vt + vt * h,  # source/target embed, target_output bias/weight
    }
    return {k: v for k, v in counts.items() if v}


def _hyper(model_dir: Path, vocab: tuple[int, int] | None = None):
    args = load_yaml(model_dir / "args.yaml")
    if vocab is None:
        vocab = tuple(len(json.loads((model_dir / f"vocab.{s}.0.json").read_text()))
                      for s in ("src", "trg"))
    (sn, tn), (se, te) = args["num_layers"], args["num_embed"]
    return args["rnn_cell_type"], sn, tn, se, te, args["rnn_num_hidden"], *vocab


def _groups(path: Path) -> dict[str, int]:
    report = inspector.listing(inspector.load(path))
    assert report["scheme"]["name"] == "sockeye-rnn"
    return {g["name"]: g["parameters"] for g in report["groups"]}


def test_seed000_example_numbers():
    # The seed's own example: lstm, 512:512, hidden 512, 2:2, vocabularies 49,410 / 42,767
    counts = seed000_counts("lstm", 2, 2, 512, 512, 512, 49410, 42767)
    assert sum(counts.values()) == 79638799  # "the total number of parameters is 79638799"


@pytest.mark.parametrize(
    "name",
    ["sockeye1_rnn_gru_l2-2_e8-6_h16_dot",  # dot attention: exactly the seed's categories
     "sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp",  # 1:1, so no encoder_lx; mlp attention on top
     "sockeye1_rnn_lstm_l2-2_e8-8_h16_coverage"],
)
def test_seed000_breakdown_on_real_sockeye1(name):
    model_dir = FIXTURES / "sockeye" / name
    expected = seed000_counts(*_hyper(model_dir))
    got = _groups(model_dir)
    assert {k: got[k] for k in SEED_GROUPS if k in got} == expected
    assert [k for k in got if k in SEED_GROUPS] == [k for k in SEED_GROUPS if k in expected]
    extra = set(got) - set(SEED_GROUPS)
    assert extra <= {"attention", "coverage"}  # what real mlp/coverage models add to the seed
    if name.endswith("_dot"):
        assert extra == set()  # dot attention has no parameters, like the seed's example


@pytest.mark.skipif(not (BIG / "model" / "params.best").exists(), reason="seed-000 model not built")
def test_seed000_breakdown_on_the_seed_sized_model():
    truth = json.loads((BIG / "truth.json").read_text())
    vocab = (truth["vocab_sizes"]["vocab.src.0.json"], truth["vocab_sizes"]["vocab.trg.0.json"])
    expected = seed000_counts(*_hyper(BIG / "model", vocab))
    got = _groups(BIG / "model")
    assert got == expected
    assert list(got) == SEED_GROUPS
    assert sum(got.values()) == int(truth["sockeye_logged_parameter_count"]) == 79638799
