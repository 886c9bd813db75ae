"""The header of a NumPy ``.npy`` array (format versions 1.0, 2.0, 3.0), read as NumPy reads it:
its dict (``descr``, ``shape``, ``fortran_order``) through ``ast.literal_eval`` (NumPy's
``safe_eval``), its dtype in PyTorch's spelling, and whether the dtype holds Python objects.
The ``.npy``/``.npz`` adapter (:mod:`.numpy_npy`) and the security examination of any ``.npy``
(:mod:`.security.examination`) both read headers here.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

from .ast_parse import literal_eval
from .dtypes import NUMPY_KINDS as KINDS
from .errors import FormatError

MAGIC = b"\x93NUMPY"
# NumPy refuses headers above this size unless told otherwise (format.py _MAX_HEADER_SIZE).
MAX_HEADER = 10_000


def parse_header(f: BinaryIO, where: str, limit: int = 0) -> tuple[str, tuple[int, ...], int,
                                                                      dict]:
    """Read a .npy header from ``f``; return (dtype, shape, itemsize, info). ``limit``: the
    largest header accepted (default NumPy's own 10,000 bytes)."""
    header, info = read_header(f, where, limit)
    shape = header["shape"]
    if not (isinstance(shape, tuple) and all(isinstance(d, int) and d >= 0 for d in shape)):
        raise FormatError(f".npy shape {shape!r} is not a tuple of non-negative ints", where)
    dtype, itemsize = descr_dtype(header["descr"], where)
    if isinstance(header["descr"], str) and header["descr"].startswith(">"):
        info["byteorder"] = "big"
    return dtype, shape, itemsize, info


def read_header(f: BinaryIO, where: str, limit: int = 0) -> tuple[dict, dict]:
    """The header dict of a .npy (``descr``, ``shape``, ...) as NumPy's ``safe_eval`` reads
    it, and (``npy_version``, ``fortran_order``, ``header_bytes``)."""
    start = f.read(8)
    if len(start) < 8 or not start.startswith(MAGIC):
        raise FormatError("not a .npy header (magic \\x93NUMPY missing)", where)
    major, minor = start[6], start[7]
    if major == 1:
        raw = f.read(2)
        if len(raw) < 2:
            raise FormatError("truncated .npy header length", where)
        (hlen,) = struct.unpack("<H", raw)
    elif major in (2, 3):
        raw = f.read(4)
        if len(raw) < 4:
            raise FormatError("truncated .npy header length", where)
        (hlen,) = struct.unpack("<I", raw)
    else:
        raise FormatError(f".npy version {major}.{minor} is not supported (1.0, 2.0, 3.0)", where)
    if hlen > (limit or MAX_HEADER):
        raise FormatError(f".npy header length {hlen} exceeds {limit or MAX_HEADER} bytes",
                          where)
    text = f.read(hlen)
    if len(text) != hlen:
        raise FormatError(f"truncated .npy header: {len(text)} of {hlen} bytes", where)
    decoded = text.decode("utf-8" if major == 3 else "latin1", "replace")
    try:
        try:
            header = literal_eval(decoded)
        except SyntaxError:
            if major == 3:
                raise
            header = literal_eval(python2_header(decoded))
    except (ValueError, SyntaxError, MemoryError, RecursionError) as e:
        raise FormatError(
            f".npy header is not a Python literal ({type(e).__name__})", where
        ) from None
    if not isinstance(header, dict) or not {"descr", "shape"} <= header.keys():
        raise FormatError(".npy header lacks 'descr' or 'shape'", where)
    return header, {"npy_version": f"{major}.{minor}",
                    "fortran_order": bool(header.get("fortran_order")),
                    "header_bytes": (10 if major == 1 else 12) + hlen}


def has_object(descr: object, depth: int = 0) -> bool:
    """Whether NumPy's ``descr_to_dtype`` makes a dtype that holds Python objects
    (``dtype.hasobject``): then ``numpy.load(allow_pickle=True)`` unpickles the data. Any
    form it takes: a string (``numpy.dtype(descr)``: ``'|O'``, ``'O'``, ``'O8'``, ``'object'``,
    ``'i4,O'``, ``'(2,)O'``), a tuple ``(base, shape or dtype)``, and anything else it iterates
    as fields (a list, and also a dict's keys or a set), each field ``(name, descr)`` or
    ``(name, descr, shape)``, a tuple, a list or a 2-3 character string alike (``descr_to_dtype``
    unpacks ``'aO'`` as name ``'a'``, descr ``'O'``), nested. (No other NumPy type code or name
    holds an upper-case O.)"""
    if depth > 64:
        return True  # deeper than any real dtype: treat as the worst case
    if isinstance(descr, str):
        return "O" in descr or "object" in descr
    if isinstance(descr, tuple):
        return any(has_object(d, depth + 1) for d in descr[:2])
    if isinstance(descr, (list, dict, set, frozenset)):
        return any(
            isinstance(f, (tuple, list, str)) and len(f) in (2, 3)
            and any(has_object(x, depth + 1) for x in list(f)[1:])
            for f in descr
        )
    return False


def python2_header(text: str) -> str:
    """The header with the ``L`` of Python 2 long literals (``(3L, 4L)``) dropped, as NumPy's
    ``_filter_header`` does for version 1.0 and 2.0 files that ``safe_eval`` cannot read."""
    import io
    import tokenize

    tokens = []
    after_number = False
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if not (after_number and tok.type == tokenize.NAME and tok.string == "L"):
                tokens.append((tok.type, tok.string))
            after_number = tok.type == tokenize.NUMBER
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return text
    return tokenize.untokenize(tokens)


def descr_dtype(descr: object, where: str) -> tuple[str, int]:
    if has_object(descr):  # pickled objects (np.save with allow_pickle)
        return "object", 0
    if isinstance(descr, str) and len(descr) >= 3 and descr[0] in "<>|=":
        kind, size = descr[1], descr[2:]
        if size.isdigit() and (kind, int(size)) in KINDS:
            return KINDS[(kind, int(size))], int(size)
        if kind == "V" and size.isdigit():
            return f"void{int(size) * 8}", int(size)
        if kind in "SU" and size.isdigit():
            width = int(size) * (4 if kind == "U" else 1)
            return f"{'str' if kind == 'U' else 'bytes'}{int(size)}", width
        if kind == "O":
            return "object", 0
    # MXNet writes bfloat16 as the structured dtype [('bfloat16', '<u2')].
    if isinstance(descr, list) and len(descr) == 1 and isinstance(descr[0], tuple):
        field = descr[0]
        if len(field) == 2 and field[0] == "bfloat16" and field[1] in ("<u2", "<i2"):
            return "bfloat16", 2
    raise FormatError(f".npy descr {descr!r} is not a supported dtype", where)
