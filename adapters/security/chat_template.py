"""Jinja chat templates (GGUF ``tokenizer.chat_template``, ``tokenizer_config.json``'s
``chat_template``), examined for the features that leave Jinja's sandbox, never rendered.

transformers renders a chat template in ``ImmutableSandboxedEnvironment``; llama-cpp-python
before 0.2.72 rendered a GGUF's template in a plain ``jinja2.Environment`` (CVE-2024-34359),
where ``{{ cycler.__init__.__globals__.os.popen('id').read() }}`` runs a command. Every known
escape walks from an object to Python's internals through an attribute whose name starts with
``_`` (``__class__``, ``__mro__``, ``__subclasses__``, ``__globals__``, ``__init__``,
``__builtins__``, ``__import__``), reached by ``.name``, ``["name"]`` or ``|attr("name")``, or
starts from one of Jinja's helper objects (``cycler``, ``joiner``, ``lipsum``, ``self``) or a
web framework's globals (``config``, ``request``).

The template is parsed with Jinja's own parser when jinja2 is installed (parsing runs nothing)
and its syntax tree walked; it is dangerous when it

* reads an attribute or constant item whose name starts with ``_``;
* uses ``|attr(...)`` with a name that is not a constant plain identifier;
* holds a string constant with ``__``, or builds one from pieces (``~``, ``+``, ``%`` of
  pieces starting or ending with ``_``; ``|join``, ``|format``, ``|replace`` of pieces holding
  ``_``; ``%c``), or takes characters out of a constant holding ``_`` (``'a_b'[1]``,
  ``'a_b'|list``);
* looks an item up by a computed string or by a special token's text (``x[bos_token]``: the
  file supplies it, and outside a sandbox Jinja's item lookup falls back to attributes);
* names one of the helper or framework globals above, or ``os``, ``popen``, ``__builtins__``;
* imports, includes or extends another template.

``namespace`` is used by real templates (Llama 3.1, Qwen 2.5) to carry loop state; reaching
through it needs one of the attributes above. A template with none of what the walk looks for
(:func:`_plain`, a text check) is clean without importing jinja2. Without jinja2 any other
template is scanned block by block (any ``__``, any of those names, any ``attr`` filter:
dangerous) and otherwise reported as not fully examined (an error line).
"""

from __future__ import annotations

import re

DANGEROUS, ERROR = "dangerous", "error"  # examination's levels (that module is heavy to import)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_TEMPLATE_CHARS = 1 << 20
MAX_NODES = 200_000
ESCAPE_NAMES = frozenset({"cycler", "joiner", "lipsum", "self", "config", "request", "os",
                          "popen", "__builtins__", "url_for", "get_flashed_messages", "g",
                          "session"})
BUILDERS = frozenset({"join", "format", "replace"})
# Values the loader passes to the template from the same file (special tokens): a string the
# file chooses, so not a safe item key (Jinja's getitem falls back to getattr).
TOKEN_NAMES = frozenset({"bos_token", "eos_token", "unk_token", "pad_token", "sep_token",
                         "cls_token", "mask_token", "additional_special_tokens"})
_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")
# Attributes Jinja's sandbox refuses besides those starting with '_' (jinja2.sandbox
# is_internal_attribute): a type's mro, generator / coroutine frames and code, method and
# function internals, and every attribute of a frame, code object or traceback. Outside a
# sandbox, ``([1]|map("string")).gi_frame.f_globals`` is a module's globals.
_INTERNAL = re.compile(r"_|mro\Z|(?:gi|cr|ag|im|func|f|co|tb)_")
# Filters that read an attribute path named by an argument (jinja2 make_attrgetter, which
# falls back from item to attribute outside a sandbox): the positional index and keyword.
ATTRIBUTE_ARGS = {"map": (None, "attribute"), "selectattr": (0, None), "rejectattr": (0, None),
                  "groupby": (0, "attribute"), "sort": (2, "attribute"),
                  "sum": (0, "attribute"), "min": (1, "attribute"), "max": (1, "attribute"),
                  "unique": (1, "attribute")}


