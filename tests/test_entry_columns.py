"""``TensorEntry.plain_many`` (entries made from columns without an ``__init__`` call each)
makes exactly the entries ``__init__`` makes of the same fields: every slot set, same values."""

from __future__ import annotations

import math

from adapters.model import Role, TensorEntry


def test_entries_from_columns_are_the_constructors():
    names = ["a.weight", "b", "c.scalar"]
    shapes = [(3, 4), (0,), ()]
    dtypes = ["float32", "bfloat16", "int64"]
    roles = [Role.PARAMETER, Role.BUFFER, Role.PARAMETER]
    nbytes = [48, 0, 8]
    offsets = [8, 56, 56]
    made = TensorEntry.plain_many(names, shapes, dtypes, roles, nbytes, offsets,
                                  [math.prod(s) for s in shapes], file="model.safetensors")
    expected = [TensorEntry(n, n, s, d, r, nbytes=b, offset=o, file="model.safetensors")
                for n, s, d, r, b, o in zip(names, shapes, dtypes, roles, nbytes, offsets, strict=True)]
    assert made == expected
    for m, e in zip(made, expected, strict=True):
        for slot in TensorEntry.__slots__:  # every slot set (a missing one raises here)
            assert getattr(m, slot) == getattr(e, slot), slot
