"""Run in the OpenNMT-py + CTranslate2 producer venv (never by the tool): CTranslate2's own
``OpenNMTPyConverter`` on an OpenNMT-py checkpoint, printing per converted variable (JSON) the
NumPy error of its stored values (int8/int16 dequantized as the converter's scales say) against
the same converter's float32 variables (the source tensors as it fused and reshaped them).

``python ct2_producer.py SOURCE.pt QUANTIZATION [OUT_DIR [SEED]]``: with OUT_DIR the converted
model is also saved there; with SEED every floating tensor of the source is first redrawn
(``torch.randn``), so OUT_DIR holds a conversion of a different checkpoint of the same shapes.
"""

import json
import os
import sys
import tempfile

import numpy as np
import torch
from ctranslate2.converters import OpenNMTPyConverter


def _array(v) -> np.ndarray:
    if v.dtype == "bfloat16":
        v = v.to("float32")
    return v.numpy().astype(np.float64)


def main() -> None:
    src, quant = sys.argv[1], sys.argv[2]
    quant = None if quant == "none" else quant
    out_dir = sys.argv[3] if len(sys.argv) > 3 else None
    ck = torch.load(src, map_location="cpu", weights_only=False)
    # CTranslate2 refuses OpenNMT-py 3.5's default scaled-dot-flash; it changes no tensor
    ck["opt"].self_attn_type = "scaled-dot"
    if len(sys.argv) > 4:
        torch.manual_seed(int(sys.argv[4]))
        for k, v in ck["model"].items():
            if v.is_floating_point() and not k.endswith(".pe"):
                ck["model"][k] = torch.randn_like(v)
        for k, v in (ck.get("generator") or {}).items():
            ck["generator"][k] = torch.randn_like(v)
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "m.pt")
        torch.save(ck, p)
        ref_spec = OpenNMTPyConverter(p, unsafe_deserialization=True)._load()
        ref_spec.validate()
        ref_spec.optimize(quantization=None)
        ref = dict(ref_spec.variables())
        spec = OpenNMTPyConverter(p, unsafe_deserialization=True)._load()
        spec.validate()
        spec.optimize(quantization=quant)
        got = dict(spec.variables())
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)
            spec.save(out_dir)
    out = {}
    for n, v in got.items():
        r = ref.get(n)
        if not hasattr(v, "numpy") or not hasattr(r, "numpy") or n.endswith("_scale") \
                or r.dtype != "float32" or not r.shape:
            continue  # aliases, attributes, scales
        dtype = v.dtype  # before _array (a bfloat16 variable converts itself in place)
        x = _array(r)
        if v.dtype in ("int8", "int16") and n + "_scale" in got:
            s = got[n + "_scale"].numpy().astype(np.float32)
            y = (v.numpy().astype(np.float32) / s.reshape(-1, *([1] * (v.numpy().ndim - 1))))
            y = y.astype(np.float64)
        else:
            y = _array(v)
        d = x - y
        out[n] = {"dtype": dtype, "max_abs": float(np.max(np.abs(d))),
                  "ss_a": float((x * x).sum()), "ss_d": float((d * d).sum()),
                  "sum": float(y.sum())}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
