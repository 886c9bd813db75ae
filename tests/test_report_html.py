"""`inspector report`: the HTML audit report, loaded in a real headless Chromium (Debian's
package; `.ci/run` installs it). The DOM after the page's scripts ran is read with
`--dump-dom` and set against the producer's truth: Sockeye's own parameter count and tensor
list, the real training run's changed tensors. A screenshot is saved (to
``INSPECTOR_SCREENSHOT_DIR`` when set; docs/report_screenshot.png was made this way)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, load_truth

SOCKEYE = FIXTURES / "sockeye" / "sockeye1_rnn_lstm_l2-2_e8-8_h16_mlp_ctxgate_init-last_residual"
COVERAGE = FIXTURES / "sockeye" / "sockeye1_rnn_lstm_l2-2_e8-8_h16_coverage"
PAIR = FIXTURES / "diff" / "sockeye1_consecutive"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]


def chromium() -> str:
    for name in (os.environ.get("INSPECTOR_CHROMIUM"), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    if os.environ.get("INSPECTOR_REQUIRE_BROWSER"):
        pytest.fail("Chromium is required (apt-get install chromium; .ci/run does it)")
    pytest.skip("no Chromium installed (apt-get install chromium; .ci/run installs it)")


def browse(html: Path, tmp_path: Path, fragment: str = "", *extra: str) -> str:
    """The page's DOM after its scripts ran (or what ``extra`` asks for), fresh profile."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    proc = subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", *extra,
         *([] if extra else ["--dump-dom"]), html.as_uri() + fragment],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


VOID = ("br", "input", "meta", "rect", "wbr")  # elements without an end tag


