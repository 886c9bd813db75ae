"""Which source tensors each CTranslate2 Transformer variable was converted from, as data.

Read from CTranslate2 4.8.5's converters (``python/ctranslate2/converters/opennmt_py.py`` and
``fairseq.py``: ``set_transformer_encoder`` / ``_decoder``, ``set_multi_head_attention``,
``set_ffn``, ``set_layer_norm``, ``set_linear``, ``set_embeddings``,
``set_position_encodings``), for the cross-layout diff and anyone comparing a converted model
with its source. One rule per CTranslate2 variable pattern:

- ``how = "same"``: the one source tensor, same shape (a layer norm's ``gamma`` / ``beta`` is the
  source's ``weight`` / ``bias``);
- ``"concat0"``: the source tensors concatenated along dimension 0 in the order listed
  (``utils.fuse_linear``: self-attention query, key, value into ``linear_0``; cross-attention
  key, value into ``linear_1``);
- ``"squeeze"``: OpenNMT-py's ``pe`` buffer (max_len, 1, d) without its middle dimension;
- ``"rows_after_padding"``: fairseq's position table without its first ``padding_idx + 1``
  rows (the sinusoidal table is not in fairseq's state dict: ``SinusoidalPositionalEmbedding``
  keeps it as a plain attribute, only its ``_float_tensor`` is stored);
- no rule: quantization scales (``*_scale``, made by ``--quantization``) and model attributes
  (``num_heads``, ``pre_norm``, ...) have no source tensor.

``{i}`` is the layer number (the same in both names); ``{p}`` a parameter suffix of
:data:`LINEAR` or :data:`NORM`.
"""

from __future__ import annotations

import re

LINEAR = {"weight": "weight", "bias": "bias"}  # CTranslate2 -> source parameter suffix
NORM = {"gamma": "weight", "beta": "bias"}

# (CTranslate2 name pattern, suffix map or None, how, source name templates)
OPENNMT_PY: tuple[tuple[str, dict[str, str] | None, str, tuple[str, ...]], ...] = (
    ("encoder/embeddings_{e}/weight", None, "same",
     ("encoder.embeddings.make_embedding.emb_luts.{e}.weight",)),
    ("decoder/embeddings/weight", None, "same",
     ("decoder.embeddings.make_embedding.emb_luts.0.weight",)),
    ("encoder/position_encodings/encodings", None, "squeeze",
     ("encoder.embeddings.make_embedding.pe.pe",)),
    ("decoder/position_encodings/encodings", None, "squeeze",
     ("decoder.embeddings.make_embedding.pe.pe",)),
    ("encoder/layer_norm/{p}", NORM, "same", ("encoder.layer_norm.{p}",)),
    ("decoder/layer_norm/{p}", NORM, "same", ("decoder.layer_norm.{p}",)),
    ("encoder/layer_{i}/self_attention/linear_0/{p}", LINEAR, "concat0",
     ("encoder.transformer.{i}.self_attn.linear_query.{p}",
      "encoder.transformer.{i}.self_attn.linear_keys.{p}",
      "encoder.transformer.{i}.self_attn.linear_values.{p}")),
    ("encoder/layer_{i}/self_attention/linear_1/{p}", LINEAR, "same",
     ("encoder.transformer.{i}.self_attn.final_linear.{p}",)),
    ("encoder/layer_{i}/self_attention/layer_norm/{p}", NORM, "same",
     ("encoder.transformer.{i}.layer_norm.{p}",)),
    ("encoder/layer_{i}/ffn/linear_0/{p}", LINEAR, "same",
     ("encoder.transformer.{i}.feed_forward.w_1.{p}",)),
    ("encoder/layer_{i}/ffn/linear_1/{p}", LINEAR, "same",
     ("encoder.transformer.{i}.feed_forward.w_2.{p}",)),
    ("encoder/layer_{i}/ffn/layer_norm/{p}", NORM, "same",
     ("encoder.transformer.{i}.feed_forward.layer_norm.{p}",)),
    ("decoder/layer_{i}/self_attention/linear_0/{p}", LINEAR, "concat0",
     ("decoder.transformer_layers.{i}.self_attn.linear_query.{p}",
      "decoder.transformer_layers.{i}.self_attn.linear_keys.{p}",
      "decoder.transformer_layers.{i}.self_attn.linear_values.{p}")),
    ("decoder/layer_{i}/self_attention/linear_1/{p}", LINEAR, "same",
     ("decoder.transformer_layers.{i}.self_attn.final_linear.{p}",)),
    ("decoder/layer_{i}/self_attention/layer_norm/{p}", NORM, "same",
     ("decoder.transformer_layers.{i}.layer_norm_1.{p}",)),
    ("decoder/layer_{i}/attention/linear_0/{p}", LINEAR, "same",
     ("decoder.transformer_layers.{i}.context_attn.linear_query.{p}",)),
    ("decoder/layer_{i}/attention/linear_1/{p}", LINEAR, "concat0",
     ("decoder.transformer_layers.{i}.context_attn.linear_keys.{p}",
      "decoder.transformer_layers.{i}.context_attn.linear_values.{p}")),
    ("decoder/layer_{i}/attention/linear_2/{p}", LINEAR, "same",
     ("decoder.transformer_layers.{i}.context_attn.final_linear.{p}",)),
    ("decoder/layer_{i}/attention/layer_norm/{p}", NORM, "same",
     ("decoder.transformer_layers.{i}.layer_norm_2.{p}",)),
    ("decoder/layer_{i}/ffn/linear_0/{p}", LINEAR, "same",
     ("decoder.transformer_layers.{i}.feed_forward.w_1.{p}",)),
    ("decoder/layer_{i}/ffn/linear_1/{p}", LINEAR, "same",
     ("decoder.transformer_layers.{i}.feed_forward.w_2.{p}",)),
    ("decoder/layer_{i}/ffn/layer_norm/{p}", NORM, "same",
     ("decoder.transformer_layers.{i}.feed_forward.layer_norm.{p}",)),
    ("decoder/projection/{p}", LINEAR, "same", ("generator.{p}",)),
)

