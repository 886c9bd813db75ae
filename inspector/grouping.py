"""Grouping schemes: regex rule sets, shipped as YAML data, that bucket tensor names into groups.

A scheme (``inspector/schemes/*.yaml`` or a user file) has a ``name``, a ``description``, an
optional ``parameters`` table (integers such as ``depth``, substituted as ``${depth}`` in patterns),
a ``detect`` list (``{match: REGEX, score: N}`` over tensor names, ``{format: REGEX, score: N}``
over the adapter's format name; each rule that fires adds its score) with ``min_score``, and
ordered ``groups``, each ``{name, match: REGEX | [REGEX, ...], embedding: bool}``. The first
group whose pattern matches (``re.search``) a canonical name wins; a group name may be a template
(``"{top}"``) filled from the pattern's named captures; the captures ``layer``, ``direction`` and
``block`` give per-layer subtotals. Anything unmatched lands in the group ``other``.

Contract used by the other modules: :func:`get_scheme`, :func:`choose_scheme`, :attr:`Scheme.name`,
:meth:`Scheme.assign` -> :class:`Assignment`, :func:`group_counts`.
"""

from __future__ import annotations

import functools
import operator
import os
import re
from collections.abc import Iterable, Mapping, Sequence

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Role, TensorEntry

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

OTHER = "other"
AUTO = "auto"
FALLBACK = "prefix"
CAPTURES = ("layer", "direction", "block")
MAX_SCHEME_BYTES = 1_000_000
_PARAM = re.compile(r"\$\{([A-Za-z_]\w*)\}")
_LINE = "__line__"


class Assignment(tuple):
    """Where one tensor name goes. ``key`` is the name with its ``layer`` capture replaced by
    ``#`` (so identical repeated layers can be recognised); ``rule`` the index of the group rule
    that matched (``-1`` for ``other``). A tuple ``(group, layer, direction, block, key, rule)``
    (so :meth:`Scheme.assign_all` makes 50,000 of them at C speed); read-only."""

    __slots__ = ()

    def __new__(cls, group: str, layer: str | None = None, direction: str | None = None,
                block: str | None = None, key: str | None = None, rule: int = -1) -> Assignment:
        return tuple.__new__(cls, (group, layer, direction, block, key, rule))

    group = property(operator.itemgetter(0))
    layer = property(operator.itemgetter(1))
    direction = property(operator.itemgetter(2))
    block = property(operator.itemgetter(3))
    key = property(operator.itemgetter(4))
    rule = property(operator.itemgetter(5))

    def __repr__(self) -> str:
        return ("Assignment(group={!r}, layer={!r}, direction={!r}, block={!r}, key={!r}, "
                "rule={!r})".format(*self))


_assignments = functools.partial(map, functools.partial(tuple.__new__, Assignment))


class GroupRule:
    """One group of a scheme: a literal name or a template over the patterns' named captures
    (``fields``: the template's fields, empty for a literal name). The patterns are compiled
    on first use: a listing compiles only the chosen scheme's."""

    __slots__ = ("name", "sources", "fields", "embedding", "_patterns")

    def __init__(self, name: str, sources: tuple[str, ...], fields: tuple[str, ...],
                 embedding: bool = False) -> None:
        self.name = name
        self.sources = sources  # regexes, parameters substituted
        self.fields = fields
        self.embedding = embedding
        self._patterns: tuple[re.Pattern[str], ...] | None = None

    @property
    def patterns(self) -> tuple[re.Pattern[str], ...]:
        if self._patterns is None:
            self._patterns = tuple(re.compile(p) for p in self.sources)
        return self._patterns


class DetectRule:
    """One detect rule: ``score`` when ``pattern`` matches a tensor name (or, ``on_format``,
    the adapter's format name). ``required``: text every match contains (recorded for the
    built-ins by :func:`compile_builtins`), so a rule whose text is in no name is decided
    without compiling its regex."""

    __slots__ = ("source", "score", "on_format", "required", "_pattern")

    def __init__(self, source: str, score: int, on_format: bool,
                 required: str | None = None) -> None:
        self.source = source
        self.score = score
        self.on_format = on_format
        self.required = required
        self._pattern: re.Pattern[str] | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        if self._pattern is None:
            self._pattern = re.compile(self.source)
        return self._pattern