class Dom(HTMLParser):
    """Just enough of the DOM: elements as (tag, attrs) with their text, in order."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], list[str]]] = []
        self._open: list[list[str]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        text: list[str] = []
        self.elements.append((tag, {k: v or "" for k, v in attrs}, text))
        if tag not in VOID:
            self._open.append(text)

    def handle_endtag(self, tag: str) -> None:
        if self._open and tag not in VOID:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        for t in self._open:
            t.append(data)

    def find(self, tag: str, cls: str | None = None, **attrs: str):
        return [(a, "".join(t)) for g, a, t in self.elements if g == tag
                and (cls is None or cls in a.get("class", "").split())
                and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]


def write_report(cli, out: Path, *args: str) -> Path:
    proc = cli("report", *args, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def test_listing_chart_and_filter_render_in_chromium(cli, tmp_path):
    truth = load_truth(SOCKEYE / "params.best.truth.json")
    # relative to the checkout the CLI runs in: the screenshot shows the path a user types
    page = write_report(cli, tmp_path / "sockeye.html", str(SOCKEYE.relative_to(ROOT)))
    text = page.read_text(encoding="utf-8")
    # self-contained: nothing fetched, and a policy that would refuse it anyway
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", text)
    assert "Content-Security-Policy" in text and "default-src 'none'" in text

    dom = Dom(browse(page, tmp_path))
    assert dom.find("body", data_ready="1"), "the page's script did not run"
    rows = dom.find("tr", "tensor-row")
    assert len(rows) == truth["num_tensors"] == 41
    assert {a["data-name"].split()[1] for a, _ in rows} == {
        t["stored_name"] for t in truth["tensors"]}
    bars = dom.find("rect", "bar")
    assert len(bars) == 7  # the seven groups of sockeye-rnn this model has
    # the chart's bars add up to Sockeye's own logged count
    assert sum(int(a["data-value"]) for a, _ in bars) == truth["sockeye_logged_parameter_count"]
    layer_bars = dom.find("rect", "layerbar")
    assert layer_bars and all(int(a["data-value"]) > 0 for a, _ in layer_bars)
    assert dom.find("b", id="listing-0-shown")[0][1] == "41 of 41"
    assert dom.find("span", "verdict")[0][0]["class"] == "verdict verified"

    # the filter and sort run in the browser: state from the URL fragment
    dom = Dom(browse(page, tmp_path, "#filter=encoder&sort=-numel"))
    wanted = [t for t in truth["tensors"] if "encoder" in t["stored_name"]]
    shown = [a for a, _ in dom.find("tr", "tensor-row") if "hidden" not in a]
    assert dom.find("b", id="listing-0-shown")[0][1] == f"{len(wanted)} of 41"
    assert len(shown) == len(wanted) > 0
    numels = [int(td["data-sort"]) for g, td, _ in dom.elements
              if g == "td" and "num" in td.get("class", "")
              and td.get("data-sort", "").isdigit()]
    assert numels == sorted(numels, reverse=True)  # every row, hidden ones too, sorted

    shots = Path(os.environ.get("INSPECTOR_SCREENSHOT_DIR") or tmp_path)
    shot = shots / "report_screenshot.png"
    browse(page, tmp_path, "", f"--screenshot={shot}", "--window-size=1280,1500",
           "--hide-scrollbars")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_mismatches_highlighted(cli, tmp_path):
    page = write_report(cli, tmp_path / "coverage.html", str(COVERAGE),
                        "--set", "rnn_attention_coverage_num_hidden=3")
    dom = Dom(browse(page, tmp_path))
    assert dom.find("span", "verdict")[0][1] == "mismatch"
    # the README's worked audit: two groups, five tensors depend on the coverage width
    groups = [a for a, _ in dom.find("tr", "mismatch")]
    assert len(groups) == 2 + 5
    highlighted = {"".join(t) for g, a, t in dom.elements if g == "tr"
                   and a.get("class") == "mismatch"}
    assert any(t.startswith("wrong_shapecov_grui2h_weight") for t in highlighted)
    assert any(t.startswith("wrong_shapedecoder_rnn_att_c2h_weight") for t in highlighted)


def test_diff_of_two_checkpoints(cli, tmp_path):
    pair = load_truth(PAIR / "pair.truth.json")
    changed = {t["name"].split(":", 1)[1] for t in pair["tensors"] if not t["equal"]}
    page = write_report(cli, tmp_path / "diff.html", str(PAIR / "params.00001"),
                        str(PAIR / "params.00002"), "--values")
    dom = Dom(browse(page, tmp_path))
    assert len(dom.find("section", "checkpoint")) == 2
    rows = dom.find("tr", "op-changed")
    names = {"".join(t) for g, a, t in dom.elements
             if g == "td" and a.get("class") == "name"}
    assert len(rows) == len(changed) and changed <= names
    assert any(text == "different" for _, text in dom.find("span", "verdict"))


NAN_ZERO = FIXTURES / "stats" / "torch" / "lm_nan_zero.pt"
STAT_KEYS = ("min", "max", "mean", "std", "l2")


def table_rows(dom: Dom, keep) -> list[tuple[dict, dict[str, dict]]]:
    """Each ``tr`` whose attributes ``keep`` accepts, with its cells keyed by ``data-stat``
    or ``data-value`` (and the name cell as ``name``), each cell's attributes and ``text``."""
    out: list[tuple[dict, dict[str, dict]]] = []
    current = False
    for tag, attrs, text in dom.elements:
        if tag == "tr":
            current = keep(attrs)
            if current:
                out.append((attrs, {}))
        elif tag == "td" and current:
            key = attrs.get("data-stat") or attrs.get("data-value") or (
                "name" if attrs.get("class") == "name" else None)
            if key:
                out[-1][1][key] = {**attrs, "text": "".join(text)}
    return out


def with_class(cls: str):
    return lambda attrs: cls in attrs.get("class", "").split()


