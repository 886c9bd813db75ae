"""The typed, immutable results of :func:`inspector.check`, :func:`inspector.diff`,
:func:`inspector.scan`, :func:`inspector.stats`, :func:`inspector.predict` and
:func:`inspector.budget`.

Each result holds the verb's JSON-ready report, the very document ``inspector VERB --format
json`` prints, and shows it four ways:

- ``to_dict()``: that JSON document as plain Python (a fresh copy: schema name and version
  included, NaN and infinities as ``null`` named in ``"nonfinite"``, as the CLI writes them);
- ``to_pandas()``: a DataFrame of the rows the verb's table shows (pandas is imported only
  then: ``pip install 'ckpt-inspector[pandas]'``);
- ``render(fmt)``: the text the CLI prints for ``--format fmt``;
- in a notebook, a compact HTML table with the verdict first; in a terminal, a one-line repr.

The typed fields (``verdict``, ``exit_code``, counts) are set once, when the result is made.
This module is imported only when one of the functions is called (``import inspector`` stays
cheap).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import pandas  # type: ignore[import-untyped, unused-ignore]

    from inspector.reports.text import Style

__all__ = [
    "BudgetResult",
    "CheckResult",
    "DiffResult",
    "PredictResult",
    "Result",
    "ScanResult",
    "StatsResult",
]

HTML_ROWS = 20  # rows a notebook display shows (the rest are counted)


@dataclass(frozen=True, repr=False, eq=False)
class Result:
    """What every result shares: the JSON-ready report and its views."""

    document: Mapping[str, Any] = field(repr=False)
    """The JSON-ready report the renderers read, as a read-only view (``to_dict()`` gives a copy
    to keep and change)."""

    renderer: ClassVar[str] = ""  # the module whose render(report, fmt, style) prints it
    row_key: ClassVar[str] = ""  # the document's list of rows

    def __post_init__(self) -> None:
        from types import MappingProxyType

        object.__setattr__(self, "document", MappingProxyType(dict(self.document)))

    @property
    def schema(self) -> str:
        """The JSON schema name and version, such as ``"inspector.check/1"``."""
        return str(self.document["schema"])

    @property
    def verdict(self) -> str:
        """The answer in one word or phrase, shown first."""
        raise NotImplementedError

    @property
    def exit_code(self) -> int:
        """The exit code the CLI gives for this result."""
        return 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON document ``--format json`` prints, as plain Python (a fresh copy)."""
        from inspector.reports import strict_json

        doc: dict[str, Any] = json.loads(strict_json.dumps(dict(self.document)))
        return doc

    def rows(self) -> list[dict[str, Any]]:
        """The table's rows as flat dicts (nested objects as ``"key.sub"`` columns)."""
        return [_flat(r) for r in self.to_dict().get(self.row_key) or []]

    def to_pandas(self) -> pandas.DataFrame:
        """:meth:`rows` as a :class:`pandas.DataFrame` (needs pandas: the ``pandas`` extra)."""
        try:
            import pandas
        except ImportError as e:  # pragma: no cover - the extra is missing
            from inspector.adapters.errors import UsageError

            raise UsageError("to_pandas() needs pandas: pip install "
                             "'ckpt-inspector[pandas]'") from e
        return pandas.DataFrame(self.rows())

    def render(self, fmt: str = "table", style: Style | None = None) -> str:
        """The text the CLI prints for ``--format fmt`` (``table``, ``markdown``, ``json``,
        ``csv``; ``sarif`` for a scan)."""
        from importlib import import_module

        from inspector.reports.text import PLAIN

        module = import_module(self.renderer)
        text: str = module.render(dict(self.document), fmt, style or PLAIN)
        return text

    def _title(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.verdict}: {self._title()}>"

    def _repr_html_(self) -> str:
        rows = self.rows()
        columns: list[str] = []
        for r in rows[:HTML_ROWS]:
            columns += [k for k in r if k not in columns]
        head = "".join(f"<th>{escape(c)}</th>" for c in columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(_cell(r.get(c)))}</td>" for c in columns) + "</tr>"
            for r in rows[:HTML_ROWS])
        more = (f"<p>... {len(rows) - HTML_ROWS} more rows (to_pandas() has them all)</p>"
                if len(rows) > HTML_ROWS else "")
        table = (f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
                 if rows else "")
        return (f"<div><p><strong>{escape(self.verdict)}</strong> "
                f"{escape(self._title())} <code>{escape(self.schema)}</code></p>"
                f"{table}{more}</div>")