class Scheme:
    """A loaded, validated scheme; :meth:`assign` is memoised per name, and its regexes run
    once per pattern of names that differ only in their digits (see :class:`_Matcher`)."""

    __slots__ = ("name", "description", "source", "groups", "detect", "min_score", "parameters",
                 "_memo", "_matcher", "_unmemoized")

    def __init__(self, name: str, description: str, source: str, groups: tuple[GroupRule, ...],
                 detect: tuple[DetectRule, ...] = (), min_score: int = 1,
                 parameters: dict[str, int] | None = None) -> None:
        self.name = name
        self.description = description
        self.source = source  # "built-in" or the file it came from
        self.groups = groups
        self.detect = detect
        self.min_score = min_score
        self.parameters = {} if parameters is None else parameters
        self._memo: dict[str, Assignment] = {}
        self._matcher: _Matcher | None = None
        # assign_all's names and assignments, entered into _memo at the first assign()
        self._unmemoized: list[tuple[Sequence[str], list[Assignment]]] = []

    def __repr__(self) -> str:
        return f"Scheme({self.name!r}, source={self.source!r})"

    def assign(self, name: str) -> Assignment:
        """The group (and captured layer/direction/block) of one canonical tensor name."""
        hit = self._memo.get(name)
        if hit is None:
            if self._unmemoized:
                for names, out in self._unmemoized:
                    self._memo.update(zip(names, out, strict=True))
                self._unmemoized.clear()
                return self.assign(name)
            hit = self._memo[name] = self._assign(name)
        return hit

    def _assign(self, name: str) -> Assignment:
        if self._matcher is None:
            self._matcher = _Matcher(self.groups)
        return self._matcher.assign(name)

    def assign_all(self, names: Sequence[str]) -> list[Assignment]:
        """``[self.assign(n) for n in names]``, made per digit-pattern of names (a
        50,000-tensor model has a few dozen): the regexes, and the Python work, run once per
        pattern; each name only has its captures sliced out."""
        if self._matcher is None:
            self._matcher = _Matcher(self.groups)
        out = self._matcher.assign_all(names)
        self._unmemoized.append((names, out))  # a listing asks no more than this
        return out

    def score(self, names: Sequence[str], format: str | None = None) -> int:
        """Sum of the scores of the detect rules that fire on ``names`` / ``format``."""
        total = 0
        for d in self.detect:
            need = d.required
            if need is not None and not (
                need in format if d.on_format and format is not None
                else not d.on_format and any(need in n for n in names)
            ):
                continue  # the regex cannot match: its required text is nowhere
            if d.on_format:
                hit = format is not None and d.pattern.search(format) is not None
            else:
                search = d.pattern.search
                hit = any(search(n) for n in names)
            if hit:
                total += d.score
        return total

    def coverage(self, names: Sequence[str]) -> int:
        """How many of ``names`` land in a group other than ``other``."""
        return sum(1 for n in names if self.assign(n).rule >= 0)

    def is_embedding(self, a: Assignment) -> bool:
        """Whether the rule that placed ``a`` is flagged ``embedding: true``."""
        return a.rule >= 0 and self.groups[a.rule].embedding


# ---------------------------------------------------------------------------------------------
# Matching once per pattern of names

# Every ASCII digit -> "0" in the UTF-8 bytes (no multi-byte sequence holds a byte below 0x80):
# two names with the same key differ only in which digits they hold.
_ZERO = bytes.maketrans(b"123456789", b"000000000")


def _digit_key(name: str) -> bytes:
    return name.encode("utf-8", "surrogatepass").translate(_ZERO)


def _digit_keys(names: Sequence[str]) -> list[bytes]:
    """``[_digit_key(n) for n in names]`` in one pass of C: the names joined by newlines
    (when none holds one), translated once and split."""
    joined = "\n".join(names)
    if names and joined.count("\n") == len(names) - 1:
        return joined.encode("utf-8", "surrogatepass").translate(_ZERO).split(b"\n")
    return [_digit_key(n) for n in names]