FAIRSEQ: tuple[tuple[str, dict[str, str] | None, str, tuple[str, ...]], ...] = (
    ("encoder/embeddings_0/weight", None, "same", ("encoder.embed_tokens.weight",)),
    ("decoder/embeddings/weight", None, "same", ("decoder.embed_tokens.weight",)),
    ("encoder/position_encodings/encodings", None, "rows_after_padding",
     ("encoder.embed_positions.weight",)),
    ("decoder/position_encodings/encodings", None, "rows_after_padding",
     ("decoder.embed_positions.weight",)),
    ("encoder/layer_norm/{p}", NORM, "same", ("encoder.layer_norm.{p}",)),
    ("decoder/layer_norm/{p}", NORM, "same", ("decoder.layer_norm.{p}",)),
    ("encoder/layernorm_embedding/{p}", NORM, "same", ("encoder.layernorm_embedding.{p}",)),
    ("decoder/layernorm_embedding/{p}", NORM, "same", ("decoder.layernorm_embedding.{p}",)),
    ("encoder/layer_{i}/self_attention/linear_0/{p}", LINEAR, "concat0",
     ("encoder.layers.{i}.self_attn.q_proj.{p}", "encoder.layers.{i}.self_attn.k_proj.{p}",
      "encoder.layers.{i}.self_attn.v_proj.{p}")),
    ("encoder/layer_{i}/self_attention/linear_1/{p}", LINEAR, "same",
     ("encoder.layers.{i}.self_attn.out_proj.{p}",)),
    ("encoder/layer_{i}/self_attention/layer_norm/{p}", NORM, "same",
     ("encoder.layers.{i}.self_attn_layer_norm.{p}",)),
    ("encoder/layer_{i}/ffn/linear_0/{p}", LINEAR, "same", ("encoder.layers.{i}.fc1.{p}",)),
    ("encoder/layer_{i}/ffn/linear_1/{p}", LINEAR, "same", ("encoder.layers.{i}.fc2.{p}",)),
    ("encoder/layer_{i}/ffn/layer_norm/{p}", NORM, "same",
     ("encoder.layers.{i}.final_layer_norm.{p}",)),
    ("decoder/layer_{i}/self_attention/linear_0/{p}", LINEAR, "concat0",
     ("decoder.layers.{i}.self_attn.q_proj.{p}", "decoder.layers.{i}.self_attn.k_proj.{p}",
      "decoder.layers.{i}.self_attn.v_proj.{p}")),
    ("decoder/layer_{i}/self_attention/linear_1/{p}", LINEAR, "same",
     ("decoder.layers.{i}.self_attn.out_proj.{p}",)),
    ("decoder/layer_{i}/self_attention/layer_norm/{p}", NORM, "same",
     ("decoder.layers.{i}.self_attn_layer_norm.{p}",)),
    ("decoder/layer_{i}/attention/linear_0/{p}", LINEAR, "same",
     ("decoder.layers.{i}.encoder_attn.q_proj.{p}",)),
    ("decoder/layer_{i}/attention/linear_1/{p}", LINEAR, "concat0",
     ("decoder.layers.{i}.encoder_attn.k_proj.{p}",
      "decoder.layers.{i}.encoder_attn.v_proj.{p}")),
    ("decoder/layer_{i}/attention/linear_2/{p}", LINEAR, "same",
     ("decoder.layers.{i}.encoder_attn.out_proj.{p}",)),
    ("decoder/layer_{i}/attention/layer_norm/{p}", NORM, "same",
     ("decoder.layers.{i}.encoder_attn_layer_norm.{p}",)),
    ("decoder/layer_{i}/ffn/linear_0/{p}", LINEAR, "same", ("decoder.layers.{i}.fc1.{p}",)),
    ("decoder/layer_{i}/ffn/linear_1/{p}", LINEAR, "same", ("decoder.layers.{i}.fc2.{p}",)),
    ("decoder/layer_{i}/ffn/layer_norm/{p}", NORM, "same",
     ("decoder.layers.{i}.final_layer_norm.{p}",)),
    ("decoder/project_in/{p}", LINEAR, "same", ("decoder.project_in_dim.{p}",)),
    ("decoder/project_out/{p}", LINEAR, "same", ("decoder.project_out_dim.{p}",)),
    ("decoder/projection/weight", None, "same", ("decoder.output_projection.weight",)),
)