def test_value_statistics_render_in_chromium(cli, tmp_path):
    """``--values``: the findings, per-group numbers and per-tensor columns equal what torch
    computed in float64 (lm_nan_zero.pt's truth), the injected tensors flagged by severity."""
    truth = load_truth(NAN_ZERO.with_name(NAN_ZERO.name + ".truth.json"))
    want = {t["stored_name"]: t["stats"] for t in truth["tensors"]}
    inj = truth["injected"]
    page = write_report(cli, tmp_path / "stats.html", str(NAN_ZERO.relative_to(ROOT)),
                        "--values")
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", text)
    dom = Dom(browse(page, tmp_path))
    assert dom.find("body", data_ready="1")

    card = dom.find("div", id="stats-0")[0][0]
    nonfinite = sum(s["nan"] + s["posinf"] + s["neginf"] for s in want.values())
    assert (int(card["data-errors"]), int(card["data-warnings"]), int(card["data-nonfinite"])
            ) == (len(inj["nan"]) + len(inj["neginf"]), len(inj["zeroed"]), nonfinite) == (2, 1, 2)
    found = {(a["class"].split()[1], a["data-subject"]) for a, _ in dom.find("li", "finding")}
    assert found == ({("error", n) for n in inj["nan"] + inj["neginf"]}
                     | {("warning", n) for n in inj["zeroed"]})

    # the listing: every tensor's numbers, the injected ones highlighted by severity
    rows = table_rows(dom, with_class("tensor-row"))
    assert len(rows) == len(want) == 13
    for attrs, cells in rows:
        stored = attrs["data-name"].split()[1]
        for k in STAT_KEYS:
            assert float(cells[k]["data-sort"]) == pytest.approx(want[stored][k], rel=1e-6,
                                                                 abs=1e-12), (stored, k)
        s = want[stored]
        assert int(cells["nonfinite"]["data-sort"]) == s["nan"] + s["posinf"] + s["neginf"]
        assert int(cells["zeros"]["data-sort"]) == s["zeros"]
        klass = set(attrs["class"].split())
        assert ("error" in klass) == (stored in inj["nan"] + inj["neginf"]), stored
        assert ("warning" in klass) == (stored in inj["zeroed"]), stored
    nan_row = next(c for a, c in rows if inj["nan"][0] in a["data-name"].split())
    assert nan_row["nonfinite"]["text"] == "1 NaN"

    # per group: torch's per-tensor numbers combined (count, extremes, sums of squares)
    members: dict[str, list[str]] = {}
    for attrs, _ in rows:
        members.setdefault(attrs["data-group"], []).append(attrs["data-name"].split()[1])
    groups = table_rows(dom, lambda a: "data-group" in a and "tensor-row" not in a["class"])
    assert {a["data-group"] for a, _ in groups} == set(members)
    for attrs, cells in groups:
        ss = [want[n] for n in members[attrs["data-group"]]]
        assert int(cells["count"]["data-sort"]) == sum(s["count"] for s in ss)
        assert float(cells["min"]["data-sort"]) == pytest.approx(min(s["min"] for s in ss))
        assert float(cells["max"]["data-sort"]) == pytest.approx(max(s["max"] for s in ss))
        l2 = math.sqrt(sum(s["l2"] ** 2 for s in ss))
        assert float(cells["l2"]["data-sort"]) == pytest.approx(l2, rel=1e-6)
        for k in ("nan", "posinf", "neginf", "zeros"):
            assert int(cells[k]["data-sort"]) == sum(s[k] for s in ss), (attrs, k)
        assert ("error" in attrs["class"].split()) == any(
            s["nan"] + s["posinf"] + s["neginf"] for s in ss)
    norms = {a["data-label"]: float(a["data-value"]) for a, _ in dom.find("rect", "normbar")}
    for g, names in members.items():
        assert norms[g] == pytest.approx(math.sqrt(sum(want[n]["l2"] ** 2 for n in names)),
                                         rel=1e-6)

    # the stats columns sort in the browser: descending L2 from the URL fragment
    dom = Dom(browse(page, tmp_path, "#sort=-l2"))
    order = [float(c["l2"]["data-sort"]) for _, c in table_rows(dom, with_class("tensor-row"))]
    assert order == sorted(order, reverse=True)
    assert order[0] == pytest.approx(max(s["l2"] for s in want.values()), rel=1e-6)

    shots = Path(os.environ.get("INSPECTOR_SCREENSHOT_DIR") or tmp_path)
    shot = shots / "report_stats_screenshot.png"
    browse(page, tmp_path, "", f"--screenshot={shot}", "--window-size=1280,1800",
           "--hide-scrollbars")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_diff_with_values_shows_the_comparison_and_both_stats(cli, tmp_path):
    pair = load_truth(PAIR / "pair.truth.json")
    truth = {t["name"].split(":", 1)[1]: t for t in pair["tensors"]}
    page = write_report(cli, tmp_path / "diff.html", str(PAIR / "params.00001"),
                        str(PAIR / "params.00002"), "--values")
    dom = Dom(browse(page, tmp_path))
    assert dom.find("div", id="stats-0") and dom.find("div", id="stats-1")
    changed = {c["name"]["text"]: c for _, c in table_rows(dom, with_class("op-changed"))}
    assert set(changed) == {n for n, t in truth.items() if not t["equal"]}
    for name, cells in changed.items():  # MXNet's own max |a-b| of each changed tensor
        assert float(cells["max_abs"]["data-sort"]) == pytest.approx(
            truth[name]["max_abs_diff"], rel=1e-6), name
        assert 0 < float(cells["rel_l2"]["data-sort"]) and float(cells["cosine"]["data-sort"]) <= 1