class _Matcher:
    """The assignment of a name: the first (rule, pattern) that matches it, with its captures.

    A regex that treats all ASCII digits alike (no digit literal, no class holding some digits
    but not others, no backreference: :func:`digit_blind`) matches every name of one
    digit-pattern (``layers.0.attn`` and ``layers.7.attn``) at the same spans. Such regexes run
    once per pattern and their captures are sliced out of each name; the others (``linear[12]``)
    run per name, in rule order, only while no earlier regex has matched. The result is exactly
    that of trying every regex on every name.
    """

    __slots__ = ("_groups", "_rules", "_classes")

    def __init__(self, groups: Sequence[GroupRule]) -> None:
        self._groups = groups
        self._rules = [(i, rx, digit_blind(rx)) for i, g in enumerate(groups) for rx in g.patterns]
        # digit pattern -> (the digit-sensitive regexes to try first, the blind regexes' hit)
        self._classes: dict[bytes, tuple[tuple[tuple[int, re.Pattern[str]], ...], Any]] = {}

    def assign(self, name: str) -> Assignment:
        key = _digit_key(name)
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = self._pattern_of(name)
        unsure, hit = cls
        for index, rx in unsure:
            m = rx.search(name)
            if m is not None:
                caps = m.groupdict()
                span = m.span("layer") if caps.get("layer") is not None else None
                return self._assignment(name, index, caps, span)
        if hit is None:
            return _UNGROUPED
        index, group, layer, direction, block, fields = hit
        if group is None:  # a template: fill it from this name's captures
            values = {f: "" if s < 0 else name[s:e] for f, (s, e) in fields}
            group = self._groups[index].name.format_map(values) or OTHER
        return Assignment(
            group,
            None if layer is None else name[layer[0]:layer[1]],
            None if direction is None else name[direction[0]:direction[1]],
            None if block is None else name[block[0]:block[1]],
            None if layer is None else name[: layer[0]] + "#" + name[layer[1]:],
            index,
        )

    def assign_all(self, names: Sequence[str]) -> list[Assignment]:
        """:meth:`assign` of each name. Names of one digit-pattern whose hit needs no
        per-name regex and no template get their captures sliced out column by column."""
        members: dict[bytes, list[int]] = {}
        get = members.get
        for i, key in enumerate(_digit_keys(names)):
            group = get(key)
            if group is None:
                members[key] = [i]
            else:
                group.append(i)
        out: list[Assignment] = [_UNGROUPED] * len(names)
        for key, where in members.items():
            cls = self._classes.get(key)
            if cls is None:
                cls = self._classes[key] = self._pattern_of(names[where[0]])
            unsure, hit = cls
            if unsure or (hit is not None and hit[1] is None):  # per name: regexes or template
                for i in where:
                    out[i] = self.assign(names[i])
                continue
            if hit is None:
                continue  # _UNGROUPED already
            index, group, layer, direction, block, _ = hit
            these = [names[i] for i in where]
            nones = [None] * len(these)
            made = _assignments(zip(
                [group] * len(these),
                nones if layer is None else [n[layer[0]:layer[1]] for n in these],
                nones if direction is None else [n[direction[0]:direction[1]] for n in these],
                nones if block is None else [n[block[0]:block[1]] for n in these],
                nones if layer is None else
                [n[: layer[0]] + "#" + n[layer[1]:] for n in these],
                [index] * len(these), strict=True,
            ))
            for i, a in zip(where, made, strict=True):
                out[i] = a
        return out

    def _assignment(self, name: str, index: int, caps: dict[str, str | None],
                    layer_span: tuple[int, int] | None) -> Assignment:
        rule = self._groups[index]
        group = rule.name
        if rule.fields:
            group = rule.name.format_map({f: caps.get(f) or "" for f in rule.fields})
        key = None
        if layer_span is not None:
            start, end = layer_span
            key = name[:start] + "#" + name[end:]
        return Assignment(group or OTHER, caps.get("layer"), caps.get("direction"),
                          caps.get("block"), key, index)

    def _pattern_of(self, name: str) -> tuple[tuple[tuple[int, re.Pattern[str]], ...], Any]:
        """For the digit-pattern of ``name``: the digit-sensitive regexes before the first blind
        one that matches, and that one's hit (rule index, literal group name or None for a
        template, spans of layer, direction and block (None when absent), template fields)."""
        unsure = []
        for index, rx, blind in self._rules:
            if not blind:
                unsure.append((index, rx))
                continue
            m = rx.search(name)
            if m is None:
                continue
            rule = self._groups[index]

            def span(g: str, m: re.Match[str] = m) -> tuple[int, int] | None:
                if g not in m.re.groupindex or m.group(g) is None:
                    return None
                return m.span(g)

            fields = tuple((f, m.span(f) if f in m.re.groupindex else (-1, -1))
                           for f in rule.fields)
            group = None if rule.fields else rule.name
            return tuple(unsure), (index, group, span("layer"), span("direction"), span("block"),
                                   fields)
        return tuple(unsure), None


_UNGROUPED = Assignment(OTHER)


def required_text(pattern: str) -> str | None:
    """The longest run of plain characters every match of ``pattern`` contains (its top-level
    literals), or None (case-insensitive, parameterised, or no run of two characters)."""
    if "${" in pattern:
        return None
    try:
        from re import _parser as sre  # type: ignore[attr-defined]
    except ImportError:  # Python 3.10
        import sre_parse as sre  # type: ignore[no-redef]
    parsed = sre.parse(pattern)
    if parsed.state.flags & re.IGNORECASE:
        return None
    best, run = "", ""
    for op, av in parsed:
        if getattr(op, "name", None) == "LITERAL":
            run += chr(av)
            best = max(best, run, key=len)
        else:
            run = ""
    return best if len(best) >= 2 else None


def digit_blind(rx: re.Pattern[str]) -> bool:
    """Whether ``rx`` cannot tell one ASCII digit from another: matching it on names that
    differ only in their digits gives the same spans. False when unsure."""
    try:
        from re import _parser as sre  # type: ignore[attr-defined]
    except ImportError:  # Python 3.10
        import sre_parse as sre  # type: ignore[no-redef]
    try:
        return _blind(sre.parse(rx.pattern, rx.flags))
    except Exception:  # noqa: BLE001 - an unknown parse tree is simply not proven blind
        return False


def _blind(items: Any) -> bool:
    for op, av in items:
        name = getattr(op, "name", None)
        if name in ("LITERAL", "NOT_LITERAL"):
            if 0x30 <= av <= 0x39:
                return False
        elif name == "IN":
            if not _class_blind(av):
                return False
        elif name in ("ANY", "AT"):
            continue
        elif name == "SUBPATTERN":
            if not _blind(av[-1]):
                return False
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            if not _blind(av[2]):
                return False
        elif name == "BRANCH":
            if not all(_blind(b) for b in av[1]):
                return False
        elif name in ("ASSERT", "ASSERT_NOT"):
            if not _blind(av[1]):
                return False
        elif name == "ATOMIC_GROUP":
            if not _blind(av):
                return False
        elif name == "GROUPREF_EXISTS":
            if not (_blind(av[1]) and (av[2] is None or _blind(av[2]))):
                return False
        else:  # GROUPREF (a backreference compares digits) and anything unknown
            return False
    return True


