"""The torch adapter: hand-assembled pickles (hostile and benign) and torch's own fixtures.

No torch here: pickles are assembled opcode by opcode (as fickling does), wrapped in the zip or
legacy container the way torch.save lays them out, and read back. Hostile payloads name
os.system, builtins.eval, subprocess.Popen ... through every opcode that can call something;
each test asserts that the marker file the payload would create does not exist and that the
finding names the global. The real fixtures (written by torch 2.13) are compared against the
ground truth recorded by torch when they were written.
"""

from __future__ import annotations

import json
import pickle
import struct
import subprocess
import sys
import zipfile
from collections import OrderedDict
from pathlib import Path

import pytest

import inspector.adapters.torch as T
from inspector.adapters.errors import FormatError
from inspector.adapters.model import Role
from inspector.adapters.registry import read_head
from inspector.adapters.security.restricted_pickle import scan_globals
from inspector.adapters.source import LocalSource

from conftest import run_cli
from hostile import assert_clean_error

ROOT = Path(__file__).resolve().parent.parent
TORCH_FIXTURES = ROOT / "fixtures" / "torch"

# ---------------------------------------------------------------------------------------------
# a tiny pickle assembler (opcodes from Lib/pickletools.py)

PROTO2 = b"\x80\x02"
PROTO4 = b"\x80\x04"
MARK, STOP, TUPLE, REDUCE, BUILD = b"(", b".", b"t", b"R", b"b"
EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE, SETITEMS, SETITEM = b"}", b"]", b")", b"u", b"s"
APPEND, APPENDS, NONE, NEWFALSE, NEWTRUE = b"a", b"e", b"N", b"\x89", b"\x88"
BINPERSID, NEWOBJ, NEWOBJ_EX, STACK_GLOBAL, OBJ = b"Q", b"\x81", b"\x92", b"\x93", b"o"


