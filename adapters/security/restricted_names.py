"""How both readers of a pickle resolve its globals: :class:`RestrictedNames` (``find_class``
over the caller's allowlist, a placeholder type for everything else, and the per-load records
that become each global's verdict). Mixed into the unpicklers of :mod:`.restricted_pickle` and
used alone by the opcode walk of :mod:`.pickle_walk`.
"""

from __future__ import annotations

import _compat_pickle
import types
from collections.abc import Callable, Mapping
from typing import Any

from . import verdicts
from .lists import CALLS_ARGUMENT, NESTED_LOADERS
from .placeholders import (
    GlobalRef,
    NestedExaminer,
    PickleError,
    Placeholder,
    calls_arguments,
    instance_of,
    is_placeholder_type,
    judge,
    make_type,
    not_examined,
    note,
    ran_key,
    record,
)

# Allowed constructors that read the object they are given through its class's methods: the
# position of that argument and the method (CPython: dict(x) / OrderedDict(x) / Counter(x) call
# x.keys() and x[k] for anything with keys, list(x) / set(x) ... iterate x, float(x) calls
# __float__). Given an object or class of the file, that method is code of the file's class:
# recorded as run, the result a placeholder (nothing is called).
READS_ARGUMENT: dict[str, tuple[int, str]] = {
    "builtins.dict": (0, "keys"),
    "collections.OrderedDict": (0, "keys"),
    "collections.Counter": (0, "__iter__"),
    "builtins.list": (0, "__iter__"),
    "builtins.tuple": (0, "__iter__"),
    "builtins.set": (0, "__iter__"),
    "builtins.frozenset": (0, "__iter__"),
    "builtins.float": (0, "__float__"),
    "builtins.complex": (0, "__complex__"),
    "builtins.bool": (0, "__bool__"),
}


