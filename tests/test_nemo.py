"""NeMo .nemo archives read in place: listings, config and values equal what NeMo's own
restore_from gave for archives NeMo's save_to wrote; hostile tars refused in one line, nothing
extracted; scan examines the weights' pickle through the torch examination."""

from __future__ import annotations

import hashlib
import io
import pickle
import re
import tarfile

import numpy as np
import pytest

from inspector import values
from inspector.adapters.errors import FormatError, InspectorError, UnsafeContentError
from inspector.adapters.registry import load

from conftest import FIXTURES, load_truth

NEMO = FIXTURES / "nemo"
FILES = ["tiny_model.nemo", "tiny_model_gz.nemo"]


@pytest.mark.parametrize("name", FILES)
def test_listing_config_and_values_equal_restore_from(name):
    truth = load_truth(NEMO / f"{name}.truth.json")
    ckpt = load(NEMO / name)
    assert ckpt.format == "nemo"
    assert [t.stored_name for t in ckpt.tensors] == [w["stored_name"] for w in truth["tensors"]]
    for w in truth["tensors"]:
        t = ckpt[w["stored_name"]]
        assert (list(t.shape), t.dtype, t.role.value) == (w["shape"], w["dtype"], w["role"])
        x = np.concatenate(list(values.iter_values(ckpt, t, chunk=5))).astype("<f4")
        assert hashlib.sha256(x.tobytes()).hexdigest() == w["values"]["sha256_f32le"], t.name
    assert ckpt.hyperparameters["config"] == truth["config"]
    assert sum(t.numel for t in ckpt.tensors if t.role.value == "parameter") == \
        truth["parameter_count"]
    assert ckpt.metadata["members"] == sorted(m[2:] for m in truth["members"] if m != ".")


def test_uncompressed_archive_is_read_in_place():
    """The weights are a window of the archive: values are byte ranges of the .nemo itself."""
    ckpt = load(NEMO / "tiny_model.nemo")
    loc = ckpt.reader(ckpt.tensors[0])
    assert str(NEMO / "tiny_model.nemo") in loc.source.where


def test_scan_of_real_archives_says_nothing_dangerous(cli):
    r = cli("scan", *(str(NEMO / n) for n in FILES))
    assert r.returncode == 0, r.stdout + r.stderr
    # the config's target is a NeMo model class (NeMo 3.0's approved namespace): vetted
    assert "2 safe, 0 foreign, 0 dangerous, 0 error" in r.stdout


@pytest.mark.parametrize("target,nested", [
    ("os.system", None),  # on every dangerous list
    ("builtins.exec", None),
    ("nemo.core.classes.inspector_fixture.TinyModel", "subprocess.Popen"),
    ("nemo.core.classes.inspector_fixture.TinyModel", "mypackage.build_encoder"),  # unvetted
])
def test_config_naming_a_callable_is_dangerous_and_refused(tmp_path, cli, target, nested):
    """NeMo calls the config's model target(cfg=...) and Hydra instantiates every nested
    _target_: a listed or unvetted callable makes the archive dangerous in scan and refused by
    show and load; its benign twin (the real archive) stays safe."""
    import yaml

    m = _members()
    conf = yaml.safe_load(m["./model_config.yaml"])
    conf["target"] = target
    if nested:
        conf["encoder"] = {"_target_": nested, "args": ["id"]}
    m["./model_config.yaml"] = yaml.safe_dump(conf).encode()
    path = tmp_path / "t.nemo"
    _tar(path, m)
    r = cli("scan", str(path))
    assert r.returncode == 1 and r.stdout.startswith("dangerous"), r.stdout
    assert repr(nested or target) in r.stdout
    with pytest.raises(UnsafeContentError, match=re.escape(nested or target)):
        load(path)
    shown = cli("show", str(path))
    assert shown.returncode == 2 and "refused" in shown.stderr, shown.stderr


# --- hostile archives ----------------------------------------------------------------------

def _members() -> dict[str, bytes]:
    with tarfile.open(NEMO / "tiny_model.nemo") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _tar(path, members: dict[str, bytes], extra=None, mode="w:") -> None:
    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra or []:
            tar.addfile(info)


def _link(name: str, target: str, kind=tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def test_traversal_member_is_refused(tmp_path):
    m = _members()
    m["../../evil.txt"] = b"x"
    _tar(tmp_path / "t.nemo", m)
    _refused(tmp_path / "t.nemo", "leaves the archive's folder")
    assert not (tmp_path.parent / "evil.txt").exists()


def test_absolute_member_is_refused(tmp_path):
    m = _members()
    m["/tmp/evil.txt"] = b"x"
    _tar(tmp_path / "a.nemo", m)
    _refused(tmp_path / "a.nemo", "leaves the archive's folder")


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE])
def test_link_members_are_refused(tmp_path, kind):
    m = _members()
    weights = m.pop("./model_weights.ckpt")
    m["./real.ckpt"] = weights
    _tar(tmp_path / "l.nemo", m, [_link("./model_weights.ckpt", "/etc/passwd", kind)])
    _refused(tmp_path / "l.nemo", "link to '/etc/passwd'")


