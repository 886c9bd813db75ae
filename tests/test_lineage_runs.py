"""Same-seed Sockeye runs are siblings of one initialisation, not parent and child.

fixtures/diff/sockeye1_consecutive holds "the first two checkpoints of one Sockeye 1 training
run" (``params.00001``, ``params.00002``; its pair.truth.json, written by sockeye.train with
``--seed 1 --fixed-param-strategy all_except_decoder``: the producer's own equality per tensor),
with no args.yaml beside them. fixtures/sockeye holds separate runs of the same seed, each with
the args.yaml sockeye.train wrote (``params: null``: trained from the seed). Written by
fixtures/diff/make_fixtures.py and fixtures/sockeye/make_fixtures.py: separate trainings.
"""

from __future__ import annotations

import json

from inspector.adapters.registry import load
from inspector.fingerprint import fingerprint
from inspector.lineage import run
from inspector.lineage_runs import frozen

from conftest import FIXTURES

RUN = FIXTURES / "diff" / "sockeye1_consecutive"
TRUTH = json.loads((RUN / "pair.truth.json").read_text())
SEEDED = ("sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp", "sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp_layernorm",
          "sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp_lt-ratio", "sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp_wn",
          "sockeye1_rnn_lstm_l1-1_e8-8_h16_coverage-fertility",
          "sockeye1_rnn_lnlstm_l2-1_e8-8_h16_mlp", "sockeye1_rnn_lnglstm_l2-1_e8-8_h16_mlp")


def test_the_runs_frozen_tensors_are_the_ones_its_producer_saw_unchanged():
    prints = [fingerprint(load(RUN / n)) for n in (TRUTH["a"], TRUTH["b"])]
    (held,) = frozen(prints).values()
    equal = {t["name"].removeprefix("arg:") for t in TRUTH["tensors"] if t["equal"]}
    informative = set(prints[0].informative())
    assert set(held) == equal & informative and held


def test_same_seed_runs_are_no_edge_and_the_runs_own_steps_stay(tmp_path):
    assert "--seed 1" in TRUTH["command"] and "--params" not in TRUTH["command"]
    d = FIXTURES / "sockeye"
    for name in SEEDED:
        args = (d / name / "args.yaml").read_text()
        assert "\nparams: null\n" in args and "\nseed: 1\n" in args
    forest, _ = run([str(RUN), *(str(d / n) for n in SEEDED)], cache_dir=str(tmp_path))
    got = [(e.parent.rsplit("/", 1)[-1], e.child.rsplit("/", 1)[-1], e.kind)
           for e in forest.edges]
    assert got == [(TRUTH["a"], TRUTH["b"], "continued-training")]
    bare = [u for u in forest.unresolved if "sockeye1_consecutive" in u["path"] + u["other"]]
    assert bare and all(u["kind"] == "shared-values" for u in bare)
    # each pair of the same architecture says why neither side can be the other's parent
    same = [u for u in bare if "neither can derive" in u["why"]]
    assert same and all("params null" in u["why"] and "unchanged over its steps" in u["why"]
                        for u in same)