_ALL_DIGITS = {"CATEGORY_DIGIT", "CATEGORY_WORD", "CATEGORY_NOT_SPACE", "CATEGORY_UNI_DIGIT",
               "CATEGORY_UNI_WORD", "CATEGORY_UNI_NOT_SPACE", "CATEGORY_LOC_WORD",
               "CATEGORY_NOT_LINEBREAK", "CATEGORY_UNI_NOT_LINEBREAK"}
_NO_DIGITS = {"CATEGORY_NOT_DIGIT", "CATEGORY_SPACE", "CATEGORY_NOT_WORD",
              "CATEGORY_UNI_NOT_DIGIT", "CATEGORY_UNI_SPACE", "CATEGORY_UNI_NOT_WORD",
              "CATEGORY_LOC_NOT_WORD", "CATEGORY_LINEBREAK", "CATEGORY_UNI_LINEBREAK"}


def _class_blind(items: Any) -> bool:
    """A character class holds all ten ASCII digits or none of them."""
    digits: set[int] = set()
    for op, av in items:
        name = getattr(op, "name", None)
        if name == "NEGATE":
            continue
        if name == "LITERAL":
            if 0x30 <= av <= 0x39:
                digits.add(av)
        elif name == "RANGE":
            digits.update(c for c in range(0x30, 0x3A) if av[0] <= c <= av[1])
        elif name == "CATEGORY":
            cat = getattr(av, "name", None)
            if cat in _ALL_DIGITS:
                digits.update(range(0x30, 0x3A))
            elif cat not in _NO_DIGITS:
                return False
        else:
            return False
    return len(digits) in (0, 10)


# ---------------------------------------------------------------------------------------------
# Loading and validation


def _yaml_with_lines(text: str, path: str) -> Any:
    """The scheme file as plain data, each mapping's first line under ``__line__``."""
    from inspector.adapters.yaml_safe import YamlProblem, parse_yaml

    try:
        return parse_yaml(text, line_key=_LINE)
    except YamlProblem as e:
        where = f"line {e.line}" if e.line is not None else None
        raise UsageError(f"not valid YAML ({e.problem})", path, where) from None


