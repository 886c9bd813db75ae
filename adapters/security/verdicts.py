"""The verdict on one pickle global, from what a real loader would do with it.

A loader (``pickle.load``, ``torch.load(weights_only=False)``, ``joblib.load``) does one of three
things with a global the pickle names:

* **calls** it: REDUCE, INST, OBJ, an allowed helper that calls its argument
  (``copyreg._reconstructor``'s ``base``, ``torch._tensor._rebuild_from_type_v2``'s ``func``),
  a ``__setstate__``/``append``/``extend`` planted in an object's state, or calling an instance;
* **constructs** it: NEWOBJ/NEWOBJ_EX or ``copyreg._reconstructor`` (``cls.__new__`` only; the
  class's ``__setstate__`` then gets the BUILD state), as ``torch.save(model)`` and
  ``argparse.Namespace`` pickle;
* only **names** it (a dict key, a type argument).

Verdicts, in order (``safe`` is a proof: every use vetted):

1. ``dangerous`` when the dotted name (or any attribute chain inside it) is on a known-dangerous
   list (:mod:`inspector.adapters.security.lists`: picklescan, fickling, modelscan and ours),
   whatever the use and even when the user trusts it (a nested loader is judged by the bytes it
   would load, when it is called on bytes in the file: :mod:`inspector.adapters.security.nested`);
2. ``safe`` when it is in the vetted set (:mod:`.vetted`) for every use the pickle makes of it
   (or is a named torch constant, or is vetted by the file itself: a TorchScript class compiled
   from the archive's own code);
3. ``safe`` when the user trusts it (:mod:`.trust`: ``--trust``, ``trust=``, configuration),
   said so in the reason;
4. ``dangerous`` when a loader would invoke it at all (call it, construct it, give an instance
   its state or items): its code runs with the file's data, and nobody vetted that code;
5. ``foreign`` when it is only named (a dict key, a type argument), never invoked.

No shape makes a name inert: an unvetted class called with one plain value is not taken for an
Enum (its constructor could evaluate that value).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from . import lists as L
from .vetted import USES, VETTED

SAFE, FOREIGN, DANGEROUS = "safe", "foreign", "dangerous"
CALLED, CONSTRUCTED, NAMED = "called", "constructed", "named"
# Further uses the unpickler records (see restricted_pickle.Placeholder):
MEMBER = "member"  # called with one plain value: how an Enum member pickles (Color(1))
MODIFIED = "modified"  # a BUILD sets attributes on the class, or a state sets a dunder
BUILDS_CLASS = "builds class"  # constructed/called as a class factory, or used as a class
IMPLEMENTED = "implemented"  # the reader's own stand-in was handed out (uses not recorded)
RANK = {SAFE: 0, FOREIGN: 1, DANGEROUS: 2}


@dataclass(frozen=True, slots=True)
class Verdict:
    """``level`` is safe/foreign/dangerous; ``use`` how a loader would use the global; ``why``
    one phrase (which list, or the rule)."""

    level: str
    use: str
    why: str


def _entries() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(exact-name entries, whole-module entries): dotted prefix -> the lists it is on."""
    exact: dict[str, set[str]] = {}
    whole: dict[str, set[str]] = {}

    def add(table: dict[str, set[str]], key: str, source: str) -> None:
        table.setdefault(key, set()).add(source)

    for source, listing in (
        ("picklescan", L.PICKLESCAN),
        ("modelscan", L.MODELSCAN),
        ("inspector", L.INSPECTOR),
        ("fickling", L.FICKLING_ML_NAMES),
    ):
        for module, names in listing.items():
            if names == L.ALL:
                add(whole, module, source)
            else:
                for n in names:
                    add(exact, f"{module}.{n}", source)
    for module in L.FICKLING_MODULES + L.FICKLING_ML_MODULES:
        add(whole, module, "fickling")
    return exact, whole


