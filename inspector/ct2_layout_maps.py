"""The CTranslate2 layout maps (``inspector/layout_maps/ct2-*.yaml``) built from the converters'
name correspondences in :mod:`inspector.adapters.ctranslate2_names`, the one source of truth:
``python -m inspector.ct2_layout_maps`` rewrites the YAML files and tests/test_cross_diff_ct2.py
checks that they equal what this module builds.

Each correspondence becomes one rule per parameter suffix (``{p}``): ``same`` a plain rename,
``concat0`` a list of ``a`` templates with ``concat: 0`` (``utils.fuse_linear``), ``squeeze``
OpenNMT-py's (max_len, 1, d) ``pe`` buffer with ``squeeze: 1``, ``rows_after_padding``
fairseq's learned position table without its first ``padding_idx + 1`` rows (``drop_rows``).
Marian's (``ct2-marian``): ``{s}`` becomes one rule per side (encoder, decoder), its layers
numbered from 1 an ``offset``, ``transpose`` its (in, out) matrices, ``squeeze: 0`` its (1, d)
vectors, ``concat0_of_transposed`` a ``concat: 1`` then ``transpose`` (the same values),
``concat_of_squeezed`` a ``concat: 1`` then ``squeeze: 0``, and the first-present names one rule
each, in the converter's order (a file holds one of them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inspector.adapters.ctranslate2_names import FAIRSEQ, MARIAN, OPENNMT_PY

MAP_DIR = Path(__file__).resolve().parent / "layout_maps"

# fairseq's LearnedPositionalEmbedding has padding_idx = the dictionary's pad index, 1 for
# fairseq's Dictionary (<s>=0, <pad>=1): the converter keeps weight[padding_idx + 1:]
FAIRSEQ_PAD_ROWS = 2

GENERATED_SCALE = {"b": "*_scale", "why": "quantization scale written by --quantization "
                   "(int8/int16 weights are compared dequantized)"}

SPECS: dict[str, dict[str, Any]] = {
    "ct2-onmt-py": {
        "rules": OPENNMT_PY,
        "description": "OpenNMT-py Transformer checkpoint <-> its CTranslate2 conversion "
                       "(OpenNMTPyConverter)",
        "a": {"what": "OpenNMT-py checkpoint", "roles": ["parameter", "buffer"]},
        "generated": [GENERATED_SCALE],
        "comment": "OpenNMT-py Transformer checkpoint  <->  CTranslate2 model directory "
                   "(ct2-opennmt-py-converter)",
    },
    "ct2-fairseq": {
        "rules": FAIRSEQ,
        "description": "fairseq Transformer checkpoint <-> its CTranslate2 conversion "
                       "(FairseqConverter)",
        "a": {"what": "fairseq checkpoint", "roles": ["parameter"]},
        "generated": [GENERATED_SCALE,
                      {"b": "encoder/position_encodings/encodings",
                       "why": "sinusoidal table computed by the converter (fairseq's "
                              "SinusoidalPositionalEmbedding stores none)"},
                      {"b": "decoder/position_encodings/encodings",
                       "why": "sinusoidal table computed by the converter (fairseq's "
                              "SinusoidalPositionalEmbedding stores none)"}],
        "comment": "fairseq Transformer checkpoint  <->  CTranslate2 model directory "
                   "(ct2-fairseq-converter)",
    },
    "ct2-marian": {
        "rules": MARIAN,
        "marian": True,
        "description": "Marian Transformer model (.npz) <-> its CTranslate2 conversion "
                       "(MarianConverter)",
        "a": {"what": "Marian model", "formats": ["marian"], "roles": ["parameter"]},
        "generated": [GENERATED_SCALE,
                      {"b": "encoder/position_encodings/encodings",
                       "why": "sinusoidal table computed by the converter (Marian stores "
                              "none unless it learned Wpos)"},
                      {"b": "decoder/position_encodings/encodings",
                       "why": "sinusoidal table computed by the converter (Marian stores "
                              "none unless it learned Wpos)"}],
        "comment": "Marian Transformer model (.npz)  <->  CTranslate2 model directory "
                   "(ct2-marian-converter)",
    },
}

# Marian's forms: (transforms of the rule, whether each source is a rule of its own)
_MARIAN_FORMS = {
    "same": ({}, False), "transpose": ({"transpose": True}, False),
    "squeeze": ({"squeeze": 0}, False),
    "concat0_of_transposed": ({"concat": 1, "transpose": True}, False),
    "concat_of_squeezed": ({"concat": 1, "squeeze": 0}, False),
    "first_present": ({}, True), "squeeze_first_present": ({"squeeze": 0}, True),
}


def _marian_rules(b: str, how: str, sources: list[str]) -> list[dict[str, Any]]:
    """One map rule per Marian correspondence (per first-present name: one each, in order),
    ``{j}`` (layers from 1) written as ``{i}`` with an offset of 1."""
    form, each = _MARIAN_FORMS[how]
    sources = [x.replace("{j}", "{i}") for x in sources]
    shift = {"offset": {"i": 1}} if "{i}" in b else {}
    if each:
        return [{"a": x, "b": b, **form, **shift} for x in sources]
    a: str | list[str] = sources if "concat" in form else sources[0]
    return [{"a": a, "b": b, **form, **shift}]


def _rule(how: str, b: str, sources: list[str]) -> dict[str, Any]:
    if how == "same":
        return {"a": sources[0], "b": b}
    if how == "concat0":
        return {"a": sources, "b": b, "concat": 0}
    if how == "squeeze":
        return {"a": sources[0], "b": b, "squeeze": 1}
    if how == "rows_after_padding":
        return {"a": sources[0], "b": b, "drop_rows": FAIRSEQ_PAD_ROWS}
    raise ValueError(f"no layout-map form for {how!r}")


def build(name: str) -> dict[str, Any]:
    """The map ``name``'s YAML data."""
    spec = SPECS[name]
    tensors = []
    for pattern, suffixes, how, sources in spec["rules"]:
        for side in ("encoder", "decoder") if "{s}" in pattern else (None,):
            for ct2, src in (suffixes or {None: None}).items():
                def sub(t: str, v: str | None, side: str | None = side) -> str:
                    t = t if v is None else t.replace("{p}", v)
                    return t if side is None else t.replace("{s}", side)

                b, a = sub(pattern, ct2), [sub(x, src) for x in sources]
                if spec.get("marian"):
                    tensors.extend(_marian_rules(b, how, a))
                else:
                    tensors.append(_rule(how, b, a))
    return {"name": name, "description": spec["description"], "dtypes": "converted",
            "a": spec["a"],
            "b": {"what": "CTranslate2 model directory", "formats": ["ctranslate2"],
                  "roles": ["parameter", "buffer"]},
            "tensors": tensors, "generated": spec["generated"]}


def write() -> None:
    import yaml

    for name, spec in SPECS.items():
        text = yaml.safe_dump(build(name), sort_keys=False, width=100)
        head = (f"# {spec['comment']}.\n# GENERATED by `python -m inspector.ct2_layout_maps` "
                "from inspector/adapters/ctranslate2_names.py\n# (CTranslate2 4.8.5's "
                "converters); edit that module, not this file.\n")
        (MAP_DIR / f"{name}.yaml").write_text(head + text, encoding="utf-8")


if __name__ == "__main__":
    write()