class _Checker:
    """Validation helpers that raise :class:`UsageError` naming file, scheme, group and line."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.scheme = "?"

    def fail(self, message: str, node: Any = None, group: str | None = None) -> None:
        where = [f"scheme {self.scheme!r}"]
        if group is not None:
            where.append(f"group {group!r}")
        if isinstance(node, dict) and _LINE in node:
            where.append(f"line {node[_LINE]}")
        raise UsageError(message, self.path, ", ".join(where))

    def regex(self, text: Any, params: Mapping[str, int], node: Any, group: str | None = None):
        if not isinstance(text, str) or not text:
            self.fail(f"pattern must be a non-empty string, got {text!r}", node, group)
        unknown = sorted(set(_PARAM.findall(text)) - set(params))
        if unknown:
            self.fail(f"pattern {text!r} uses undeclared parameter(s) {unknown}", node, group)
        expanded = _PARAM.sub(lambda m: str(params[m.group(1)]), text)
        try:
            return re.compile(expanded)
        except re.error as e:
            self.fail(f"bad regex /{text}/ ({e})", node, group)

    def keys(self, node: Any, required: set[str], allowed: set[str], what: str,
             group: str | None = None) -> None:
        if not isinstance(node, dict):
            self.fail(f"{what} must be a mapping, got {type(node).__name__}", None, group)
        missing = sorted(required - node.keys())
        if missing:
            self.fail(f"{what} is missing field(s) {', '.join(missing)}", node, group)
        extra = sorted(set(node) - allowed - required - {_LINE})
        if extra:
            self.fail(f"{what} has unknown field(s) {', '.join(map(str, extra))}", node, group)


def parse_scheme(data: Any, source: str, params: Mapping[str, int] | None = None) -> Scheme:
    """Validate parsed YAML ``data`` and build a :class:`Scheme` (``source`` names the file)."""
    c = _Checker(source)
    c.keys(data, {"name", "groups"}, {"description", "parameters", "detect", "min_score"},
           "a scheme")
    if not isinstance(data["name"], str) or not re.fullmatch(r"[A-Za-z0-9][\w.-]*", data["name"]):
        c.fail(f"name must be a word such as 'my-scheme', got {data['name']!r}", data)
    c.scheme = data["name"]
    description = data.get("description", "")
    if not isinstance(description, str):
        c.fail("description must be a string", data)
    values = _parameters(c, data.get("parameters") or {}, params or {})
    detect = []
    raw_detect = data.get("detect") or []
    if not isinstance(raw_detect, list):
        c.fail("detect must be a list of {match|format, score}", data)
    for d in raw_detect:
        c.keys(d, {"score"}, {"match", "format"}, "a detect rule")
        if ("match" in d) == ("format" in d):
            c.fail("a detect rule needs exactly one of match, format", d)
        if not isinstance(d["score"], int) or isinstance(d["score"], bool):
            c.fail(f"score must be an integer, got {d['score']!r}", d)
        on_format = "format" in d
        rx = c.regex(d["format" if on_format else "match"], values, d)
        rule = DetectRule(rx.pattern, d["score"], on_format)
        rule._pattern = rx
        detect.append(rule)
    min_score = data.get("min_score", 1)
    if not isinstance(min_score, int) or isinstance(min_score, bool):
        c.fail(f"min_score must be an integer, got {min_score!r}", data)
    groups = data["groups"]
    if not isinstance(groups, list) or not groups:
        c.fail("groups must be a non-empty list", data)
    return Scheme(c.scheme, description.strip(), source,
                  tuple(_group(c, g, values) for g in groups), tuple(detect), min_score, values)


def _parameters(c: _Checker, declared: Any, given: Mapping[str, int]) -> dict[str, int]:
    if not isinstance(declared, dict):
        c.fail("parameters must be a mapping of name -> {default, min, max}", None)
    values: dict[str, int] = {}
    for pname, spec in declared.items():
        if pname == _LINE:
            continue
        c.keys(spec, {"default"}, {"min", "max", "help"}, f"parameter {pname!r}")
        bounds = [spec.get("min"), spec.get("max"), spec["default"]]
        if not all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in bounds):
            c.fail(f"parameter {pname!r}: default, min and max must be integers", spec)
        value = given.get(pname, spec["default"])
        lo, hi = spec.get("min"), spec.get("max")
        if not isinstance(value, int) or (lo is not None and value < lo) or (
            hi is not None and value > hi
        ):
            raise UsageError(f"scheme {c.scheme!r}: {pname} must be an integer in "
                             f"[{lo}, {hi}], got {value!r}")
        values[pname] = value
    unknown = sorted(set(given) - set(values))
    if unknown:
        raise UsageError(f"scheme {c.scheme!r} takes no parameter(s) {', '.join(unknown)}")
    return values


def _group(c: _Checker, g: Any, values: Mapping[str, int]) -> GroupRule:
    c.keys(g, {"name", "match"}, {"embedding", "description"}, "a group")
    name = g["name"]
    if not isinstance(name, str) or not name.strip():
        c.fail(f"group name must be a non-empty string, got {name!r}", g)
    from string import Formatter

    try:
        fields = tuple(f for _, f, _, _ in Formatter().parse(name) if f is not None)
    except ValueError as e:
        c.fail(f"bad group name template ({e})", g, name)
    if any(not re.fullmatch(r"[A-Za-z_]\w*", f) for f in fields):
        c.fail("group name template fields must be plain capture names like {top}", g, name)
    raw = g["match"] if isinstance(g["match"], list) else [g["match"]]
    if not raw:
        c.fail("match must name at least one pattern", g, name)
    patterns = tuple(c.regex(p, values, g, name) for p in raw)
    for rx in patterns:
        missing = sorted(set(fields) - set(rx.groupindex))
        if missing:
            c.fail(f"pattern {rx.pattern!r} lacks the capture(s) {missing} its name uses", g, name)
    if not isinstance(g.get("embedding", False), bool):
        c.fail("embedding must be true or false", g, name)
    rule = GroupRule(name, tuple(rx.pattern for rx in patterns), fields, g.get("embedding", False))
    rule._patterns = patterns
    return rule


SCHEMES_DIR = "schemes"
COMPILED_MODULE = "builtin_schemes.py"  # in the package, next to schemes/


def _read_builtins() -> dict[str, bytes]:
    """Built-in scheme name -> the bytes of its YAML file, read from the package directory
    (through importlib.resources when the package is not on disk as files)."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), SCHEMES_DIR)
    if os.path.isdir(here):
        texts = {}
        for name in os.listdir(here):
            if name.endswith(".yaml"):
                with open(os.path.join(here, name), "rb") as f:
                    texts[name[: -len(".yaml")]] = f.read()
        return texts
    from importlib.resources import files

    return {p.name[: -len(".yaml")]: p.read_bytes()
            for p in (files("inspector") / SCHEMES_DIR).iterdir() if p.name.endswith(".yaml")}


_builtin_cache: dict[tuple[str, tuple], Scheme] = {}
_builtin_texts: dict[str, bytes] | None = None
_compiled: dict[str, dict[str, Any]] | None = None


def _texts() -> dict[str, bytes]:
    """Built-in scheme name -> the bytes of its YAML file."""
    global _builtin_texts
    if _builtin_texts is None:
        _builtin_texts = _read_builtins()
    return _builtin_texts


def builtin_names() -> list[str]:
    """Names of the schemes shipped in the package, sorted."""
    return sorted(_texts())


def _fingerprint(data: bytes) -> tuple[int, int]:
    from binascii import crc32

    return len(data), crc32(data)