def s(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def i(value: int) -> bytes:
    return b"J" + struct.pack("<i", value)


def g(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def sg(module: str, name: str) -> bytes:
    """STACK_GLOBAL (protocol 4): module and name come from the stack."""
    return s(module) + s(name) + STACK_GLOBAL


def tup(*items: bytes) -> bytes:
    return MARK + b"".join(items) + TUPLE


def put(n: int) -> bytes:
    return b"q" + bytes([n])


def get(n: int) -> bytes:
    return b"h" + bytes([n])


def pid(key: str, numel: int, stype=("torch", "FloatStorage"), legacy=False) -> bytes:
    extra = NONE if legacy else b""
    return tup(s("storage"), g(*stype), s(key), s("cpu"), i(numel), extra) + BINPERSID


def tensor(
    key: str,
    numel: int,
    shape,
    stride=None,
    offset=0,
    legacy=False,
    stype=("torch", "FloatStorage"),
) -> bytes:
    """torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())."""
    if stride is None:
        stride, acc = [], 1
        for d in reversed(shape):
            stride.insert(0, acc)
            acc *= d
    return (
        g("torch._utils", "_rebuild_tensor_v2")
        + MARK
        + pid(key, numel, stype, legacy)
        + i(offset)
        + tup(*map(i, shape))
        + tup(*map(i, stride))
        + NEWFALSE
        + g("collections", "OrderedDict")
        + EMPTY_TUPLE
        + REDUCE
        + TUPLE
        + REDUCE
    )


def dict_of(*pairs: tuple[str, bytes]) -> bytes:
    return EMPTY_DICT + MARK + b"".join(s(k) + v for k, v in pairs) + SETITEMS


def pkl(body: bytes, proto: bytes = PROTO2) -> bytes:
    return proto + body + STOP


# ---------------------------------------------------------------------------------------------
# containers


def write_zip(
    path: Path,
    data_pkl: bytes,
    storages: dict[str, bytes],
    root: str = "archive",
    extra: dict[str, bytes] | None = None,
) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{root}/data.pkl", data_pkl)
        z.writestr(f"{root}/byteorder", b"little")
        for key, raw in storages.items():
            z.writestr(f"{root}/data/{key}", raw)
        for name, raw in (extra or {}).items():
            z.writestr(name, raw)
        z.writestr(f"{root}/version", b"3\n")
    return path


def write_legacy(
    path: Path, main: bytes, keys: list[str], storages: list[tuple[int, bytes]]
) -> Path:
    sys_info = {
        "protocol_version": 1001,
        "little_endian": True,
        "type_sizes": {"short": 2, "int": 4, "long": 4},
    }
    blob = (
        pickle.dumps(T.MAGIC_NUMBER, protocol=2)
        + pickle.dumps(1001, protocol=2)
        + pickle.dumps(sys_info, protocol=2)
        + main
        + pickle.dumps(keys, protocol=2)
        + b"".join(struct.pack("<q", n) + raw for n, raw in storages)
    )
    path.write_bytes(blob)
    return path


def open_file(path: Path):
    variant = T.sniff(read_head(LocalSource(path)), LocalSource(path))
    assert variant is not None, "sniff did not recognise the file"
    return T.open_checkpoint(LocalSource(path), variant)


def floats(n: int) -> bytes:
    return struct.pack(f"<{n}f", *range(n))


# ---------------------------------------------------------------------------------------------
# benign files


def test_zip_state_dict_names_shapes_offsets(tmp_path):
    body = dict_of(("enc.weight", tensor("0", 6, (2, 3))), ("enc.bias", tensor("1", 2, (2,))))
    path = write_zip(
        tmp_path / "m.pt", pkl(body), {"0": floats(6), "1": floats(2)}, root="my_model"
    )
    ck = open_file(path)
    assert ck.format == "torch-zip"
    assert [(t.stored_name, t.shape, t.dtype, t.role) for t in ck.tensors] == [
        ("enc.weight", (2, 3), "float32", Role.PARAMETER),
        ("enc.bias", (2,), "float32", Role.PARAMETER),
    ]
    assert ck.metadata["zip_root"] == "my_model"
    assert ck.metadata["byteorder"] == "little"
    assert ck.metadata["pickle_protocol"] == 2
    assert ck.findings == []
    # the offset is where zipfile put the record's bytes
    with zipfile.ZipFile(path) as z:
        for t in ck.tensors:
            info = z.getinfo(f"my_model/data/{t.storage}")
            raw = path.read_bytes()
            nlen, elen = struct.unpack_from("<HH", raw, info.header_offset + 26)
            assert t.offset == info.header_offset + 30 + nlen + elen
            assert raw[t.offset : t.offset + t.nbytes] == z.read(f"my_model/data/{t.storage}")
    assert ck.tensors[0].extra["stride"] == (3, 1)
    assert ck.tensors[0].nbytes == 24


def test_views_and_ties_share_identity(tmp_path):
    # the same tensor object twice (memo) is one identity; a view with another offset is not
    body = (
        EMPTY_DICT
        + MARK
        + s("a")
        + tensor("0", 8, (2, 2))
        + put(50)
        + s("b")
        + get(50)
        + s("c")
        + tensor("0", 8, (2, 2), offset=4)
        + SETITEMS
    )
    ck = open_file(write_zip(tmp_path / "t.pt", pkl(body), {"0": floats(8)}))
    assert ck.shared_with() == {"a": ("b",), "b": ("a",)}
    a, _, c = ck.tensors
    assert c.offset == a.offset + 16 and c.extra["storage_offset"] == 4
    assert ck.totals()["parameters"] == 8  # a (= b) 4 + c 4


def test_new_dtype_through_untyped_storage(tmp_path):
    # torch 2.x: _rebuild_tensor_v3(UntypedStorage, ..., torch.float8_e4m3fn); numel = bytes
    t3 = (
        g("torch._utils", "_rebuild_tensor_v3")
        + MARK
        + pid("0", 4, ("torch.storage", "UntypedStorage"))
        + i(0)
        + tup(i(4))
        + tup(i(1))
        + NEWFALSE
        + g("collections", "OrderedDict")
        + EMPTY_TUPLE
        + REDUCE
        + g("torch", "float8_e4m3fn")
        + TUPLE
        + REDUCE
    )
    ck = open_file(write_zip(tmp_path / "f8.pt", pkl(dict_of(("w", t3))), {"0": b"\0" * 4}))
    (t,) = ck.tensors
    assert (t.dtype, t.shape, t.nbytes) == ("float8_e4m3fn", (4,), 4)


def test_pickled_module_roles_and_names(tmp_path):
    # torch.save(model): the class is a placeholder; BUILD carries _parameters/_buffers/_modules
    param = (
        g("torch._utils", "_rebuild_parameter")
        + tup(
            tensor("0", 6, (2, 3)), NEWTRUE, g("collections", "OrderedDict") + EMPTY_TUPLE + REDUCE
        )
        + REDUCE
    )
    child = (
        g("torch.nn.modules.linear", "Linear")
        + EMPTY_TUPLE
        + NEWOBJ
        + dict_of(
            ("_parameters", dict_of(("weight", param), ("bias", NONE))),
            ("_buffers", EMPTY_DICT),
            ("_modules", EMPTY_DICT),
        )
        + BUILD
    )
    top = (
        g("mylib.models", "Net")
        + EMPTY_TUPLE
        + NEWOBJ
        + dict_of(
            ("_parameters", EMPTY_DICT),
            ("_buffers", dict_of(("pos", tensor("1", 4, (4,))))),
            ("_modules", dict_of(("fc", child))),
        )
        + BUILD
    )
    ck = open_file(write_zip(tmp_path / "mod.pt", pkl(top), {"0": floats(6), "1": floats(4)}))
    assert [(t.stored_name, t.role) for t in ck.tensors] == [
        ("pos", Role.BUFFER),
        ("fc.weight", Role.PARAMETER),
    ]
    assert ck.metadata["container"] == "module"
    # the user's class runs with the file's data (dangerous: the listing refuses it by
    # default); torch's Linear is vetted (Module.__setstate__)
    names = {f.message.split()[2]: f.severity for f in ck.findings}
    assert names == {"mylib.models.Net": "danger"}


def test_training_dict_names_roles_hyperparameters(tmp_path):
    model = dict_of(
        ("module.enc.weight", tensor("0", 4, (2, 2))),
        ("module.bn.running_mean", tensor("1", 2, (2,))),
    )
    optim = dict_of(
        (
            "state",
            EMPTY_DICT + MARK + i(0) + dict_of(("exp_avg", tensor("2", 4, (2, 2)))) + SETITEMS,
        ),
        ("param_groups", EMPTY_LIST + dict_of(("lr", b"G" + struct.pack(">d", 0.1))) + APPEND),
    )
    args = (
        g("argparse", "Namespace")
        + EMPTY_TUPLE
        + NEWOBJ
        + dict_of(("layers", i(2)), ("name", s("x")))
        + BUILD
    )
    body = dict_of(
        ("model", model),
        ("optimizer", optim),
        ("epoch", i(3)),
        ("args", args),
        ("rng", tensor("3", 2, (2,))),
    )
    storages = {"0": floats(4), "1": floats(2), "2": floats(4), "3": floats(2)}
    ck = open_file(write_zip(tmp_path / "train.pt", pkl(body), storages))
    got = [(t.stored_name, t.name, t.role) for t in ck.tensors]
    assert got == [
        ("model.module.enc.weight", "enc.weight", Role.PARAMETER),
        ("model.module.bn.running_mean", "bn.running_mean", Role.BUFFER),
        ("optimizer.state.0.exp_avg", "optimizer.state.0.exp_avg", Role.OPTIMIZER),
        ("rng", "rng", Role.OTHER),
    ]
    assert ck.hyperparameters == {"epoch": 3, "args": {"layers": 2, "name": "x"}}
    assert ck.metadata["container"] == "training"
    assert ck.findings == []  # argparse.Namespace is vetted (constructed, __dict__ filled)


def test_buffer_table_needs_4d_attn_bias(tmp_path):
    body = dict_of(
        ("h.0.attn.bias", tensor("0", 16, (1, 1, 4, 4))),
        ("h.0.mlp.attn.bias", tensor("1", 4, (4,))),
    )
    ck = open_file(write_zip(tmp_path / "gpt.pt", pkl(body), {"0": floats(16), "1": floats(4)}))
    assert [t.role for t in ck.tensors] == [Role.BUFFER, Role.PARAMETER]


def test_legacy_offsets_are_exact(tmp_path):
    body = dict_of(
        ("w", tensor("k1", 3, (3,), legacy=True)), ("v", tensor("k2", 2, (2,), legacy=True))
    )
    path = write_legacy(
        tmp_path / "old.pt", pkl(body), ["k2", "k1"], [(2, floats(2)), (3, floats(3))]
    )
    ck = open_file(path)
    assert ck.format == "torch-legacy"
    raw = path.read_bytes()
    end = len(raw)
    # k2 comes first after the key list, then k1 (3 floats) ends the file
    w, v = ck.tensors
    assert w.offset == end - 12 and raw[w.offset :] == floats(3)
    assert v.offset == end - 12 - 8 - 8
    assert raw[v.offset : v.offset + 8] == floats(2)


def test_legacy_sniffed_in_protocol_4(tmp_path):
    path = tmp_path / "p4.pt"
    path.write_bytes(pickle.dumps(T.MAGIC_NUMBER, protocol=4) + b"rest")
    assert T.sniff(read_head(LocalSource(path)), LocalSource(path)) == "legacy"


# ---------------------------------------------------------------------------------------------
# hostile files: nothing runs, the tensors are still listed, the findings name the global


def _payloads(marker: Path) -> dict[str, tuple[bytes, bytes, str]]:
    """name -> (value opcodes, protocol, the global the finding must name)."""
    cmd = f"touch {marker}"
    code = f"open({str(marker)!r}, 'w').write('pwned')"
    argv = EMPTY_LIST + MARK + s("touch") + s(str(marker)) + APPENDS
    return {
        "global_reduce": (g("os", "system") + tup(s(cmd)) + REDUCE, PROTO2, "os.system"),
        "posix_reduce": (g("posix", "system") + tup(s(cmd)) + REDUCE, PROTO2, "posix.system"),
        "stack_global_eval": (
            sg("builtins", "eval") + tup(s(code)) + REDUCE,
            PROTO4,
            "builtins.eval",
        ),
        "py2_builtin_exec": (
            g("__builtin__", "exec") + tup(s(code)) + REDUCE,
            PROTO2,
            "__builtin__.exec",
        ),
        "inst_popen": (MARK + argv + b"isubprocess\nPopen\n", PROTO2, "subprocess.Popen"),
        "obj_popen": (MARK + g("subprocess", "Popen") + argv + OBJ, PROTO2, "subprocess.Popen"),
        "newobj_popen": (g("subprocess", "Popen") + tup(argv) + NEWOBJ, PROTO2, "subprocess.Popen"),
        "newobj_ex_popen": (
            g("subprocess", "Popen") + tup(argv) + EMPTY_DICT + NEWOBJ_EX,
            PROTO4,
            "subprocess.Popen",
        ),
        "getattr_chain": (
            g("builtins", "getattr")
            + tup(g("builtins", "__import__") + tup(s("os")) + REDUCE, s("system"))
            + REDUCE
            + tup(s(cmd))
            + REDUCE,
            PROTO2,
            "builtins.getattr",
        ),
        "build_setstate": (
            g("os", "system")
            + tup(s(cmd))
            + REDUCE
            + dict_of(("x", s(cmd)))
            + BUILD
            + EMPTY_DICT
            + BUILD,
            PROTO2,
            "os.system",
        ),
        "reconstructor": (
            g("copyreg", "_reconstructor")
            + tup(g("os", "system"), g("builtins", "object"), NONE)
            + REDUCE,
            PROTO2,
            "os.system",
        ),
        "runpy": (
            g("runpy", "_run_code") + tup(s(code), EMPTY_DICT) + REDUCE,
            PROTO2,
            "runpy._run_code",
        ),
    }


PAYLOAD_NAMES = list(_payloads(Path("/x")))


def _evil_file(tmp_path: Path, container: str, value: bytes, proto: bytes) -> Path:
    """A state dict holding one real tensor 'weight' and the payload under 'evil'."""
    legacy = container == "legacy"
    body = dict_of(("weight", tensor("0", 4, (2, 2), legacy=legacy)), ("evil", value))
    if legacy:
        return write_legacy(tmp_path / "evil.pt", pkl(body, proto), ["0"], [(4, floats(4))])
    return write_zip(tmp_path / "evil.pt", pkl(body, proto), {"0": floats(4)})


@pytest.mark.parametrize("container", ["zip", "legacy"])
@pytest.mark.parametrize("payload", PAYLOAD_NAMES)
def test_hostile_globals_are_inert(tmp_path, container, payload):
    marker = tmp_path / "pwned"
    value, proto, global_name = _payloads(marker)[payload]
    path = _evil_file(tmp_path, container, value, proto)
    ck = open_file(path)
    assert not marker.exists(), "the payload ran"
    assert [(t.stored_name, t.shape) for t in ck.tensors] == [("weight", (2, 2))]
    flagged = {f.message.split()[2]: f.severity for f in ck.findings}
    assert flagged.get(global_name) == "danger", ck.findings
    listed = {x["name"]: x["allowed"] for x in ck.metadata["pickle_globals"]}
    assert listed[global_name] is False
    assert listed["torch._utils._rebuild_tensor_v2"] is True
    # the adapter's record of globals agrees with a static scan of the same bytes
    if container == "zip":
        data = zipfile.ZipFile(path).read("archive/data.pkl")
        assert {n for n, _ in scan_globals(data)} == set(listed)


def test_placeholder_records_args_for_hyperparameters(tmp_path):
    marker = tmp_path / "pwned"
    body = dict_of(
        ("model", dict_of(("w", tensor("0", 1, (1,))))),
        ("cfg", g("os", "system") + tup(s(f"touch {marker}")) + REDUCE),
    )
    ck = open_file(write_zip(tmp_path / "h.pt", pkl(body), {"0": floats(1)}))
    assert ck.hyperparameters == {"cfg": f"os.system('touch {marker}')"}
    assert not marker.exists()


def test_ext_opcode_is_refused(tmp_path):
    body = dict_of(("w", tensor("0", 1, (1,))), ("e", b"\x82\x01"))
    path = write_zip(tmp_path / "ext.pt", pkl(body), {"0": floats(1)})
    with pytest.raises(FormatError, match="EXT"):
        open_file(path)


def test_huge_bytearray_is_refused_not_allocated(tmp_path):
    body = dict_of(
        ("w", tensor("0", 1, (1,))),
        ("b", g("builtins", "bytearray") + tup(b"\x8a\x05\x00\x00\x00\x00\x01") + REDUCE),
    )
    path = write_zip(tmp_path / "ba.pt", pkl(body), {"0": floats(1)})
    with pytest.raises(FormatError, match="bytearray"):
        open_file(path)


def test_out_of_band_buffer_is_refused(tmp_path):
    body = dict_of(("w", tensor("0", 1, (1,))), ("b", b"\x97"))  # NEXT_BUFFER
    path = write_zip(tmp_path / "oob.pt", pkl(body, b"\x80\x05"), {"0": floats(1)})
    with pytest.raises(FormatError, match="out-of-band"):
        open_file(path)


def test_deep_nesting_is_a_format_error(tmp_path):
    depth = T.MAX_DEPTH + 50
    body = EMPTY_LIST * depth + tensor("0", 1, (1,)) + APPEND * depth
    path = write_zip(tmp_path / "deep.pt", pkl(body), {"0": floats(1)})
    with pytest.raises(FormatError, match="nest deeper"):
        open_file(path)


def test_shared_containers_cannot_expand_exponentially(tmp_path):
    # l0 = [t]; l(n+1) = [ln, ln]: 2**40 paths to one tensor in a few hundred bytes
    body = EMPTY_LIST + tensor("0", 1, (1,)) + APPEND + put(0)
    for n in range(40):
        body += EMPTY_LIST + MARK + get(n) + get(n) + APPENDS + put(n + 1)
    path = write_zip(tmp_path / "bomb.pt", pkl(body), {"0": floats(1)})
    with pytest.raises(FormatError, match="too many entries"):
        open_file(path)


def test_cycles_terminate(tmp_path):
    body = EMPTY_LIST + put(0) + MARK + tensor("0", 1, (1,)) + get(0) + APPENDS
    ck = open_file(write_zip(tmp_path / "cycle.pt", pkl(body), {"0": floats(1)}))
    assert [t.stored_name for t in ck.tensors] == ["0"]


# ---------------------------------------------------------------------------------------------
# broken files: one clear FormatError naming the problem


def test_truncated_zip(tmp_path):
    path = write_zip(
        tmp_path / "cut.pt", pkl(dict_of(("w", tensor("0", 4, (4,))))), {"0": floats(4)}
    )
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(FormatError, match="truncated") as e:
        T.open_checkpoint(LocalSource(path), "zip")
    assert str(path) in str(e.value)


def test_zip_without_data_pkl_says_what_it_has(tmp_path):
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("config.json", "{}")
        z.writestr("model.weights.h5", b"\x89HDF")
    assert T.sniff(read_head(LocalSource(path)), LocalSource(path)) is None  # not ours: e.g. a Keras archive
    with pytest.raises(FormatError, match="no <root>/data.pkl.*config.json, model.weights.h5"):
        T.open_checkpoint(LocalSource(path), "zip")


def test_missing_storage_record(tmp_path):
    body = dict_of(("a", tensor("0", 1, (1,))), ("b", tensor("1", 1, (1,))))
    path = write_zip(tmp_path / "miss.pt", pkl(body), {"0": floats(1)})
    with pytest.raises(FormatError, match="storage '1'.*archive/data/1"):
        open_file(path)


def test_storage_record_smaller_than_declared(tmp_path):
    path = write_zip(
        tmp_path / "small.pt", pkl(dict_of(("a", tensor("0", 6, (6,))))), {"0": floats(2)}
    )
    with pytest.raises(FormatError, match="holds 8 bytes.*6 x float32 = 24"):
        open_file(path)


def test_view_outside_its_storage(tmp_path):
    body = dict_of(("a", tensor("0", 4, (2, 2), offset=2)))
    path = write_zip(tmp_path / "view.pt", pkl(body), {"0": floats(4)})
    with pytest.raises(
        FormatError, match="tensor 'a': view .* needs 24 bytes of storage '0', which holds 16"
    ):
        open_file(path)


def test_storage_that_is_not_a_storage(tmp_path):
    bad = (
        g("torch._utils", "_rebuild_tensor_v2")
        + tup(
            g("torch.storage", "_load_from_bytes") + tup(s("x")) + REDUCE,
            i(0),
            tup(i(1)),
            tup(i(1)),
            NEWFALSE,
            NONE,
        )
        + REDUCE
    )
    path = write_zip(tmp_path / "ns.pt", pkl(dict_of(("a", bad))), {})
    with pytest.raises(FormatError, match="placeholder for torch.storage._load_from_bytes"):
        open_file(path)


def test_legacy_storage_runs_past_end(tmp_path):
    body = dict_of(("w", tensor("k", 1000, (1000,), legacy=True)))
    path = write_legacy(tmp_path / "cut.pt", pkl(body), ["k"], [(1000, floats(10))])
    with pytest.raises(FormatError, match="storage 'k' declares 1000 x float32 .* past the end"):
        open_file(path)


def test_legacy_key_list_must_match(tmp_path):
    body = dict_of(("w", tensor("k", 1, (1,), legacy=True)))
    path = write_legacy(tmp_path / "keys.pt", pkl(body), ["other"], [(1, floats(1))])
    with pytest.raises(FormatError, match="storage 'k' is used by the pickle but missing"):
        open_file(path)


def test_plain_pickle_is_read_for_its_globals(tmp_path):
    """A plain pickle holds no tensors, but its globals get verdicts like any data.pkl's."""
    path = tmp_path / "x.pkl"
    path.write_bytes(pickle.dumps({"a": 1, "b": OrderedDict()}, protocol=2))
    assert T.sniff(read_head(LocalSource(path)), LocalSource(path)) == "pickle"
    ck = T.open_checkpoint(LocalSource(path), "pickle")
    assert ck.format == "pickle" and ck.tensors == [] and ck.findings == []
    assert [g["verdict"] for g in ck.metadata["pickle_globals"]] == ["safe"]


def test_tar_format_is_refused_clearly(tmp_path):
    import io
    import tarfile

    path = tmp_path / "old.tar"
    with tarfile.open(path, "w") as tar:  # a real tar header (checksum), as torch.load needs
        info = tarfile.TarInfo("sys_info")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"}"))
    assert T.sniff(read_head(LocalSource(path)), LocalSource(path)) == "tar"
    with pytest.raises(FormatError, match="tar"):
        T.open_checkpoint(LocalSource(path), "tar")


