"""Write pickles, .npy and joblib files in the forms CPython's unpicklers, ``numpy.load`` and
``joblib.load`` accept beyond the forms their writers produce (hostile corpus), and record what
the real loaders do with each.

Run in a producer venv with numpy, joblib and lz4 (never the tool's):
``/work/venvs/grammar/bin/python tests/corpus/make_loader_grammar.py``; the torch column is
filled when ``/work/venvs/torch/bin/python`` exists. Every file, when loaded, runs
``touch grammar_marker`` (in the loader's working directory). Each loader runs in a child
process in a fresh temporary directory; ``loader_grammar.truth.json`` records per file and
loader ``executed`` (the marker appeared), ``accepted`` (loaded, nothing ran) or ``rejected``.

* ``p_*.pkl``: protocol-0 pickles whose opcode arguments use a spelling one unpickler accepts
  (INT in base 0 or C ``strtol`` form, LONG, FLOAT, STRING, UNICODE, GET/PUT, ``\\r``) before
  the payload call, and the payload pickled by ``pickle.dumps`` at protocols 0-5;
* ``n_*.npy``: object arrays whose header writes the dtype in a form ``descr_to_dtype`` reads
  (strings, lists of lists, dict keys, 2-character field strings, titles, subarrays, nested)
  in .npy versions 1.0 (with Python 2 ``1L`` literals), 2.0 and 3.0, key orders and padding;
* ``j_*.joblib``: ``joblib.dump(..., compress=(c, 3))`` for every compressor joblib has, and a
  joblib < 0.10 ``ZF`` file.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

HERE = Path(__file__).parent / "loader_grammar"
COMMAND = "touch grammar_marker"
CALL = b"cos\nsystem\n(S'" + COMMAND.encode() + b"'\ntR"

# Argument spellings placed (after a MARK) before the payload call; the LIST at the end
# collects them with the call's result.
PICKLE_FORMS = {
    "int_hex": b"I0x10\n",
    "int_hex_upper": b"I0X1f\n",
    "int_octal_c": b"I010\n",
    "int_binary": b"I0b101\n",
    "int_underscore": b"I1_000\n",
    "int_blanks": b"I  +7 \n",
    "int_tab_sign": b"I\t-3\n",
    "int_nul_c": b"I5\x00junk\n",
    "int_crlf": b"I5\r\n",
    "int_true": b"I01\n",
    "int_big_hex": b"I0x" + b"f" * 40 + b"\n",
    "long_hex_l": b"L0x10L\n",
    "long_octal": b"L0o17\n",
    "long_no_l": b"L12345678901234567890\n",
    "long_underscore_l": b"L1_0L\n",
    "float_inf": b"Finf\n",
    "float_nan": b"Fnan\n",
    "float_blanks": b"F 1e3 \n",
    "float_underscore": b"F1_0.5\n",
    "float_nul_c": b"F2.5\x00x\n",
    "string_double": b'S"dq"\n',
    "string_escapes": b"S'\\x41\\n\\q'\n",
    "string_utf8": "S'\u00e9t\u00e9'\n".encode(),
    "unicode_raw": b"V\\u0041b\\U0001F600\n",
    "put_get_blanks": b"I1\np 3 \ng+3\n",
    "put_get_underscore": b"I2\np1_0\ng10\n",
}


class Payload:
    def __reduce__(self):  # noqa: ANN204 - pickled as posix.system("touch grammar_marker")
        return (os.system, (COMMAND,))


def pickles() -> dict[str, bytes]:
    out = {f"p_{k}.pkl": b"(" + v + CALL + b"l." for k, v in PICKLE_FORMS.items()}
    for proto in range(6):
        out[f"p_dumps_protocol{proto}.pkl"] = pickle.dumps(Payload(), protocol=proto)
    return out


DESCRS = {
    "O": "'O'", "bar_O": "'|O'", "lt_O8": "'<O8'", "gt_O": "'>O'", "O8": "'O8'",
    "object": "'object'", "comma": "'i4,O'", "subarray_str": "'(2,)O'",
    "fields": "[('f0', '|O')]", "fields_lists": "[['f0', 'O']]",
    "nested": "[('a', [('b', '<i4'), ('c', '|O')])]", "subarray": "('|O', (1,))",
    "field_shape": "[('a', 'O', (1,))]", "title": "[(('t', 'a'), '|O')]",
    "dict_keys": "{'aO': 0}", "two_char_fields": "['aO']", "set_fields": "{'xO'}",
    "padding": "[('', '|V4'), ('a', '|O')]",
}


def npy_file(descr: str, version: tuple[int, int], style: int) -> bytes:
    if style == 0:
        header = "{'descr': " + descr + ", 'fortran_order': False, 'shape': (1,), }"
    elif style == 1:
        header = "{'shape': (1L,), 'fortran_order': False, 'descr': " + descr + "}"
    else:
        header = "{ 'fortran_order' : False ,\n 'descr' : " + descr + " , 'shape' : ( 1 , ) }"
    text = (header + " " * (64 - (len(header) + 11) % 64) + "\n").encode(
        "utf-8" if version[0] == 3 else "latin1")
    size = struct.pack("<H", len(text)) if version[0] == 1 else struct.pack("<I", len(text))
    return b"\x93NUMPY" + bytes(version) + size + text + pickle.dumps(Payload(), protocol=3)


def npys() -> dict[str, bytes]:
    out = {}
    for name, descr in DESCRS.items():
        for version in ((1, 0), (2, 0), (3, 0)):
            for style in (0, 1, 2):
                if style == 1 and version[0] == 3:
                    continue  # NumPy filters Python 2 literals in versions 1.0 and 2.0 only
                out[f"n_{name}_v{version[0]}_s{style}.npy"] = npy_file(descr, version, style)
    return out


def joblibs(tmp: Path) -> dict[str, bytes]:
    import joblib
    import numpy as np

    out = {}
    for c in ("zlib", "gzip", "bz2", "lzma", "xz", "lz4"):
        path = tmp / f"{c}.joblib"
        joblib.dump({"w": np.arange(4.0), "p": Payload()}, path, compress=(c, 3))
        out[f"j_{c}.joblib"] = path.read_bytes()
    data = pickle.dumps({"p": Payload()}, protocol=2)
    out["j_compat_zf.joblib"] = (b"ZF" + f"{len(data):#x}".ljust(19).encode()
                                 + zlib.compress(data, 3))
    return out


LOADERS = {
    "pickle.loads": "import pickle,sys; pickle.loads(open(sys.argv[1],'rb').read())",
    "pickle._loads": "import pickle,sys; pickle._loads(open(sys.argv[1],'rb').read())",
    "joblib.load": "import joblib,sys; joblib.load(sys.argv[1])",
    "numpy.load": "import numpy,sys; numpy.load(sys.argv[1], allow_pickle=True)",
    "torch.load": "import torch,sys; torch.load(sys.argv[1], weights_only=False)",
}
TORCH_PY = "/work/venvs/torch/bin/python"


def outcome(python: str, code: str, path: Path) -> str:
    with tempfile.TemporaryDirectory() as cwd:
        proc = subprocess.run([python, "-W", "ignore", "-c", code, str(path)], cwd=cwd,
                              capture_output=True, timeout=120)
        if os.path.exists(os.path.join(cwd, "grammar_marker")):
            return "executed"
    return "accepted" if proc.returncode == 0 else "rejected"


def main() -> None:
    HERE.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        files = {**pickles(), **npys(), **joblibs(Path(tmp))}
    import joblib
    import numpy

    truth = {"python": sys.version.split()[0], "numpy": numpy.__version__,
             "joblib": joblib.__version__, "files": {}}
    for name, data in sorted(files.items()):
        path = HERE / name
        path.write_bytes(data)
        loaders = (["numpy.load"] if name.endswith(".npy") else
                   ["joblib.load"] if name.startswith("j_") else
                   ["pickle.loads", "pickle._loads", "joblib.load", "torch.load"])
        row = {}
        for loader in loaders:
            python = TORCH_PY if loader == "torch.load" else sys.executable
            if os.path.exists(python):
                row[loader] = outcome(python, LOADERS[loader], path)
        truth["files"][name] = row
        print(name, row)
    (HERE.parent / "loader_grammar.truth.json").write_text(json.dumps(truth, indent=1) + "\n")


if __name__ == "__main__":
    main()