def test_truncated_archive_is_refused(tmp_path):
    data = (NEMO / "tiny_model.nemo").read_bytes()
    path = tmp_path / "cut.nemo"
    with tarfile.open(NEMO / "tiny_model.nemo") as tar:
        w = tar.getmember("./model_weights.ckpt")
    # inside a header, inside the weights member, just before its end
    for n in (w.offset + 100, w.offset_data + 10, w.offset_data + w.size // 2,
              w.offset_data + w.size - 1):
        path.write_bytes(data[:n])
        with pytest.raises(InspectorError) as e:
            load(path, format="nemo")
        assert "\n" not in str(e.value)


def test_huge_size_field_is_refused_without_reading(tmp_path):
    """A header claiming a member of 4 GiB in a 20 KiB file: refused from the header."""
    m = _members()
    path = tmp_path / "huge.nemo"
    _tar(path, m)
    raw = bytearray(path.read_bytes())
    # rewrite the weights member's size field (octal, 12 bytes at offset 124) and checksum
    i = raw.find(b"./model_weights.ckpt")
    raw[i + 124:i + 136] = b"%011o\0" % (4 << 30)
    raw[i + 148:i + 156] = b" " * 8
    raw[i + 148:i + 156] = b"%06o\0 " % sum(raw[i:i + 512])
    path.write_bytes(bytes(raw))
    _refused(path, "runs past the end of the file|not a readable tar")


def test_model_parallel_archive_lists_rank_0_and_names_the_others(tmp_path):
    """NeMo's model-parallel layout (inject_model_parallel_rank): one weights file per rank."""
    m = _members()
    weights = m.pop("./model_weights.ckpt")
    m["./mp_rank_00/model_weights.ckpt"] = weights
    m["./mp_rank_01/model_weights.ckpt"] = weights
    _tar(tmp_path / "mp.nemo", m)
    ckpt = load(tmp_path / "mp.nemo")
    assert ckpt.metadata["weights_member"] == "mp_rank_00/model_weights.ckpt"
    assert any("2 model-parallel ranks" in f.message for f in ckpt.findings)
    assert len(ckpt.tensors) == len(load(NEMO / "tiny_model.nemo").tensors)


def test_missing_weights_and_not_a_tar(tmp_path):
    m = _members()
    del m["./model_weights.ckpt"]
    _tar(tmp_path / "n.nemo", m)
    _refused(tmp_path / "n.nemo", "no model_weights.ckpt")


def test_gzip_weights_over_the_memory_limit_are_refused(tmp_path, monkeypatch):
    from inspector.adapters import nemo

    monkeypatch.setattr(nemo, "MAX_GZ_MEMBER", 100)
    _refused(NEMO / "tiny_model_gz.nemo", "not decompressed .limit 100.")


def test_gzip_bomb_stops_at_the_limit(tmp_path, monkeypatch):
    """A gzip archive whose members expand past the walk's limit is refused, not decompressed."""
    from inspector.adapters import nemo

    monkeypatch.setattr(nemo, "MAX_GZ_TOTAL", 1 << 20)
    m = _members()
    m["./zeros.bin"] = bytes(4 << 20)  # compresses to a few KiB
    path = tmp_path / "bomb.nemo"
    _tar(path, m, mode="w:gz")
    assert path.stat().st_size < 64 << 10
    _refused(path, "not decompressed")


class _Evil:
    def __reduce__(self):
        import os

        return (os.system, ("touch /tmp/should-never-exist-nemo",))


def test_malicious_weights_pickle_is_dangerous_and_refused(tmp_path, cli):
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:  # torch.save's zip layout
        z.writestr("archive/data.pkl", pickle.dumps({"w": _Evil()}, protocol=2))
        z.writestr("archive/version", "3\n")
    m = _members()
    m["./model_weights.ckpt"] = buf.getvalue()
    path = tmp_path / "evil.nemo"
    _tar(path, m)
    with pytest.raises(UnsafeContentError):
        load(path)
    r = cli("scan", str(path))
    assert r.returncode != 0 and "dangerous" in r.stdout and "system" in r.stdout
    assert "Traceback" not in r.stderr


def test_a_zip_appended_after_the_tar_is_examined(tmp_path, cli):
    """zipfile opens a file by its last end record: a zip appended to a .nemo is read as the
    file's zip by such readers, so scan examines it (not only the weights' own zip)."""
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("evil/data.pkl", pickle.dumps(_Evil(), protocol=2))
    path = tmp_path / "appended.nemo"
    path.write_bytes((NEMO / "tiny_model.nemo").read_bytes() + buf.getvalue())
    r = cli("scan", str(path))
    assert "dangerous" in r.stdout and "1 dangerous" in r.stdout, r.stdout


def _refused(path, match):
    with pytest.raises(FormatError, match=match) as e:
        load(path)
    assert "\n" not in str(e.value) and path.name in str(e.value)
