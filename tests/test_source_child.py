"""``LocalSource.child`` stays inside its base directory: a plain name in a directory known to
be inside takes one lstat; symlinks, nested names and directories reached by ``parent_dir`` are
resolved in full."""

from __future__ import annotations

import os

import pytest

from inspector.adapters.errors import FormatError
from inspector.adapters.source import LocalSource


@pytest.fixture()
def tree(tmp_path):
    base = tmp_path / "base"
    (base / "sub").mkdir(parents=True)
    (base / "sub" / "a.bin").write_bytes(b"x")
    (base / "top.bin").write_bytes(b"y")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"z")
    os.symlink(outside / "secret", base / "link")
    os.symlink(outside / "secret", base / "sub" / "link")
    os.symlink(base / "top.bin", base / "sub" / "inner")  # a symlink that stays inside
    return base, outside


def test_plain_names_inside(tree):
    base, _ = tree
    src = LocalSource(base)
    assert src.child("top.bin").read(0, 1) == b"y"
    assert src.child("sub").child("a.bin").read(0, 1) == b"x"
    assert src.child("sub/a.bin").read(0, 1) == b"x"
    assert src.child("sub").child("inner").read(0, 1) == b"y"
    assert not src.child("missing").exists()


def test_symlinks_out_refused(tree):
    base, _ = tree
    src = LocalSource(base)
    with pytest.raises(FormatError, match="resolves outside"):
        src.child("link")
    with pytest.raises(FormatError, match="resolves outside"):
        src.child("sub").child("link")
    with pytest.raises(FormatError, match="resolves outside"):
        src.child("sub/link")


def test_parent_dir_above_the_base_refused(tree):
    base, outside = tree
    up = LocalSource(base).child("sub").parent_dir().parent_dir()  # above the base
    with pytest.raises(FormatError, match="resolves outside"):
        up.child("outside")


def test_a_symlinked_base(tree, tmp_path):
    base, _ = tree
    os.symlink(base, tmp_path / "alias")
    src = LocalSource(tmp_path / "alias")
    assert src.child("sub").child("a.bin").read(0, 1) == b"x"
    with pytest.raises(FormatError, match="resolves outside"):
        src.child("sub").child("link")
