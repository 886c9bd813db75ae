"""Closed forms: exact interpolation of predict(), checked against the seed and real models."""

from __future__ import annotations

from fractions import Fraction

import pytest

from inspector.adapters.errors import UsageError
from inspector.adapters.registry import load
from inspector.formulas import get
from inspector.formulas.closed_form import _set, closed_form, merge_symbols, parse_symbol
from inspector.formulas.core import Arch, HParam, Prediction, Symbol, expected
from inspector.formulas.sockeye_rnn import pair
from tests.conftest import FIXTURES, load_truth

SOCKEYE = FIXTURES / "sockeye"


def test_seed000_total_from_the_closed_form():
    arch = get("sockeye-rnn")
    form = closed_form(arch, {"rnn_attention_type": "dot"})
    # seed 000 section 4, finished: 79,638,799 at its settings
    assert form(vs=49410, vt=42767, se=512, te=512, h=512, sn=2, tn=2) == 79_638_799


# Tying and mhdot constrain the sizes: the symbols follow (one symbol for tied sizes, h a
# multiple of the heads).
TIED = {
    "trg-softmax": [Symbol("h", ("rnn_num_hidden", "num_embed:1"), start=2, step=2)],
    "src-trg-softmax": [Symbol("h", ("rnn_num_hidden", "num_embed:0", "num_embed:1"), start=2,
                               step=2),
                        Symbol("v", ("source_vocab_size", "target_vocab_size"), degree=1)],
    "mhdot": [Symbol("h", ("rnn_num_hidden",), start=8, step=8)],
    # src_trg: one table, so equal vocabularies and embedding sizes (model.py)
    "tied-src-trg": [Symbol("se", ("num_embed:0", "num_embed:1"), degree=1),
                     Symbol("v", ("source_vocab_size", "target_vocab_size"), degree=1)],
    # attention-based copying: the target vocabulary holds max_seq_len_source (10 + 1) pointers
    "copy": [Symbol("vt", ("target_vocab_size",), degree=1, start=12)],
}


@pytest.mark.parametrize("model", sorted(p.name for p in SOCKEYE.glob("sockeye1_rnn_*")))
def test_rnn_closed_form_reproduces_sockeyes_logged_count(model):
    arch = get("sockeye-rnn")
    hp = arch.from_checkpoint(load(str(SOCKEYE / model)))
    extra = next((v for k, v in sorted(TIED.items(), key=lambda kv: -len(kv[0]))
                  if f"_{k}" in model or f"-{k}" in model), [])
    form = closed_form(arch, hp, merge_symbols(arch, extra))
    se, te = pair(hp["num_embed"])
    sn, tn = pair(hp["num_layers"])
    point = {"vs": hp["source_vocab_size"], "vt": hp["target_vocab_size"], "se": se, "te": te,
             "h": hp["rnn_num_hidden"], "sn": sn, "tn": tn, "v": hp["source_vocab_size"]}
    value = form(**{s.name: point[s.name] for s in form.symbols})
    truth = load_truth(SOCKEYE / model / "params.best.truth.json")
    assert value == truth["sockeye_logged_parameter_count"]


def test_transformer_closed_form_matches_sockeye3_log():
    arch = get("sockeye-transformer")
    model = SOCKEYE / "sockeye3_transformer_l1-1_m16_h2_ff32"
    form = closed_form(arch, arch.from_checkpoint(load(str(model))))
    truth = load_truth(model / "params.best.truth.json")
    assert form(v=24, d=16, f=32, ne=1, nd=1) == truth["sockeye_logged_parameter_count"]


def _toy(kind: str) -> Arch:
    """A toy arch with a branch at n == 1 and a half-size tensor."""
    def predict(values):
        hp = arch.resolve(values)
        a, n = hp["a"], hp["n"]
        t = [expected("w", (a, a, n)), expected("half", (a // 2,))]
        if n > 1:  # a branch: an extra tensor only from two layers on
            t.append(expected("extra", (a,)))
        if kind == "cubic":
            t.append(expected("cube", (a, a, a)))
        return Prediction("toy", hp, t)

    arch = Arch("toy", "", (HParam("a", 2), HParam("n", 1)), predict,
                symbols=(Symbol("a", ("a",), degree=2, start=2, step=2),
                         Symbol("n", ("n",), degree=1)))
    return arch


def test_interpolation_is_exact_and_moves_past_branches():
    form = closed_form(_toy("plain"))
    assert form.valid_from == {"a": 2, "n": 2}  # n == 1 is a branch; the grid moved up
    assert form.text() == "a^2*n + (3/2)*a"
    assert form(a=10, n=3) == 10 * 10 * 3 + 10 + 5
    assert isinstance(form(a=4, n=2), Fraction)


def test_degree_too_low_is_an_error():
    with pytest.raises(UsageError, match="not a polynomial"):
        closed_form(_toy("cubic"))


def test_symbols_can_be_replaced():
    arch = get("sockeye-rnn")
    syms = merge_symbols(arch, [parse_symbol("b=source_vocab_size,target_vocab_size@1")])
    assert [s.name for s in syms][0] == "b" and "vs" not in [s.name for s in syms]
    assert _set(arch, {}, syms[:1], (7,))["target_vocab_size"] == 7
    with pytest.raises(UsageError):
        parse_symbol("no-equals")