EXACT, WHOLE = _entries()
TORCH_CONSTANTS = frozenset(f"torch.{n}" for n in L.TORCH_CONSTANT_NAMES)
INERT = frozenset(VETTED) | TORCH_CONSTANTS
# Names a whole-module entry does not cover: fickling's own builtins exemption and our inert
# allowlist (torch.jit._pickle builders under fickling's `torch.jit`). Exact entries always win.
_WHOLE_EXEMPT = INERT | frozenset(
    f"{m}.{n}"
    for m in ("builtins", "__builtin__", "__builtins__")
    for n in L.FICKLING_SAFE_BUILTINS
)
_DUNDERS = frozenset(L.DANGEROUS_ATTRIBUTES)
# Python's special names: the lists' and every dunder the builtin types define.
SPECIAL_NAMES = frozenset(L.SPECIAL_NAMES) | frozenset(
    n
    for t in (object, type, int, float, complex, str, bytes, list, tuple, dict, set,
              type(len), type(lambda: 0))
    for n in dir(t)
    if n.startswith("__") and n.endswith("__") and n not in ("__doc__", "__module__", "__name__",
                                                             "__qualname__")
)
_PRIVATE_EXEMPT = frozenset(L.FICKLING_PRIVATE_STDLIB_EXEMPT)
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))


def listed(module: str, qualname: str) -> str | None:
    """Why ``module.qualname`` is known-dangerous (the lists or the rule), or None."""
    full = f"{module}.{qualname}"
    parts = full.split(".")
    sources: set[str] = set()
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        sources |= EXACT.get(prefix, set())
        if full not in _WHOLE_EXEMPT:
            sources |= WHOLE.get(prefix, set())
    if sources:
        return "on the " + ", ".join(sorted(sources)) + " list" + "s" * (len(sources) > 1)
    chain = qualname.split(".")
    for part in chain:
        if part in _DUNDERS:
            return f"reaches {part} through an attribute chain"
    # An attribute chain through a module: torch.serialization + os.system is os.system.
    for j in range(len(chain) - 1):
        sub = chain[j:]
        for i in range(2, len(sub) + 1):
            prefix = ".".join(sub[:i])
            if prefix in EXACT or ".".join(sub[: i - 1]) in WHOLE:
                return f"reaches {'.'.join(sub)} through an attribute chain"
    root = module.split(".", 1)[0]
    if (
        root.startswith("_")
        and root in _STDLIB
        and root != "__future__"
        and full not in _PRIVATE_EXEMPT
        and full not in INERT
    ):
        return "a private standard-library module (fickling's rule)"
    return None


def effect(full: str) -> str | None:
    """What a listed global does (:data:`lists.EFFECTS`, longest dotted prefix), or None."""
    parts = full.split(".")
    for i in range(len(parts), 0, -1):
        found = L.EFFECTS.get(".".join(parts[:i]))
        if found is not None:
            return found
    return None


def _what(full: str, use: str, ran: list[str]) -> str:
    """What it does, when the lists say: "writes files (`mailbox.MH.__setitem__`)"."""
    does = effect(full)
    if not does:
        return ""
    where = [f"`{full}.{ran[0]}`"] if ran else []
    if use == CONSTRUCTED:
        where.append("`__del__` at collection")
    return f"; {does}" + (f" ({', '.join(where)})" if where else "")


def uses_seen(uses: set[str] | frozenset[str], ran: list[str] | tuple[str, ...]) -> set[str]:
    """The vetted-set uses (:data:`.vetted.USES`) a load made of a global: ``call`` / ``value``
    (called with one plain value) / ``new`` (constructed, not called) / ``state`` / ``items``."""
    seen = set()
    if CALLED in uses:
        seen.add("call")
    if MEMBER in uses:
        seen.add("value")
    if CONSTRUCTED in uses and not seen:
        seen.add("new")
    for method in ran:
        name = method.split(" ", 1)[0]
        if name == "__setstate__":
            seen.add("state")
        elif name in ("__setitem__", "append", "extend"):
            seen.add("items")
        else:  # a special method a pure builtin calls on the object (__index__, __len__ ...)
            seen.add("call")
    return seen


_SAID_USE = {"call": "call it", "value": "call it with a value from the file",
             "new": "construct it", "state": "give an instance its state (`__setstate__` or "
             "`__dict__`)", "items": "give an instance items (`__setitem__`/`append`)"}


