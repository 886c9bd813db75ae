"""Did consolidation keep my model? A training-stack checkpoint (DeepSpeed ZeRO, Megatron-LM
ranks, torch DCP) against the consolidated torch file its producer's own tool wrote
(``zero_to_fp32``, the state dict Megatron's ranks were cut from, ``dcp_to_torch_save``): every
parameter paired by name, values equal, nothing reshaped."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, run_cli

PAIRS = [
    (FIXTURES / "deepspeed" / "llama-z3" / "checkpoint-3",
     FIXTURES / "deepspeed" / "llama-z3.consolidated.pt"),  # ZeRO-3, 2 ranks
    (FIXTURES / "deepspeed" / "mlp-z1", FIXTURES / "deepspeed" / "mlp-z1.consolidated.pt"),
    (FIXTURES / "megatron" / "gpt_tp2_pp2", FIXTURES / "megatron" / "gpt_tp2_pp2.consolidated.pt"),
    (FIXTURES / "dcp" / "fsdp2", FIXTURES / "dcp" / "fsdp2.consolidated.pt"),
]


@pytest.mark.parametrize("a,b", PAIRS, ids=lambda p: p.name)
def test_consolidated_file_equals_the_checkpoint(a, b):
    r = run_cli("diff", str(a), str(b), "--values", "--role", "parameter", "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    s = doc["summary"]
    assert s["unchanged"] > 0 and s["removed"] == s["added"] == s["reshaped"] == 0, s
    assert s["retyped"] == s["changed"] == 0 and doc["values_changed"] == 0
    assert not doc["different"] and not doc["structural_difference"]