class RestrictedNames:
    """``find_class`` resolves only ``allowed``; everything else is a placeholder type. Mixed
    into CPython's C unpickler (:class:`RestrictedUnpickler`) and its pure-Python one
    (:class:`PyRestrictedUnpickler`, for streams that interleave raw data, like joblib's)."""

    def _setup(self, allowed: Mapping[str, Any],
               examine_nested: NestedExaminer | None = None) -> None:
        self._allowed = allowed
        self.examine_nested = examine_nested or not_examined
        self._types: dict[str, type[Placeholder]] = {}
        # written name -> (module, qualname) in Python 3 spelling, in order of appearance
        self._seen: dict[str, tuple[str, str]] = {}
        self.uses: dict[str, set[str]] = {}
        # id of an allowed object handed out -> its dotted name (a BUILD aimed at it changes it)
        self.handed_out: dict[int, str] = {}
        self._wrapped: dict[str, Callable[..., Any]] = {}
        # id of an allowed function handed out -> its __defaults__ then (before any BUILD)
        self._defaults: dict[int, Any] = {}

    def find_class(self, module: str, name: str) -> Any:
        written = f"{module}.{name}"
        seen = self._seen.get(written)
        if seen is None:
            # Python 2 spellings (protocol < 3): __builtin__.set is builtins.set, copy_reg is
            # copyreg; the allowlist and the lists of dangerous globals use Python 3 names.
            key = (module, name)
            if key in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[key]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
            seen = self._seen[written] = (module, name)
        dotted = f"{seen[0]}.{seen[1]}"
        found = self._allowed.get(dotted)
        if found is not None:
            if dotted in NESTED_LOADERS:  # a stand-in too is judged by the bytes it loads
                return self._examining(dotted, found)
            self.handed_out[id(found)] = dotted
            if isinstance(found, types.FunctionType):
                self._defaults.setdefault(id(found), found.__defaults__)
            if dotted in READS_ARGUMENT:
                return self._reading(dotted, found)
            if dotted in CALLS_ARGUMENT and not isinstance(found, type):
                return self._calling(dotted, found)
            return found
        t = self._types.get(dotted)
        if t is None:
            t = self._types[dotted] = make_type(dotted, self.uses,
                                                examine_nested=self.examine_nested)
        return t

    def check_handed_out(self) -> None:
        """After a load: an allowed Python function handed out whose attributes a BUILD changed
        (``__dict__`` filled, ``__defaults__`` replaced) would be changed in a real loader's
        process too, for every later caller."""
        for key, dotted in self.handed_out.items():
            obj = self._allowed.get(dotted)
            if id(obj) != key:
                obj = self._wrapped.get(dotted)
            if id(obj) != key or not isinstance(obj, types.FunctionType):
                continue
            if obj.__dict__ or obj.__defaults__ != self._defaults.get(key):
                record(self.uses, dotted, verdicts.MODIFIED,
                       changes="a BUILD sets attributes on the function itself")

    def _calling(self, dotted: str, helper: Callable[..., Any]) -> Callable[..., Any]:
        """``helper`` (an implementation of an allowlisted helper that calls or constructs its
        arguments) behind the record of what it does with them (:func:`calls_arguments`), so
        the verdict does not depend on which reader implemented it. One per name and load."""
        wrapped = self._wrapped.get(dotted)
        if wrapped is None:
            def call(*args: Any, **kwargs: Any) -> Any:
                calls_arguments(dotted, args)
                return helper(*args, **kwargs)

            wrapped = self._wrapped[dotted] = call
            self.handed_out[id(call)] = dotted
        return wrapped

    def _reading(self, dotted: str, make: Callable[..., Any]) -> Callable[..., Any]:
        """``make`` (an allowed constructor, :data:`READS_ARGUMENT`) behind the record of the
        method it would run on an object or class of the file. One per name and load."""
        wrapped = self._wrapped.get(dotted)
        if wrapped is None:
            at, method = READS_ARGUMENT[dotted]
            result = make_type(f"{dotted}()")

            def call(*args: Any, **kwargs: Any) -> Any:
                arg = args[at] if at < len(args) else None
                if isinstance(arg, Placeholder) or is_placeholder_type(arg):
                    note(arg, "", ran=f"{method} (by {dotted})")
                    return instance_of(result)
                return make(*args, **kwargs)

            wrapped = self._wrapped[dotted] = call
            self.handed_out[id(call)] = dotted
        return wrapped

    def _examining(self, dotted: str, loader: Callable[..., Any]) -> Callable[..., Any]:
        """``loader`` (a reader's stand-in for a nested loader such as
        ``torch.storage._load_from_bytes``) behind the same examination of the bytes a placeholder
        gets, so the verdict does not depend on which reader implemented it."""
        uses = self.uses
        examine = self.examine_nested

        def load(*args: Any) -> Any:
            level, summary = examine(args[0] if args else None)
            uses.setdefault("nested:" + dotted, set()).add(f"{level}\t{summary}")
            uses.setdefault(dotted, set()).add(verdicts.CALLED)
            return loader(*args)

        return load

    @property
    def globals(self) -> dict[str, GlobalRef]:
        """Every global named so far (written name -> :class:`GlobalRef` with its verdict)."""
        out = {}
        for written, (module, qualname) in self._seen.items():
            dotted = f"{module}.{qualname}"
            uses = self.uses.get(dotted, ())
            if dotted in self._allowed and not uses:
                # the reader's own implementation stands for it (how it was used is not
                # recorded): inert if vetted, else judged as called
                uses = {verdicts.CALLED, verdicts.IMPLEMENTED}
            u = self.uses
            how = ", ".join(sorted(u.get("how:" + dotted, ())))
            nested = u.get("nested:" + dotted)
            ran = tuple(sorted(u.get("ran:" + dotted, ()), key=ran_key))
            changes = "; ".join(sorted(u.get("changes:" + dotted, ())))
            builds = "; ".join(sorted(u.get("builds:" + dotted, ())))
            out[written] = judge(
                written, module, qualname, frozenset(uses), how, nested, ran, changes, builds
            )
        return out

    def persistent_load(self, pid: Any) -> Any:  # replaced per instance when the caller has one
        raise PickleError("the pickle uses persistent ids, which this file kind does not have")