def test_navigation_diff_first_group_filter_and_structural_audit(cli, tmp_path):
    """Two paths: a navigation bar links every section and the diff comes first; the filter
    matches the group column too (in Chromium); a structural audit predicts nothing, so the
    page says so instead of "predicted 0"."""
    page = write_report(cli, tmp_path / "two.html", str(PAIR / "params.00001"),
                        str(PAIR / "params.00002"))
    text = page.read_text(encoding="utf-8")
    assert text.index('<nav class="card">') < text.index('<section id="diff">') < text.index(
        '<section class="checkpoint" id="checkpoint-0">')
    for anchor in ("diff", "checkpoint-0", "check-0", "tensors-0", "checkpoint-1", "tensors-1"):
        assert f'href="#{anchor}"' in text and f'id="{anchor}"' in text, anchor
    truth = load_truth(SOCKEYE / "params.best.truth.json")
    one = write_report(cli, tmp_path / "one.html", str(SOCKEYE.relative_to(ROOT)))
    dom = Dom(browse(one, tmp_path, "#filter=^attention$"))
    groups = {a["data-group"] for a, _ in dom.find("tr", "tensor-row") if "hidden" not in a}
    assert groups == {"attention"}
    assert dom.find("b", id="listing-0-shown")[0][1].endswith(f" of {truth['num_tensors']}")
    plain = write_report(cli, tmp_path / "structure.html",
                         str(FIXTURES / "diff" / "hparam_ff" / "ff48.safetensors"))
    body = plain.read_text(encoding="utf-8")
    assert "no prediction" in body and "predicted 0" not in body


# Run in the page after its own scripts: for each name cell, the characters a line ends after
# (a character whose successor sits lower on the page), written where --dump-dom shows it.
_LINE_ENDS = r"""<script>
window.addEventListener('load', function(){
  var out = [];
  document.querySelectorAll('td.name').forEach(function(td){
    var text = td.textContent, walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    var tops = [], last = [], node;
    while ((node = walker.nextNode())) {
      for (var i = 0; i < node.length; i++) {
        var r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1);
        var box = r.getClientRects()[0]; tops.push(box ? box.top : null);
        last.push(i === node.length - 1 && node.nextSibling !== null
                  && node.nextSibling.nodeName === 'BR');
      }
    }
    var ends = [];  // the character a line ends after, or 'br' before the stored name
    for (var j = 1; j < tops.length; j++)
      if (tops[j] !== null && tops[j - 1] !== null && tops[j] > tops[j - 1] + 2)
        ends.push(last[j - 1] ? 'br' : text.charAt(j - 1));
    out.push({name: text, ends: ends});
  });
  var pre = document.createElement('pre'); pre.id = 'line-ends';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
});
</script>"""


def test_names_wrap_between_components_in_chromium(cli, tmp_path):
    """In a narrow window, long tensor names wrap after a separator (``.``, ``_``), never
    inside a word."""
    page = write_report(cli, tmp_path / "narrow.html", str(SOCKEYE.relative_to(ROOT)))
    page.write_text(page.read_text(encoding="utf-8").replace("</body>", _LINE_ENDS + "</body>"),
                    encoding="utf-8")
    dom = Dom(browse(page, tmp_path, "", "--window-size=420,900", "--dump-dom"))
    cells = json.loads(dom.find("pre", id="line-ends")[0][1])
    truth = load_truth(SOCKEYE / "params.best.truth.json")
    assert len(cells) >= truth["num_tensors"]
    wrapped = [c for c in cells if c["ends"]]
    assert wrapped, "the window is narrow enough that some names wrap"
    assert all(set(c["ends"]) <= set("._/:") | {"br"} for c in wrapped), wrapped


def test_per_layer_chart_without_scheme_layers():
    """A scheme with no layer captures: the per-layer chart numbers the layers as the
    statistics' per-layer norms do (the first numbered name component), never a "no layers"
    note above a per-layer norm chart."""
    from inspector.adapters.registry import load
    from inspector.reports.audit import build
    from inspector.reports.html import to_html

    truth = load_truth(Path(str(NAN_ZERO) + ".truth.json"))
    html = to_html(build([load(str(NAN_ZERO))], values=True))
    chart = html[html.index('id="layers-chart-0"'):]
    chart = chart[:chart.index("</svg>")]
    labels = re.findall(r'data-label="([^"]*)" data-value="(\d+)"', chart)
    layers = {}
    for t in truth["tensors"]:
        m = re.match(r"layers\.(\d+)\.", t["stored_name"])
        if m:
            layers[f"layers layer {m.group(1)}"] = layers.get(f"layers layer {m.group(1)}", 0) \
                + math.prod(t["shape"])
    assert dict((k, int(v)) for k, v in labels) == layers
    assert "no layers" not in html