def examine_template(text: str) -> list[tuple[str, str]]:
    """``(level, text)`` for one template: empty when nothing in it leaves the sandbox."""
    if len(text) > MAX_TEMPLATE_CHARS:
        return [(ERROR, f"chat template of {len(text):,} characters (limit "
                        f"{MAX_TEMPLATE_CHARS:,}): not examined")]
    if _plain(text):
        return []  # none of what the walk looks for is in the text: jinja2 is not imported
    try:
        import jinja2  # noqa: F401
    except ImportError:
        reasons = _scan_blocks(text)
        if not reasons:
            return [(ERROR, "chat template not fully examined: jinja2 is not installed (the "
                            "blocks hold no '__', escape name or attr filter; pip install "
                            "jinja2 to walk its syntax tree)")]
    else:
        parsed = _parse(text)
        if isinstance(parsed, str):
            return [(ERROR, f"chat template that Jinja does not parse ({parsed})")]
        try:
            reasons = _walk(parsed)
        except RecursionError:
            return [(ERROR, "chat template nested too deeply to examine")]
    if not reasons:
        return []
    shown = "; ".join(sorted(set(reasons))[:5])
    return [(DANGEROUS, f"Jinja chat template reaches outside the sandbox: {shown} (rendered "
                        "by chat front-ends; outside a sandbox, as llama-cpp-python before "
                        "0.2.72 did, this runs code: CVE-2024-34359)")]


def template_texts(value: Any) -> list[tuple[str, str]]:
    """``(label, template)`` of a ``chat_template`` value: a string, or transformers' list of
    ``{"name", "template"}``."""
    if isinstance(value, str):
        return [("chat_template", value)]
    out = []
    if isinstance(value, list):
        for i, item in enumerate(value[:1000]):
            if isinstance(item, dict) and isinstance(item.get("template"), str):
                name = item.get("name")
                out.append((f"chat_template[{name if isinstance(name, str) else i}]",
                            item["template"]))
    return out


def _parse(text: str) -> Any:
    import jinja2

    try:  # parse only, nothing is rendered; with the tags transformers' environment adds
        return jinja2.Environment(extensions=["jinja2.ext.loopcontrols", _generation()]
                                  ).parse(text)
    except jinja2.TemplateSyntaxError as e:
        return f"line {e.lineno}: {e.message}"
    except RecursionError:
        return "nested too deeply"


def _generation() -> type:
    """The ``{% generation %}...{% endgeneration %}`` block transformers' chat-template
    environment adds (``AssistantTracker``, marking assistant text for masks): parsed as its
    body inside a call block, as that extension parses it."""
    from jinja2 import nodes
    from jinja2.ext import Extension

    class Generation(Extension):
        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_generation"), [], [], body
                                   ).set_lineno(lineno)

    return Generation