# ---------------------------------------------------------------------------------------------
# discipline and real fixtures


def test_import_pulls_in_neither_torch_nor_numpy():
    code = "import sys, inspector.adapters.torch; print(sorted({'torch', 'numpy'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


TRUTHS = sorted(TORCH_FIXTURES.rglob("*.pt.truth.json")) + sorted(
    TORCH_FIXTURES.rglob("*.bin.truth.json")
)


@pytest.mark.skipif(not TRUTHS, reason="no torch fixtures")
@pytest.mark.parametrize("truth_path", TRUTHS, ids=lambda p: p.name)
def test_real_fixture_matches_torch_truth(truth_path):
    truth = json.loads(truth_path.read_text())
    path = truth_path.with_name(truth_path.name[: -len(".truth.json")])
    ck = open_file(path)
    assert ck.format == truth["format"]
    want = truth["tensors"]
    assert [t.stored_name for t in ck.tensors] == [w["stored_name"] for w in want]
    storages = {x["key"]: x for x in truth.get("storages", [])}
    legacy = {x["key"]: x for x in truth.get("legacy", {}).get("storage_records", [])}
    for t, w in zip(ck.tensors, want, strict=True):
        assert list(t.shape) == w["shape"], t.stored_name
        assert t.dtype == w["dtype"], t.stored_name
        assert t.numel == w["numel"], t.stored_name
        if truth.get("parameter_count") is not None:
            assert t.role.value == w["role"], t.stored_name
        if "stride" not in w:  # make_nn_fixtures.py records names, shapes, dtypes and roles
            continue
        assert list(t.extra["stride"]) == w["stride"], t.stored_name
        assert t.extra["storage_offset"] == w["storage_offset"], t.stored_name
        assert t.extra["requires_grad"] == w["requires_grad"], t.stored_name
        assert t.storage == w["storage_key"], t.stored_name
        record = legacy.get(t.storage) or storages.get(t.storage) or {}
        if record.get("data_offset") is not None and t.numel:
            size = t.nbytes // t.numel  # quint4x2 (the one sub-byte case) sits at offset 0
            assert t.offset == record["data_offset"] + w["storage_offset"] * size, t.stored_name
    totals = ck.totals()
    if truth.get("parameter_count") is not None:
        assert totals["parameters"] == truth["parameter_count"]
        assert totals["buffers"] == truth["buffer_count"]
    tied = {frozenset([n, *others]) for n, others in ck.shared_with().items()}
    assert tied == {frozenset(group) for group in truth.get("tied", [])}
    if "pickle_globals" in truth:
        assert [x["name"] for x in ck.metadata["pickle_globals"]] == truth["pickle_globals"]