def _flat(row: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(row, Mapping):
        return {prefix or "value": row}
    out: dict[str, Any] = {}
    for k, v in row.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and k != "nonfinite":
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return str(v)


@dataclass(frozen=True, repr=False, eq=False)
class CheckResult(Result):
    """:func:`inspector.check`: a checkpoint against its architecture's prediction
    (``inspector.check/1``). ``verdict`` is ``verified``, ``mismatch``, ``incomplete`` or
    ``unsafe``; the rows are the groups (found, predicted, delta, status)."""

    strict: bool = False
    renderer: ClassVar[str] = "inspector.reports.check"
    row_key: ClassVar[str] = "groups"
    EXIT: ClassVar[Mapping[str, int]] = {"verified": 0, "mismatch": 1, "incomplete": 3,
                                         "unsafe": 1}

    @property
    def verdict(self) -> str:
        return str(self.document["verdict"])

    @property
    def path(self) -> str:
        return str(self.document["path"])

    @property
    def arch(self) -> str | None:
        """The architecture checked against (None: structural audit only)."""
        arch = self.document["arch"]
        return None if arch is None else str(arch)

    @property
    def exit_code(self) -> int:
        """0 verified, 1 mismatch or unsafe, 3 incomplete (1 with ``strict``)."""
        code = self.EXIT[self.verdict]
        return 1 if code == 3 and self.strict else code

    def _title(self) -> str:
        return f"{self.path} [{self.arch or 'structural audit'}]"


@dataclass(frozen=True, repr=False, eq=False)
class DiffResult(Result):
    """:func:`inspector.diff`: what differs between two checkpoints (``inspector.diff/1``).
    The rows are the tensors that differ (all of them with ``all=True``)."""

    renderer: ClassVar[str] = "inspector.reports.render_diff"
    row_key: ClassVar[str] = "tensors"

    @property
    def different(self) -> bool:
        """Structure differs (or, with ``values=True``, contents changed): the exit code."""
        return bool(self.document["different"])

    @property
    def summary(self) -> Mapping[str, int]:
        """Tensors per operation (unchanged, added, removed, reshaped, retyped, ...)."""
        return dict(self.document["summary"])

    @property
    def verdict(self) -> str:
        return "different" if self.different else "same"

    @property
    def exit_code(self) -> int:
        return 1 if self.different else 0

    def _title(self) -> str:
        counts = ", ".join(f"{n} {op}" for op, n in self.summary.items() if n)
        return (f"{self.document['a']['path']} -> {self.document['b']['path']}"
                + (f" ({counts})" if counts else ""))


@dataclass(frozen=True, repr=False, eq=False)
class ScanResult(Result):
    """:func:`inspector.scan`: a security verdict per file (``inspector.scan/1``). ``verdict``
    is the worst of the files' (``dangerous``, ``error``, ``foreign``, ``safe``); the rows are
    the files (path, verdict, kind, what)."""

    renderer: ClassVar[str] = "inspector.reports.scan"
    row_key: ClassVar[str] = "files"

    @property
    def summary(self) -> Mapping[str, int]:
        """Files scanned and per verdict, and links not followed."""
        return dict(self.document["summary"])

    @property
    def verdict(self) -> str:
        s = self.summary
        for v in ("dangerous", "error", "foreign"):
            if s[v]:
                return v
        return "safe"

    @property
    def exit_code(self) -> int:
        """picklescan's convention: 1 dangerous, else 2 error, else 0."""
        s = self.summary
        return 1 if s["dangerous"] else 2 if s["error"] else 0

    def rows(self) -> list[dict[str, Any]]:
        return [{"path": f["path"], "verdict": f["verdict"], "kind": f["kind"],
                 "what": "; ".join(i["text"] for i in f["findings"]),
                 "globals": len(f["globals"])}
                for f in self.to_dict()["files"]]

    def to_sarif(self) -> dict[str, Any]:
        """The scan as a SARIF 2.1.0 log (what ``--format sarif`` prints)."""
        from inspector.reports.sarif import sarif_log

        return sarif_log(self.to_dict())

    def _title(self) -> str:
        s = self.summary
        return (f"{s['files']} files: {s['safe']} safe, {s['foreign']} foreign, "
                f"{s['dangerous']} dangerous, {s['error']} error")


@dataclass(frozen=True, repr=False, eq=False)
class StatsResult(Result):
    """:func:`inspector.stats`: value statistics of one checkpoint (``inspector.stats/1``;
    rows: the tensors, or the groups with ``groups=True``) or of a run of checkpoints
    (``inspector.stats-run/1``; rows: one per checkpoint and group). ``verdict``: ``error``
    (NaN or Inf found), ``warning`` or ``clean``."""

    errors: bool = False
    groups: bool = False
    renderer: ClassVar[str] = "inspector.reports.render_stats"

    @property
    def run(self) -> bool:
        """Several checkpoints (a training run)."""
        return self.schema.startswith("inspector.stats-run")

    @property
    def findings(self) -> Sequence[Mapping[str, Any]]:
        return tuple(self.to_dict()["findings"])

    @property
    def verdict(self) -> str:
        severities = {f["severity"] for f in self.document["findings"]}
        return "error" if self.errors else "warning" if "warning" in severities else "clean"

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0

    def rows(self) -> list[dict[str, Any]]:
        doc = self.to_dict()
        if self.run:
            return [_flat({"path": s["path"], **g}) for s in doc["steps"] for g in s["groups"]]
        return [_flat(r) for r in doc["groups" if self.groups else "tensors"]]

    def render(self, fmt: str = "table", style: Style | None = None) -> str:
        from inspector.reports.render_stats import render
        from inspector.reports.text import PLAIN

        return render(dict(self.document), fmt, "groups" if self.groups else "tensors",
                      style or PLAIN)

    def _title(self) -> str:
        if self.run:
            return f"{len(self.document['checkpoints'])} checkpoints"
        s = self.document["summary"]
        return f"{self.document['path']} ({s['tensors']} tensors, {s['elements']} values)"


@dataclass(frozen=True, repr=False, eq=False)
class PredictResult(Result):
    """:func:`inspector.predict`: an architecture's tensors and counts from hyperparameters
    alone (``inspector.predict/1``); the rows are the predicted tensors."""

    renderer: ClassVar[str] = "inspector.reports.predict"
    row_key: ClassVar[str] = "tensors"

    @property
    def total(self) -> int:
        """The predicted parameter count."""
        return int(self.document["total"])

    @property
    def verdict(self) -> str:
        return f"{self.total:,} parameters"

    def _title(self) -> str:
        return f"{self.document['arch']} [scheme {self.document['scheme']}]"


@dataclass(frozen=True, repr=False, eq=False)
class BudgetResult(Result):
    """:func:`inspector.budget`: the hyperparameters whose predicted count hits a target
    (``inspector.budget/1``); the rows are the candidates, best first per architecture."""

    renderer: ClassVar[str] = "inspector.reports.budget"

    @property
    def target(self) -> int:
        return int(self.document["target"])

    @property
    def best(self) -> Mapping[str, Mapping[str, int]]:
        """Per architecture, the best candidate's values."""
        return {r["arch"]: dict(r["candidates"][0]["values"])
                for r in self.document["results"] if r["candidates"]}

    @property
    def verdict(self) -> str:
        return "; ".join(f"{arch}: " + ", ".join(f"{k}={v}" for k, v in values.items())
                         for arch, values in self.best.items()) or "no solution"

    def rows(self) -> list[dict[str, Any]]:
        return [{"arch": r["arch"], "rank": i + 1, **c["values"], "total": c["total"],
                 "deviation": c["deviation"]}
                for r in self.to_dict()["results"] for i, c in enumerate(r["candidates"])]

    def _title(self) -> str:
        return f"target {self.target:,}"