def _vetted_for(full: str, seen: set[str]) -> tuple[bool, str]:
    """(whether the vetted set covers ``seen`` for ``full``, the reason or what is missing)."""
    version, kinds, reason = VETTED[full]
    allowed = set(kinds.split())
    if "call" in allowed:
        allowed.add("value")  # a call with one plain value is a call
    if "value" in allowed or "call" in allowed:
        allowed.add("new")  # the same __new__ a call runs
    missing = sorted(seen - allowed, key=USES.index)
    if not missing:
        return True, f"vetted: {reason} (reviewed: {version})"
    may = " or ".join(_SAID_USE[k] for k in USES if k in allowed)
    would = " and ".join(_SAID_USE[k] for k in missing)
    return False, f"vetted only to {may} ({reason}, reviewed: {version}); a loader would {would}"


def verdict(
    module: str,
    qualname: str,
    uses: set[str] | frozenset[str],
    how: str = "",
    ran: list[str] | tuple[str, ...] = (),
    changes: str = "",
    builds: str = "",
) -> Verdict:
    """The verdict for one global, given how the pickle uses it (``uses`` from the unpickler;
    ``how`` optionally says how it would be called, e.g. "as copyreg._reconstructor's base";
    ``ran``: methods of its instances the unpickler would call, e.g. ``__setitem__``;
    ``changes`` / ``builds``: what a MODIFIED / BUILDS_CLASS use did)."""
    full = f"{module}.{qualname}"
    use = (
        CALLED if CALLED in uses
        else MEMBER if MEMBER in uses
        else CONSTRUCTED if CONSTRUCTED in uses
        else NAMED
    )
    ran = list(ran)
    said = f"{CALLED if use == MEMBER else use} {how}".strip()
    if BUILDS_CLASS in uses:
        return Verdict(DANGEROUS, said, f"builds a class (`{full}` {builds}): code runs at load")
    if MODIFIED in uses:
        return Verdict(DANGEROUS, said, f"changes how `{full}` behaves: {changes}")
    why = listed(module, qualname)
    if why is not None:
        from .trust import trusted

        if trusted(full):
            why += "; trusted by the user, but trust does not override a known-dangerous name"
        return Verdict(DANGEROUS, said, f"{why}{_what(full, use, ran)}")
    if use != NAMED and full in L.BUILDS_CLASS:
        return Verdict(DANGEROUS, said, f"builds a class (`{full}`: {L.BUILDS_CLASS[full]})")
    seen = uses_seen(uses, ran)
    missing = ""
    if IMPLEMENTED in uses and full in VETTED and not ran:
        version, _, reason = VETTED[full]
        return Verdict(SAFE, said, f"vetted: {reason} (reviewed: {version}; read by the "
                       "reader's own implementation)")
    if full in VETTED:
        ok, text = _vetted_for(full, seen)
        if ok:
            return Verdict(SAFE, said, text)
        missing = text
    elif full in TORCH_CONSTANTS:
        return Verdict(SAFE, said, "a torch constant (dtype, layout, memory format, storage type)")
    from .trust import here, trusted

    local = here(full)
    if local is not None:
        return Verdict(SAFE, said, local)
    source = trusted(full)
    if source is not None:
        return Verdict(SAFE, said, f"trusted by the user ({source})")
    if missing:
        return Verdict(DANGEROUS, said, missing)
    if not seen:
        return Verdict(FOREIGN, said, "not vetted; only referenced, never invoked by a loader")
    runs = ", ".join(f"`{full}.{m}`" for m in ran)
    does = " and ".join(_SAID_USE[k] for k in sorted(seen, key=USES.index))
    enum = (" (one plain value, as an Enum member is pickled; nothing proves it an Enum: a "
            "constructor may evaluate it)") if seen == {"value"} else ""
    return Verdict(
        DANGEROUS, said,
        f"not vetted, and a loader would {does}{enum}: its code runs with the file's data"
        + (f" ({runs})" if runs else "") + _what(full, use, ran)
        + "; --trust MODULE.NAME vouches for it",
    )


def worst(levels: list[str] | tuple[str, ...] | set[str]) -> str:
    """The most severe of some verdict levels (``safe`` for none)."""
    return max(levels, key=RANK.__getitem__, default=SAFE)
