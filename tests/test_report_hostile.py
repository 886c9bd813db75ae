"""Output hygiene: names read from a file cannot change the HTML report's document or split a
CSV row.

The report of a safetensors file whose tensor names, metadata and file name are hostile
(``<!--<script>``, ``</script><script>``, ``]]>``, U+2028, ...) is parsed with html5lib (the
HTML5 parsing algorithm, as a browser runs it) and set against the report of the same records
with every hostile string replaced by a harmless one of the same length: the two DOMs have the
same elements, attributes and scripts, and the hostile strings come back as text, character
for character. The file is written from the safetensors specification (8-byte little-endian
header length, JSON header, data)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT

html5lib = pytest.importorskip("html5lib")

HOSTILE = [
    "<!--<script>", "</script><script>alert(1)</script>", "]]>", "<\\!--", "a\u2028b\u2029c",
    "<![CDATA[x", "<svg onload=alert(1)>", "\"'><img src=x onerror=alert(1)>",
    "&amp;&lt;&#60;", "-->", "<script>", "</style><style>", "<!-- -->", "</title><b>",
    "<textarea>", "<plaintext>", "{{x}}${x}", "x\x1b[31mred\x07",
]
FILE_NAME = "m<!--<script>.safetensors"


def write_safetensors(path: Path, names: list[str], meta: dict[str, str], scale: float) -> None:
    header: dict[str, Any] = {"__metadata__": meta}
    for i, name in enumerate(names):
        header[name] = {"dtype": "F32", "shape": [2, 3], "data_offsets": [24 * i, 24 * (i + 1)]}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    values = [scale * (k % 7) - 1.5 for k in range(6 * len(names))]
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + struct.pack(f"<{len(values)}f", *values))


@pytest.fixture(scope="module")
def hostile_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("hostile")
    meta = {h: h for h in HOSTILE[:6]}
    a, b = d / FILE_NAME, d / ("b" + FILE_NAME)
    write_safetensors(a, HOSTILE, meta, 1.0)
    write_safetensors(b, HOSTILE[:-2] + ["</script>extra"], meta, 2.0)
    return a, b


def _placeholders(strings: list[str]) -> dict[str, str]:
    """Each hostile string -> a harmless one of the same length (the layout is the same)."""
    out = {}
    for i, s in enumerate(sorted(strings, key=len, reverse=True)):
        out[s] = f"Z{i:02d}".ljust(len(s), "z")
    return out


def _swap(obj: Any, table: dict[str, str]) -> Any:
    if isinstance(obj, str):
        for a, b in table.items():
            obj = obj.replace(a, b)
        return obj
    if isinstance(obj, dict):
        return {_swap(k, table): _swap(v, table) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_swap(v, table) for v in obj)
    if dataclasses.is_dataclass(obj):
        return dataclasses.replace(obj, **{f.name: _swap(getattr(obj, f.name), table)
                                           for f in dataclasses.fields(obj)})
    return obj


def _drop_word_breaks(doc: Any) -> None:
    """Remove the bare ``<wbr>`` elements names wrap at (their places follow the name's dots,
    which differ between a hostile name and its placeholder), joining the texts around them."""
    for parent in list(doc.iter()):
        for child in list(parent):
            if child.tag != "wbr":
                continue
            assert not child.attrib and not child.text and not len(child), "a bare <wbr>"
            kids = list(parent)
            i = kids.index(child)
            if i:
                kids[i - 1].tail = (kids[i - 1].tail or "") + (child.tail or "")
            else:
                parent.text = (parent.text or "") + (child.tail or "")
            parent.remove(child)


def _dom(text: str) -> list[tuple[Any, ...]]:
    """Every element in document order: tag, attributes, text and tail (a JSON script's text
    as the parsed JSON)."""
    doc = html5lib.parse(text, namespaceHTMLElements=False)
    _drop_word_breaks(doc)
    out = []
    for el in doc.iter():
        if not isinstance(el.tag, str):  # a comment: none is written, none may appear
            out.append(("comment", el.text))
            continue
        body: Any = el.text
        if el.tag == "script" and el.get("type") == "application/json":
            body = json.loads(body)
        out.append((el.tag, sorted(el.attrib.items()), body, el.tail))
    return out


def _reports(paths: list[Path], values: bool) -> tuple[str, str, dict[str, str]]:
    from inspector.adapters.registry import load
    from inspector.reports.audit import build
    from inspector.reports.html import to_html

    report = build([load(str(p)) for p in paths], values=values)
    table = _placeholders([*HOSTILE, "</script>extra"])
    return to_html(report), to_html(_swap(report, table)), table


def _same_dom(paths: list[Path], names: list[str]) -> None:
    hostile, harmless, table = _reports(paths, values=True)
    back = {v: k for k, v in table.items()}
    got, expected = _dom(hostile), _swap(_dom(harmless), back)
    assert [e[0] for e in got] == [e[0] for e in expected]  # the same elements
    assert got == expected  # ... attributes, texts and scripts: hostile strings as text
    scripts = [e for e in got if e[0] == "script"]
    assert len(scripts) == 2 and not any(e[0] == "comment" for e in got)
    listed = {t["name"] for t in scripts[0][2]["checkpoints"][0]["listing"]["tensors"]}
    assert listed == set(names)
    for h in names:  # shown as text in the listing's name cells
        assert any(e[0] == "td" and e[2] == h for e in got), h


@pytest.mark.parametrize("name", HOSTILE)
def test_each_hostile_name_leaves_the_dom_unchanged(name: str, tmp_path: Path) -> None:
    """One hostile string per file (together, a later ``-->`` would reset the tokenizer state
    an earlier ``<!--<script>`` set, and hide the fault)."""
    path = tmp_path / FILE_NAME
    names = [name, "benign.weight"]
    write_safetensors(path, names, {name: name}, 1.0)
    _same_dom([path], names)


@pytest.mark.parametrize("two", [False, True])
def test_all_hostile_names_with_their_diff(hostile_pair, two: bool) -> None:
    paths = list(hostile_pair) if two else [hostile_pair[0]]
    _same_dom(paths, HOSTILE)


def test_report_file_through_the_cli(hostile_pair, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    proc = subprocess.run([sys.executable, "-m", "inspector", "report", str(hostile_pair[0]),
                           "-o", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = html5lib.parse(out.read_text(encoding="utf-8"), namespaceHTMLElements=False)
    scripts = doc.findall(".//script")
    assert [s.get("type") for s in scripts] == ["application/json", None]
    assert doc.find(".//title").text.endswith(FILE_NAME)
    assert len(doc.findall(".//main")) == 1 and not doc.findall(".//img")
    assert not doc.findall(".//textarea") and not doc.findall(".//plaintext")


@pytest.mark.parametrize("verb", [("show",), ("show", "--groups"), ("stats",),
                                  ("diff", "--values"), ("check",)])
def test_csv_escapes_control_characters(hostile_pair, verb: tuple[str, ...]) -> None:
    args = [verb[0], str(hostile_pair[0])]
    if verb[0] == "diff":
        args.append(str(hostile_pair[1]))
    proc = subprocess.run([sys.executable, "-m", "inspector", *args, *verb[1:], "--format", "csv"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode in (0, 1, 3), proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    assert len({len(r) for r in rows}) == 1  # every row has the header's columns
    if verb[0] in ("show", "stats", "diff") and "--groups" not in verb:
        cells = {c for r in rows for c in r}
        assert "x\\x1b[31mred\\x07" in cells  # as the table shows it
        assert "</script><script>alert(1)</script>" in cells  # other text is kept as is


def test_hostile_report_in_chromium(tmp_path: Path) -> None:
    """The same in a real browser (when Chromium is installed): after the page's own script
    ran, the hostile report has the elements of the harmless one, tag for tag, and each hostile
    name is the text of its listing row."""
    from collections import Counter

    from test_report_html import browse

    path = tmp_path / FILE_NAME  # no "-->" anywhere: the tokenizer state would reset
    names = ["<!--<script>", "</script><script>alert(1)</script>", "<img src=x>", "w"]
    write_safetensors(path, names, {}, 1.0)
    hostile, harmless, _ = _reports([path], values=True)
    docs = []
    for i, text in enumerate((hostile, harmless)):
        page = tmp_path / f"r{i}.html"
        page.write_text(text, encoding="utf-8")
        docs.append(html5lib.parse(browse(page, tmp_path), namespaceHTMLElements=False))
        _drop_word_breaks(docs[-1])
    tags = [Counter(el.tag for el in d.iter() if isinstance(el.tag, str)) for d in docs]
    assert tags[0] == tags[1]
    assert tags[0]["script"] == 2 and not tags[0]["img"] and not tags[0]["textarea"]
    shown = {"".join(tr.find("td").itertext()) for tr in docs[0].iter("tr")
             if "tensor-row" in (tr.get("class") or "")}
    assert set(names) <= shown