def _walk(tree: Any) -> list[str]:
    from jinja2 import nodes

    out: list[str] = []
    counted = zip(range(MAX_NODES + 1), tree.find_all(nodes.Node), strict=False)
    if sum(1 for _ in counted) > MAX_NODES:
        return [f"more than {MAX_NODES:,} syntax nodes"]
    built = _built_names(tree, nodes)
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Name) and \
                node.arg.name in built:
            out.append(f"an item looked up by {node.arg.name}, a string built in the template")
        if isinstance(node, nodes.Keyword) and (node.key.startswith("_") or
                                                node.key.endswith("_")):
            out.append(f"a keyword argument named {node.key[:40]!r} (its name is a string: "
                       "dict(__init__=1)|first)")
        if isinstance(node, nodes.Getattr) and _INTERNAL.match(node.attr):
            out.append(f"attribute {node.attr}")
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and \
                isinstance(node.arg.value, str) and _INTERNAL.match(node.arg.value):
            out.append(f"item {node.arg.value!r}")
        elif isinstance(node, nodes.Name) and node.name in ESCAPE_NAMES:
            out.append(f"the global {node.name}")
        elif isinstance(node, nodes.Const) and isinstance(node.value, str) and \
                "__" in node.value:
            out.append(f"the string {node.value[:40]!r}")
        elif isinstance(node, (nodes.Import, nodes.FromImport, nodes.Include, nodes.Extends)):
            out.append(f"{type(node).__name__.lower()} of another template")
        elif isinstance(node, nodes.Filter) and node.name == "attr":
            arg = node.args[0] if node.args else None
            if not (isinstance(arg, nodes.Const) and isinstance(arg.value, str)
                    and _IDENT.match(arg.value) and not _INTERNAL.match(arg.value)):
                out.append("the attr filter with a name that is not a plain constant")
        if isinstance(node, nodes.Filter) and node.name in ATTRIBUTE_ARGS:
            out += _attribute_args(node, nodes)
        if _builds_string(node, nodes):
            pieces = [c.value for c in node.find_all(nodes.Const) if isinstance(c.value, str)]
            # concatenation joins whole pieces ('a_' ~ '_b'); replace / format / join can
            # also take a '_' out of the middle of one ('a_b'|replace('a', ''))
            whole = isinstance(node, (nodes.Concat, nodes.Add, nodes.Mod))
            if any("%c" in p or (p.startswith("_") or p.endswith("_") if whole else "_" in p)
                   for p in pieces):
                out.append("a string built from pieces that can join into '__'")
        if isinstance(node, (nodes.Getitem, nodes.Filter)) and isinstance(
                node.node, nodes.Const) and isinstance(node.node.value, str) and \
                "_" in node.node.value:
            out.append("characters taken out of a string constant with '_'")
        if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Name) and \
                node.arg.name in TOKEN_NAMES:
            out.append(f"an item looked up by {node.arg.name} (text the file supplies)")
        if isinstance(node, nodes.Getitem) and (isinstance(node.arg, _computed(nodes)) or any(
                True for _ in node.arg.find_all(_computed(nodes)))):
            out.append("an item looked up by a computed string")
        stack.extend(node.iter_child_nodes())
    return out


def _built_names(tree: Any, nodes: Any) -> set[str]:
    """Variables that may hold a string the template built (``{% set n = u ~ u ~ "init" %}``,
    a ``{% set %}`` block, a macro parameter given such a string), to the fixpoint: an item
    looked up by one is an item looked up by a computed string."""
    computed = _computed(nodes) + (nodes.Add,)

    def tainted(expr: Any, names: set[str]) -> bool:
        if isinstance(expr, computed) or isinstance(expr, nodes.Const) and isinstance(
                expr.value, str) and "_" in expr.value:
            return True
        return any(n.name in names for n in expr.find_all(nodes.Name)) or \
            isinstance(expr, nodes.Name) and expr.name in names

    assigns = list(tree.find_all((nodes.Assign, nodes.AssignBlock)))
    macros = {m.name: m for m in tree.find_all(nodes.Macro)}
    calls = [c for c in tree.find_all(nodes.Call)
             if isinstance(c.node, nodes.Name) and c.node.name in macros]
    names: set[str] = set()
    for _ in range(len(assigns) + len(macros) + 1):
        before = len(names)
        for a in assigns:
            if isinstance(a, nodes.AssignBlock) or tainted(a.node, names):
                names |= {t.name for t in a.target.find_all(nodes.Name)} | (
                    {a.target.name} if isinstance(a.target, nodes.Name) else set())
        for c in calls:
            given = list(c.args) + [k.value for k in c.kwargs]
            if any(tainted(g, names) for g in given):
                names |= {arg.name for arg in macros[c.node.name].args}
        if len(names) == before:
            break
    return names


