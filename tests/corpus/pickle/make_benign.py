"""Benign files people hold that a pickle scanner must not call dangerous (issue 26, item 7).

Run with a Python that has torch 2.13 (CPU), numpy and deepspeed (DeepSpeed on CPU needs
``DS_ACCELERATOR=cpu``)::

    DS_ACCELERATOR=cpu /work/venvs/pickle-deepspeed/bin/python tests/corpus/pickle/make_benign.py

Every file is written by its real producer (``torch.distributed.checkpoint.save``, DeepSpeed's
``engine.save_checkpoint``, ``pickle.dumps`` of NumPy generators, a user ``enum.Enum``, a type
reference in protocol 2, ...). ``benign.truth.json`` records, per file, the globals the real
loader resolved (``find_class`` of the stdlib unpickler, or of ``torch.load(weights_only=False)``)
and the type of what it loaded: the loader ran the whole file.
"""

from __future__ import annotations

import enum
import io
import json
import os
import pickle
import shutil
import sys
import tempfile
import types
import warnings
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent / "benign"
warnings.filterwarnings("ignore")


class Color(enum.Enum):
    """A user Enum: its class is not on any allowlist."""

    RED = 1
    GREEN = "green"


class Perm(enum.IntFlag):
    R = 4
    W = 2


def _recorder(sink: list[str]) -> types.SimpleNamespace:
    class Rec(pickle.Unpickler):
        def find_class(self, module: str, name: str):  # noqa: ANN202
            sink.append(f"{module}.{name}")
            return super().find_class(module, name)

    return types.SimpleNamespace(Unpickler=Rec, load=pickle.load, __name__="recording_pickle")


def real_load(path: Path) -> dict:
    """What the real loader does with the file: the globals it resolved and what it built."""
    names: list[str] = []
    if path.name == ".metadata" or path.suffix == ".pkl":
        obj = _recorder(names).Unpickler(io.BytesIO(path.read_bytes())).load()
        loader = "pickle.loads"
    else:
        obj = torch.load(path, weights_only=False, pickle_module=_recorder(names))
        loader = "torch.load(weights_only=False)"
    return {"loader": loader, "globals": sorted(set(names)), "loaded": type(obj).__name__}


def write_pickles() -> None:
    for p in (2, 5):
        (HERE / f"numpy_default_rng_p{p}.pkl").write_bytes(
            pickle.dumps({"rng": np.random.default_rng(0)}, protocol=p))
    (HERE / "numpy_randomstate_p4.pkl").write_bytes(
        pickle.dumps({"rs": np.random.RandomState(1), "seq": np.random.SeedSequence(7)}, 4))
    Color.__module__ = Perm.__module__ = "user_enums"  # as a user's own module would name it
    sys.modules["user_enums"] = sys.modules[__name__]
    for p in range(6):
        (HERE / f"enum_member_p{p}.pkl").write_bytes(
            pickle.dumps({"color": Color.RED, "other": Color.GREEN, "perm": Perm.R}, protocol=p))
    # a type reference in protocol 2: the pickler writes builtins.int as __builtin__.long
    # (_compat_pickle.REVERSE_NAME_MAPPING), as Lightning hparams with `dtype=int` do
    (HERE / "py2_type_refs_p2.pkl").write_bytes(
        pickle.dumps({"dtype": int, "names": set(), "kind": str, "ok": bool}, protocol=2))


def write_len_call() -> None:
    """``builtins.len([])`` and ``builtins.abs(-3)`` called: pure builtins on inert arguments
    (hand-assembled opcodes; the real loader evaluates them to 0 and 3)."""
    data = (b"\x80\x02}q\x00(X\x01\x00\x00\x00nc__builtin__\nlen\n]\x85R"
            b"X\x01\x00\x00\x00ac__builtin__\nabs\nJ\xfd\xff\xff\xff\x85R"
            b"X\x01\x00\x00\x00mcbuiltins\nmax\nK\x01K\x02\x86Ru.")
    assert pickle.loads(data) == {"n": 0, "a": 3, "m": 2}
    (HERE / "pure_builtins_p2.pkl").write_bytes(data)


def write_dcp() -> None:
    import torch.distributed.checkpoint as dcp

    out = HERE / "dcp"
    shutil.rmtree(out, ignore_errors=True)
    model = torch.nn.Linear(3, 2)
    sd = {"model": model.state_dict(), "step": 3,
          "cl": torch.zeros(1, 2, 1, 1).to(memory_format=torch.channels_last)}
    dcp.save(sd, checkpoint_id=str(out))


def write_deepspeed() -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29571", RANK="0", WORLD_SIZE="1",
                      LOCAL_RANK="0")
    import deepspeed

    deepspeed.init_distributed(dist_backend="gloo")
    for stage, dtype in ((1, "bf16"), (3, "fp32")):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        cfg = {"train_batch_size": 2, "zero_optimization": {"stage": stage},
               "optimizer": {"type": "Adam", "params": {"lr": 1e-3, "torch_adam": True}}}
        if dtype == "bf16":
            cfg["bf16"] = {"enabled": True}
        engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                          config=cfg)
        x = torch.randn(2, 4, dtype=torch.bfloat16 if dtype == "bf16" else torch.float32)
        engine.backward(engine(x).float().sum())
        engine.step()
        with tempfile.TemporaryDirectory() as tmp:
            engine.save_checkpoint(tmp, tag="t")
            for f in sorted(Path(tmp, "t").glob("*.pt")):
                shutil.copy(f, HERE / f"deepspeed_zero{stage}_{dtype}_{f.name}")


def main() -> None:
    HERE.mkdir(parents=True, exist_ok=True)
    write_pickles()
    write_len_call()
    write_dcp()
    write_deepspeed()
    truth = {}
    for f in sorted(HERE.rglob("*")):
        if f.is_file() and f.suffix in (".pkl", ".pt", "") and f.name != "benign.truth.json":
            truth[str(f.relative_to(HERE))] = real_load(f)
    truth = {k: v for k, v in truth.items() if v["globals"] or k.endswith(".metadata")}
    (HERE / "benign.truth.json").write_text(json.dumps(
        {"producers": {"torch": torch.__version__, "numpy": np.__version__,
                       "python": sys.version.split()[0]}, "files": truth}, indent=1) + "\n")


if __name__ == "__main__":
    main()