def _compiled_schemes() -> dict[str, dict[str, Any]]:
    """The built-in schemes as validated data (``inspector/builtin_schemes.py``, generated from
    the YAML files by :func:`compile_builtins`), or ``{}`` when any YAML file differs from the
    one it was generated from (added, removed or edited): a stale table is never used."""
    global _compiled
    if _compiled is None:
        _compiled = {}
        try:
            from inspector import builtin_schemes as gen
        except ImportError:
            return _compiled
        texts = _texts()
        if gen.SOURCES.keys() == texts.keys() and all(
            tuple(gen.SOURCES[n]) == _fingerprint(t) for n, t in texts.items()
        ):
            _compiled = gen.SCHEMES
    return _compiled


def _load_text(text: str, source: str, params: Mapping[str, int] | None) -> Scheme:
    return parse_scheme(_yaml_with_lines(text, source), source, params)


def _from_compiled(name: str, data: Mapping[str, Any], params: Mapping[str, int] | None) -> Scheme:
    """A built-in scheme from its generated, already validated data; only ``params`` are
    checked (and substituted) here, and regexes compile on first use."""
    c = _Checker(f"built-in:{name}.yaml")
    c.scheme = name
    values = _parameters(c, data["parameters"], params or {})

    def expand(pattern: str) -> str:
        for k, v in values.items():
            pattern = pattern.replace("${" + k + "}", str(v))
        return pattern

    detect = tuple(DetectRule(expand(p), score, on_format, required)
                   for p, score, on_format, required in data["detect"])
    groups = tuple(GroupRule(g, tuple(expand(p) for p in patterns), tuple(fields), embedding)
                   for g, patterns, fields, embedding in data["groups"])
    return Scheme(name, data["description"], "built-in", groups, detect, data["min_score"], values)


def compile_builtins() -> str:
    """The text of ``inspector/builtin_schemes.py``: every built-in YAML file validated (as
    :func:`get_scheme` does) and stored as plain data with its size and CRC-32, so a start
    needs neither the YAML parser nor the validation. Regenerate after editing a scheme::

        python -c "from inspector.grouping import write_builtins; write_builtins()"
    """
    from pprint import pformat

    sources, schemes = {}, {}
    for name, text in sorted(_texts().items()):
        source = f"built-in:{name}.yaml"
        data = _yaml_with_lines(text.decode("utf-8"), source)
        scheme = parse_scheme(data, source)  # validates
        declared = {k: {f: v for f, v in spec.items() if f in ("default", "min", "max")}
                    for k, spec in (data.get("parameters") or {}).items() if k != _LINE}
        raw_detect = []
        for d in data.get("detect") or []:
            pattern = d.get("match", d.get("format"))
            raw_detect.append((pattern, d["score"], "format" in d, required_text(pattern)))
        raw_groups = [(g["name"], tuple(g["match"] if isinstance(g["match"], list)
                                        else [g["match"]]), rule.fields, rule.embedding)
                      for g, rule in zip(data["groups"], scheme.groups, strict=True)]
        sources[name] = _fingerprint(text)
        schemes[name] = {"description": scheme.description, "parameters": declared,
                         "detect": raw_detect, "min_score": scheme.min_score,
                         "groups": raw_groups}
    return (
        '"""The built-in grouping schemes (``schemes/*.yaml``) as validated data. GENERATED by\n'
        "``inspector.grouping.compile_builtins()`` -- do not edit; a YAML file that differs from\n"
        'the size and CRC-32 recorded here makes the loader parse the YAML instead."""\n\n'
        "# ruff: noqa: E501\n"
        f"SOURCES = {pformat(sources, width=100)}\n\n"
        f"SCHEMES = {pformat(schemes, width=100)}\n"
    )


def write_builtins() -> None:
    """Write :func:`compile_builtins` to ``inspector/builtin_schemes.py``."""
    from pathlib import Path

    target = Path(__file__).resolve().parent / COMPILED_MODULE
    target.write_text(compile_builtins(), encoding="utf-8")


def get_scheme(name_or_path: str, params: Mapping[str, int] | None = None) -> Scheme:
    """A built-in scheme by name, or a scheme YAML file; ``params`` set its declared parameters
    (e.g. ``{"depth": 2}`` for ``prefix``). :class:`UsageError` when unknown or invalid."""
    key = (name_or_path, tuple(sorted((params or {}).items())))
    if name_or_path in _texts():
        if key not in _builtin_cache:
            compiled = _compiled_schemes().get(name_or_path)
            if compiled is not None:
                scheme = _from_compiled(name_or_path, compiled, params)
            else:
                text = _texts()[name_or_path].decode("utf-8")
                scheme = _load_text(text, f"built-in:{name_or_path}.yaml", params)
                scheme.source = "built-in"
            _builtin_cache[key] = scheme
        return _builtin_cache[key]
    from pathlib import Path

    path = Path(name_or_path)
    if not path.is_file():
        raise UsageError(
            f"unknown scheme {name_or_path!r}: neither a built-in "
            f"({', '.join(builtin_names())}) nor a file"
        )
    try:
        if path.stat().st_size > MAX_SCHEME_BYTES:
            raise UsageError(f"scheme file larger than {MAX_SCHEME_BYTES} bytes", str(path))
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read scheme file ({e})", str(path)) from None
    return _load_text(text, str(path), params)