def _attribute_args(node: Any, nodes: Any) -> list[str]:
    """A filter that reads an attribute path from an argument (``map(attribute=...)``,
    ``selectattr(...)``, ``groupby(...)``, ``map("attr", ...)``): each path must be a
    constant whose parts are plain names; ``map`` with a filter named at render time too."""
    index, keyword = ATTRIBUTE_ARGS[node.name]
    paths = [kw.value for kw in node.kwargs if kw.key == keyword]
    if node.name == "map" and node.args:  # map(filter_name, *its_args)
        first = node.args[0]
        if not (isinstance(first, nodes.Const) and isinstance(first.value, str)):
            return ["map with a filter named at render time"]
        if first.value == "attr":
            paths += node.args[1:2]
    elif index is not None and len(node.args) > index:
        paths.append(node.args[index])
    for path in paths:
        if not (isinstance(path, nodes.Const) and isinstance(path.value, (str, int))):
            return [f"{node.name} reading an attribute named at render time"]
        if isinstance(path.value, str) and any(_INTERNAL.match(part)
                                               for part in path.value.split(".")):
            return [f"{node.name} reading the attribute path {path.value[:40]!r}"]
    return []


def _builds_string(node: Any, nodes: Any) -> bool:
    """``~``, ``+``, ``%``, ``|join`` / ``|format`` / ``|replace`` and ``.format(...)``-style
    calls: how a name can be assembled from pieces."""
    if isinstance(node, (nodes.Concat, nodes.Add, nodes.Mod)):
        return True
    if isinstance(node, nodes.Filter):
        return node.name in BUILDERS
    return isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr) and \
        node.node.attr in BUILDERS | {"format_map"}


def _computed(nodes: Any) -> tuple[type, ...]:
    """Expressions that compute a string (a key built at render time)."""
    return (nodes.Concat, nodes.Mul, nodes.Mod, nodes.Filter, nodes.Call)


# Every construct the syntax-tree walk flags needs one of these in the text (a superset:
# a match only means the template is parsed): '._', "['_", a '__' or an escape that can
# spell one, the names, import/include/extends/from, attr, a quote next to '_', '%c',
# join/format/replace, a constant holding '_' that is indexed or filtered, a token as a key.
_TRIGGERS = re.compile(
    r"\.\s*_|\[\s*['\"]_|__|\\[xuUN0-7]|%c|['\"]_|_['\"]|\[\s*\w*_token\b"
    r"|['\"][^'\"]*_[^'\"]*['\"]\s*[\[|]"
    r"|\b(?:" + "|".join(sorted(ESCAPE_NAMES - {"__builtins__"})) + r"|import|include|extends"
    r"|from|attr|join|format|format_map|replace|attribute|mro|" + "|".join(ATTRIBUTE_ARGS)
    + r")\b|\b(?:gi|cr|ag|im|func|f|co|tb)_")


_ASSIGNS = re.compile(r"\b(?:set|macro)\b")
_NAME_KEY = re.compile(r"\[\s*[A-Za-z_]\w*\s*\]")


def _plain(text: str) -> bool:
    """No construct the walk flags can be in ``text``, and no item key is computed."""
    if len(text) > MAX_TEMPLATE_CHARS // 8 or _TRIGGERS.search(text):
        return False
    if _ASSIGNS.search(text) and _NAME_KEY.search(text):
        return False  # x[name] where name may hold a string the template built
    return not any(ch in _bracketed(text) for ch in "~*%|(")


def _bracketed(text: str) -> str:
    """What stands between square brackets (nested ones too), quotes included."""
    out, depth = [], 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        elif depth:
            out.append(ch)
    return "".join(out)


_BLOCK = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.S)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _scan_blocks(text: str) -> list[str]:
    """Without jinja2: the expressions and statements of the template, word by word."""
    out: list[str] = []
    for m in _BLOCK.finditer(text):
        body = m.group(1) if m.group(1) is not None else m.group(2)
        if "__" in body:
            out.append("'__' in an expression")
        words = _WORD.findall(body)
        out += [f"the global {w}" for w in words if w in ESCAPE_NAMES]
        if m.group(2) is not None and words and words[0] in ("import", "from", "include",
                                                             "extends"):
            out.append(f"{words[0]} of another template")
        if re.search(r"\|\s*attr\b", body):
            out.append("the attr filter")
    return out
