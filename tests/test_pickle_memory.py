"""A tiny pickle must not make the reader allocate gigabytes (the C unpickler's memo table)."""

from __future__ import annotations

import pickle
import struct
import zipfile

from conftest import run_measured

# LONG_BINPUT with index 2**28: CPython's C unpickler would allocate and zero 4 GiB for its memo.
MEMO_BOMB = b"\x80\x02}q\x00r" + struct.pack("<I", 2**28) + b"."


def _zip(path):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", MEMO_BOMB)
        z.writestr("archive/version", "3\n")
    return path


def _legacy(path):
    head = b"".join(
        pickle.dumps(x, protocol=2)
        for x in (0x1950A86A20F9469CFC6C, 1001, {"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}})
    )
    path.write_bytes(head + MEMO_BOMB + pickle.dumps([], protocol=2))
    return path


def _run(path):
    proc, rss = run_measured("show", str(path))
    return proc.returncode, rss // 1024, proc.stderr.strip()


def test_memo_bomb_in_zip_is_refused_within_bounded_memory(tmp_path):
    rc, maxrss_kb, err = _run(_zip(tmp_path / "bomb.pt"))
    assert rc == 2 and "more memory" in err and "bomb.pt" in err
    assert maxrss_kb < 300_000, maxrss_kb  # the uncapped unpickler reaches ~4.2 GB


def test_memo_bomb_in_legacy_file_is_refused_within_bounded_memory(tmp_path):
    rc, maxrss_kb, err = _run(_legacy(tmp_path / "bomb_legacy.pt"))
    assert rc == 2 and "more memory" in err
    assert maxrss_kb < 300_000, maxrss_kb