def scores(names: Sequence[str], format: str | None = None) -> dict[str, int]:
    """Every built-in scheme's detector score on ``names`` (and the format name)."""
    return {n: get_scheme(n).score(names, format) for n in builtin_names()}


_DIGITS = re.compile(r"\d+")


def detects(scheme: str, names: Sequence[str], format: str | None = None) -> bool:
    """Whether the built-in ``scheme``'s own detector recognises these names: the one place a
    naming convention is recognised (architectures ask here instead of repeating it)."""
    s = get_scheme(scheme)
    return s.score(representatives(names), format) >= s.min_score


def representatives(names: Iterable[str]) -> list[str]:
    """One name per pattern of names that differ only in their numbers (``layers.0.x`` and
    ``layers.11.x``): detection looks at naming conventions, and a 50,000-tensor model has a few
    hundred of them."""
    seen: dict[str, str] = {}
    zeroed: set[bytes] = set()  # names equal up to each digit share their "#" pattern: skip them
    names = names if isinstance(names, (list, tuple)) else list(names)
    for n, z in zip(names, _digit_keys(names), strict=True):
        if z not in zeroed:
            zeroed.add(z)
            seen.setdefault(_DIGITS.sub("#", n), n)
    return list(seen.values())


def choose_scheme(
    names: Sequence[str], format: str | None = None, params: Mapping[str, int] | None = None
) -> Scheme:
    """The best-scoring built-in for these names (ties: more names grouped, then name order);
    ``prefix`` when no scheme reaches its ``min_score``. ``params`` go to the chosen scheme when
    it declares them (``depth`` only concerns ``prefix``)."""
    names = representatives(names)
    eligible = []
    for n in builtin_names():
        s = get_scheme(n)
        score = s.score(names, format)
        if n != FALLBACK and score >= s.min_score:
            eligible.append((score, n))
    chosen = FALLBACK
    if eligible:
        best = max(score for score, _ in eligible)
        tied = sorted(n for score, n in eligible if score == best)
        if len(tied) > 1:
            cover = {n: get_scheme(n).coverage(names) for n in tied}
            tied.sort(key=lambda n: -cover[n])  # stable: name order among equal coverage
        chosen = tied[0]
    scheme = get_scheme(chosen)
    own = {k: v for k, v in (params or {}).items() if k in scheme.parameters}
    return get_scheme(chosen, own) if own else scheme


def resolve(spec: str | None, names: Sequence[str], format: str | None = None,
            params: Mapping[str, int] | None = None) -> Scheme:
    """``--scheme`` as the CLI takes it: ``auto``/None chooses, anything else is a name or file."""
    if spec in (None, AUTO):
        return choose_scheme(names, format, params)
    scheme = get_scheme(spec)
    own = {k: v for k, v in (params or {}).items() if k in scheme.parameters}
    return get_scheme(spec, own) if own else scheme


# ---------------------------------------------------------------------------------------------
# Counting


def ordered_groups(scheme: Scheme, names: Iterable[str]) -> list[str]:
    """Distinct groups of ``names`` in scheme order: rule order, templated groups in order of
    first appearance, ``other`` last."""
    first: dict[str, tuple[int, int]] = {}
    for i, n in enumerate(names):
        a = scheme.assign(n)
        if a.group not in first:
            rule = a.rule if a.rule >= 0 else len(scheme.groups)
            first[a.group] = (rule, i)
    return sorted(first, key=lambda g: (g == OTHER, first[g]))