FRAMEWORKS = {"opennmt-py": OPENNMT_PY, "fairseq": FAIRSEQ}


def _compile(rules):
    out = []
    for pattern, suffixes, how, sources in rules:
        rx = re.escape(pattern).replace(r"\{i\}", r"(?P<i>\d+)").replace(r"\{e\}", r"(?P<e>\d+)")
        if suffixes is not None:
            rx = rx.replace(r"\{p\}", "(?P<p>" + "|".join(suffixes) + ")")
        out.append((re.compile(f"^{rx}$"), suffixes, how, sources))
    return out


_COMPILED = {name: _compile(rules) for name, rules in FRAMEWORKS.items()}


def source_names(ct2_name: str, framework: str) -> tuple[str, tuple[str, ...]] | None:
    """(how, source tensor names) a CTranslate2 variable came from, or None (a quantization
    scale, an attribute, or a variable the converter of ``framework`` does not write)."""
    for rx, suffixes, how, sources in _COMPILED[framework]:
        m = rx.match(ct2_name)
        if m:
            fields = m.groupdict()
            if suffixes is not None:
                fields["p"] = suffixes[fields["p"]]
            return how, tuple(s.format(**fields) for s in sources)
    return None


def ct2_name(source_name: str, framework: str) -> str | None:
    """The CTranslate2 variable a source tensor went into (a fused one for a query, key or
    value projection), or None."""
    for pattern, suffixes, _how, sources in FRAMEWORKS[framework]:
        for source in sources:
            rx = re.escape(source).replace(r"\{i\}", r"(?P<i>\d+)").replace(r"\{e\}",
                                                                             r"(?P<e>\d+)")
            back = None
            if suffixes is not None:
                back = {v: k for k, v in suffixes.items()}
                rx = rx.replace(r"\{p\}", "(?P<p>" + "|".join(back) + ")")
            m = re.match(f"^{rx}$", source_name)
            if m:
                fields = m.groupdict()
                if back is not None:
                    fields["p"] = back[fields["p"]]
                return pattern.format(**fields)
    return None