# Not live under plain pickle either: NEWOBJ/NEWOBJ_EX call only cls.__new__ (Popen's is
# object's), and object.__new__(os.system) fails; they test our handling of those opcodes.
LIVE = [p for p in PAYLOAD_NAMES if p not in ("reconstructor", "newobj_popen", "newobj_ex_popen")]


@pytest.mark.parametrize("payload", LIVE)
def test_payloads_are_live_under_plain_pickle(tmp_path, payload):
    """The same bytes DO run under pickle.loads: the hostile tests above are not duds."""
    marker = tmp_path / "pwned"
    value, proto, _ = _payloads(marker)[payload]
    blob = tmp_path / "payload.pkl"
    blob.write_bytes(pkl(dict_of(("evil", value)), proto))
    code = (
        "import pickle, sys, time\n"
        "try:\n    pickle.loads(open(sys.argv[1], 'rb').read())\nexcept Exception:\n    pass\n"
        "deadline = time.time() + 10\n"
        "while not __import__('os').path.exists(sys.argv[2]) and time.time() < deadline:\n"
        "    time.sleep(0.05)\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(blob), str(marker)],
        cwd=tmp_path,
        timeout=60,
        capture_output=True,
    )
    assert marker.exists()


@pytest.mark.parametrize("container", ["zip", "legacy"])
@pytest.mark.parametrize(
    "payload", ["global_reduce", "stack_global_eval", "inst_popen", "newobj_popen", "py2_builtin_exec"]
)
def test_cli_refuses_code_execution_pickles_in_one_line(tmp_path, container, payload):
    marker = tmp_path / "pwned"
    value, proto, global_name = _payloads(marker)[payload]
    path = _evil_file(tmp_path, container, value, proto)
    refused = run_cli("show", str(path))
    assert_clean_error(refused, str(path), "refused", global_name)
    listed = run_cli("show", "--allow-unsafe", "--format", "json", str(path))
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert [t["name"] for t in doc["tensors"]] == ["weight"]
    assert global_name in {f["subject"] for f in doc["findings"]}
    assert not marker.exists(), "the payload ran"