def group_counts(scheme: Scheme, items: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Sum of counts per group for ``(name, count)`` items, in the scheme's group order."""
    items = list(items)
    sums: dict[str, int] = {}
    for name, count in items:
        g = scheme.assign(name).group
        sums[g] = sums.get(g, 0) + count
    return {g: sums[g] for g in ordered_groups(scheme, (n for n, _ in items))}


# ---------------------------------------------------------------------------------------------
# Report sections (used by inspector.reports.listing)


_INDEX = re.compile(r"(?<=\.)(\d+)(?=\.|$)")


def numbered_layer(name: str) -> tuple[str, str] | None:
    """The layer of a name the scheme captures no layer in: its first numbered component
    (``layers.3.bias`` -> (``layers.``, ``3``)), else None. The statistics' per-layer norms and
    the report's per-layer parameters use the same rule."""
    m = _INDEX.search(name)
    return None if m is None else (name[:m.start()], m.group(1))


def summarize(
    scheme: Scheme, entries: Sequence[TensorEntry], unique: Sequence[TensorEntry],
    per_layer: bool = True, placed: Sequence[Assignment] | None = None,
) -> list[dict[str, Any]]:
    """One record per group (scheme order): ``tensors`` (listed entries, tied aliases
    included), ``parameters`` / ``elements`` / ``bytes`` (tied tensors once, so the groups sum
    to the listing's totals), ``share`` of all parameters, ``embedding``, and where the scheme
    captures layers ``layers`` (one record per block/layer/direction) and ``repeats`` (layers
    with identical tensors collapsed: names equal up to the layer number, same shapes/dtypes);
    without ``per_layer``, neither of these two. ``placed``: the entries' assignments, when
    the caller has them (:meth:`Scheme.assign_all`)."""
    if placed is None:
        placed = scheme.assign_all([t.name for t in entries])
    # No tied aliases (``unique`` is ``entries``, entry for entry): every entry is counted.
    everything = len(unique) == len(entries) and all(map(operator.is_, unique, entries))
    counted = set() if everything else {id(t) for t in unique}
    # One running record per (group, block, layer, direction), the layer None for a group's
    # tensors outside any layer: [tensors, parameters, elements, bytes, tied aliases,
    # signature]. Groups are summed from their records, and dicts of the report's shape are
    # made at the end.
    records: dict[tuple, list[Any]] = {}
    first: dict[str, tuple[bool, int, int]] = {}  # the order of ordered_groups
    rule_of: dict[str, Assignment] = {}
    unplaced = len(scheme.groups)
    parameter = Role.PARAMETER
    for t, a in zip(entries, placed, strict=True):
        group, layer, direction, block, key, rule = a
        slot = (group, block, layer, direction) if per_layer and layer is not None else group
        rec = records.get(slot)
        if rec is None:
            rec = records[slot] = [0, 0, 0, 0, 0, []]
            if group not in first:
                # the groups' order of first appearance is their entries' order
                first[group] = (group == OTHER, rule if rule >= 0 else unplaced, len(first))
                rule_of[group] = a
        rec[0] += 1
        if everything or id(t) in counted:
            n = t.numel
            if t.role is parameter:
                rec[1] += n
            rec[2] += n
            rec[3] += t.nbytes or 0
        else:
            rec[4] += 1
        if slot is not group:
            rec[5].append((key, t.shape, t.dtype, t.role))
    sums: dict[str, list[int]] = {g: [0, 0, 0, 0, 0] for g in first}
    layers: dict[str, list[tuple]] = {}
    for slot, rec in records.items():
        if slot.__class__ is str:
            g = sums[slot]
        else:
            g = sums[slot[0]]
            in_group = layers.get(slot[0])
            if in_group is None:
                in_group = layers[slot[0]] = []
            in_group.append((slot, rec))
        g[0] += rec[0]
        g[1] += rec[1]
        g[2] += rec[2]
        g[3] += rec[3]
        g[4] += rec[4]
    total = sum(g[1] for g in sums.values())
    out = []
    for name in sorted(first, key=first.__getitem__):
        s = sums[name]
        g = {"name": name, "tensors": s[0], "parameters": s[1], "elements": s[2], "bytes": s[3],
             "tied_aliases": s[4], "embedding": scheme.is_embedding(rule_of[name])}
        g["share"] = round(g["parameters"] / total, 6) if total else 0.0
        if name in layers:
            g["repeats"], g["layers"] = _layer_records(layers[name])
        out.append(g)
    return out


def _layer_records(found: list[tuple[tuple, list[Any]]]) -> tuple[list[dict], list[dict]]:
    """A group's ``repeats`` and ``layers`` from its ``((group, block, layer, direction),
    record)`` pairs in order of first appearance: layers sorted by block (first appearance),
    layer number, direction."""
    blocks: dict[str | None, int] = {}
    for (_, block, _, _), _ in found:
        if block not in blocks:
            blocks[block] = len(blocks)
    # numbers in numeric order, before other layer names; a key per record without a call
    # per record (20,000 of them); isdecimal, not isdigit: int("²") fails
    order = sorted(
        (blocks[block], *((0, int(layer), "") if layer.isdecimal() else (1, 0, layer)),
         direction or "", i)
        for i, ((_, block, layer, direction), _) in enumerate(found))
    found = [found[key[-1]] for key in order]
    repeats: dict[tuple, dict[str, Any]] = {}
    layers = []
    for (_, block, layer, direction), r in found:
        layers.append({"block": block, "layer": layer, "direction": direction, "tensors": r[0],
                       "parameters": r[1], "elements": r[2], "bytes": r[3]})
        # Layers with the same block, direction and tensors (names up to the layer number,
        # shapes, dtypes) as one row ``layers.#`` with its ``count``; numbers are per layer.
        key = (block, direction, tuple(sorted(r[5])))
        row = repeats.get(key)
        if row is None:
            repeats[key] = {"block": block, "direction": direction, "layers": [layer],
                            "tensors": r[0], "parameters": r[1], "elements": r[2],
                            "bytes": r[3]}
        else:
            row["layers"].append(layer)
    for row in repeats.values():
        row["count"] = len(row["layers"])
        row["label"] = "layers.#" if row["count"] > 1 else f"layers.{row['layers'][0]}"
    return list(repeats.values()), layers


def embedding_split(groups: Sequence[Mapping[str, Any]]) -> dict[str, int] | None:
    """Embedding and non-embedding parameters, when the scheme flags embedding groups."""
    if not any(g["embedding"] for g in groups):
        return None
    emb = sum(g["parameters"] for g in groups if g["embedding"])
    return {"embedding": emb, "non_embedding": sum(g["parameters"] for g in groups) - emb}
