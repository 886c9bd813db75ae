"""The adapter registry: content sniffing order and third-party adapters via entry points."""

from __future__ import annotations

from pathlib import Path

import pytest

import inspector.adapters.registry as registry
from inspector.adapters.errors import InspectorError
from inspector.adapters.model import Checkpoint, TensorEntry


class _EntryPoint:
    def __init__(self, name: str, obj: object) -> None:
        self.name, self.value, self._obj = name, f"plugin:{name}", obj

    def load(self) -> object:
        return self._obj


def _fake_open(path: Path, variant: str) -> Checkpoint:
    entry = TensorEntry(stored_name="w", name="w", shape=(2, 2), dtype="float32")
    return Checkpoint(paths=(str(path),), format="toy", tensors=[entry])


TOY = registry.Adapter(
    name="toy",
    description="a toy format starting with TOY1",
    extensions=(".toy",),
    sniff=lambda head, path: "v1" if head.startswith(b"TOY1") else None,
    open=_fake_open,
)


@pytest.fixture
def plugins(monkeypatch):
    def install(*eps: _EntryPoint) -> None:
        import importlib.metadata

        monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: list(eps) if group == registry.ENTRY_POINT_GROUP else [])
        monkeypatch.setattr(registry, "_cache", None)

    yield install
    registry._cache = None


def test_third_party_adapter_is_used_for_its_files(tmp_path, plugins):
    plugins(_EntryPoint("toy", TOY))
    p = tmp_path / "weights.dat"
    p.write_bytes(b"TOY1 rest of the file")
    ck = registry.load(p)
    assert ck.format == "toy" and ck.totals()["parameters"] == 4
    assert "toy" in [a.name for a in registry.formats()]


def test_broken_plugin_is_a_clear_error(plugins):
    plugins(_EntryPoint("bad", object()))
    with pytest.raises(InspectorError, match="'bad'.*is not an Adapter"):
        registry.formats()


def test_builtin_names_cannot_be_shadowed(plugins):
    fake = registry.Adapter("safetensors", "impostor", (), lambda h, p: "x", _fake_open)
    plugins(_EntryPoint("safetensors", fake))
    from inspector.adapters.safetensors import ADAPTER as builtin

    assert [a for a in registry.formats() if a.name == "safetensors"] == [builtin]


def _in_order(source):
    """Detection as BUILTIN_MODULES orders it, every sniff tried in turn: the definition the
    signature shortcut must meet."""
    head = registry.read_head(source)
    for module in registry.BUILTIN_MODULES:
        adapter = registry._builtin_adapter(module)
        if adapter.sniff(head, source) is not None:
            return adapter.name
    return None


def _real_files():
    root = Path(__file__).resolve().parent.parent
    for base in (root / "fixtures", root / "tests" / "corpus"):
        for p in sorted(base.rglob("*")):
            if p.is_file() and p.stat().st_size:
                yield p


def test_signature_shortcut_finds_what_the_order_finds():
    """Every real file (fixtures and the hostile corpus) is detected as the plain order detects
    it; every file starting with a signature is claimed by no other built-in sniff."""
    from inspector.adapters.source import as_source

    signed = {m: 0 for _, m in registry.SIGNATURES}
    for p in _real_files():
        source = as_source(p)
        try:
            expected = _in_order(source)
        except InspectorError as e:
            expected = type(e)
        try:
            got = registry.detect(source)[0].name
        except registry.UnknownFormatError:
            got = None
        except InspectorError as e:
            got = type(e)
        assert got == expected, p
        head = registry.read_head(source)
        for magic, owner in registry.SIGNATURES:
            if head.startswith(magic):
                signed[owner] += 1
                for module in registry.BUILTIN_MODULES:
                    if module != owner:
                        claimed = registry._builtin_adapter(module).sniff(head, source)
                        assert claimed is None, (p, module)
    assert all(signed.values()), signed  # real files of every signature were seen
