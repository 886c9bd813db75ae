"""Which source tensors each CTranslate2 Transformer variable was converted from, as data.

Read from CTranslate2 4.8.5's converters (``python/ctranslate2/converters/opennmt_py.py``,
``fairseq.py`` and ``marian.py``: ``set_transformer_encoder`` / ``_decoder``,
``set_multi_head_attention``, ``set_ffn``, ``set_layer_norm``, ``set_linear``, ``set_embeddings``,
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
- Marian's (in, out) matrices and (1, d) vectors: ``"transpose"``, ``"squeeze"``,
  ``"concat0_of_transposed"``, ``"concat_of_squeezed"``; ``"first_present"`` /
  ``"squeeze_first_present"``: the first of the names the file has (pre-norm ``_pre`` first);
- no rule: quantization scales (``*_scale``, made by ``--quantization``) and model attributes
  (``num_heads``, ``pre_norm``, ...) have no source tensor.

``{i}`` is the layer number (``{j}`` = ``{i}`` + 1 for Marian's layers, numbered from 1),
``{s}`` encoder or decoder, ``{p}`` a parameter suffix of :data:`LINEAR` or :data:`NORM`.
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

# Marian (converters/marian.py): layers numbered from 1 ({j} = {i} + 1); Marian's matrices
# are (in, out), CTranslate2's (out, in); its biases and norms are (1, d). A norm is read from
# the pre-norm name first (``_pre``), then the post-norm one (``set_layer_norm_auto``); the
# embedding from ``Wemb`` when one table is shared (tied-embeddings-all/-src). The output
# layer reuses the decoder embedding when tied (an alias in model.bin); an untied one is
# ``decoder_ff_logit_out_Wt`` (vocab, d). Position tables are generated, not read.
MARIAN: tuple[tuple[str, dict[str, str] | None, str, tuple[str, ...]], ...] = (
    ("encoder/embeddings_0/weight", None, "first_present", ("Wemb", "encoder_Wemb")),
    ("decoder/embeddings/weight", None, "first_present", ("Wemb", "decoder_Wemb")),
    ("decoder/projection/weight", None, "same", ("decoder_ff_logit_out_Wt",)),
    # tied: set_linear's reuse_weight, the decoder's embedding (an alias in model.bin)
    ("decoder/projection/weight", None, "first_present", ("decoder_Wemb", "Wemb")),
    ("decoder/projection/bias", None, "squeeze", ("decoder_ff_logit_out_b",)),
    ("encoder/layer_norm/{p}", NORM_MARIAN := {"gamma": "scale", "beta": "bias"}, "squeeze",
     ("encoder_top_ln_{p}",)),
    ("decoder/layer_norm/{p}", NORM_MARIAN, "squeeze", ("decoder_top_ln_{p}",)),
    ("{s}/layer_{i}/self_attention/linear_0/weight", None, "concat0_of_transposed",
     ("{s}_l{j}_self_Wq", "{s}_l{j}_self_Wk", "{s}_l{j}_self_Wv")),
    ("{s}/layer_{i}/self_attention/linear_0/bias", None, "concat_of_squeezed",
     ("{s}_l{j}_self_bq", "{s}_l{j}_self_bk", "{s}_l{j}_self_bv")),
    ("{s}/layer_{i}/self_attention/linear_1/weight", None, "transpose", ("{s}_l{j}_self_Wo",)),
    ("{s}/layer_{i}/self_attention/linear_1/bias", None, "squeeze", ("{s}_l{j}_self_bo",)),
    ("{s}/layer_{i}/self_attention/layer_norm/{p}", NORM_MARIAN, "squeeze_first_present",
     ("{s}_l{j}_self_Wo_ln_{p}_pre", "{s}_l{j}_self_Wo_ln_{p}")),
    ("decoder/layer_{i}/attention/linear_0/weight", None, "transpose",
     ("decoder_l{j}_context_Wq",)),
    ("decoder/layer_{i}/attention/linear_0/bias", None, "squeeze", ("decoder_l{j}_context_bq",)),
    ("decoder/layer_{i}/attention/linear_1/weight", None, "concat0_of_transposed",
     ("decoder_l{j}_context_Wk", "decoder_l{j}_context_Wv")),
    ("decoder/layer_{i}/attention/linear_1/bias", None, "concat_of_squeezed",
     ("decoder_l{j}_context_bk", "decoder_l{j}_context_bv")),
    ("decoder/layer_{i}/attention/linear_2/weight", None, "transpose",
     ("decoder_l{j}_context_Wo",)),
    ("decoder/layer_{i}/attention/linear_2/bias", None, "squeeze", ("decoder_l{j}_context_bo",)),
    ("decoder/layer_{i}/attention/layer_norm/{p}", NORM_MARIAN, "squeeze_first_present",
     ("decoder_l{j}_context_Wo_ln_{p}_pre", "decoder_l{j}_context_Wo_ln_{p}")),
    ("{s}/layer_{i}/ffn/linear_0/weight", None, "transpose", ("{s}_l{j}_ffn_W1",)),
    ("{s}/layer_{i}/ffn/linear_0/bias", None, "squeeze", ("{s}_l{j}_ffn_b1",)),
    ("{s}/layer_{i}/ffn/linear_1/weight", None, "transpose", ("{s}_l{j}_ffn_W2",)),
    ("{s}/layer_{i}/ffn/linear_1/bias", None, "squeeze", ("{s}_l{j}_ffn_b2",)),
    ("{s}/layer_{i}/ffn/layer_norm/{p}", NORM_MARIAN, "squeeze_first_present",
     ("{s}_l{j}_ffn_ffn_ln_{p}_pre", "{s}_l{j}_ffn_ffn_ln_{p}")),
)

FRAMEWORKS = {"opennmt-py": OPENNMT_PY, "fairseq": FAIRSEQ, "marian": MARIAN}
_FIELDS = {"i": r"(?P<i>\d+)", "e": r"(?P<e>\d+)", "s": "(?P<s>encoder|decoder)",
           "j": r"(?P<j>\d+)"}


def _pattern(template: str, suffixes: dict[str, str] | None) -> re.Pattern[str]:
    rx = re.escape(template)
    for field, group in _FIELDS.items():
        rx = rx.replace(re.escape("{" + field + "}"), group, 1)
        rx = rx.replace(re.escape("{" + field + "}"), f"(?P={field})")
    if suffixes is not None:
        rx = rx.replace(re.escape("{p}"), "(?P<p>" + "|".join(suffixes) + ")")
    return re.compile(f"^{rx}$")


def _compile(rules):
    return [(_pattern(pattern, suffixes), suffixes, how, sources)
            for pattern, suffixes, how, sources in rules]


_COMPILED = {name: _compile(rules) for name, rules in FRAMEWORKS.items()}


def source_names(ct2_name: str, framework: str) -> tuple[str, tuple[str, ...]] | None:
    """(how, source tensor names) a CTranslate2 variable came from, or None (a quantization
    scale, an attribute, or a variable the converter of ``framework`` does not write). With
    ``first_present`` the converter reads the first of the names that exists."""
    for rx, suffixes, how, sources in _COMPILED[framework]:
        m = rx.match(ct2_name)
        if m:
            fields = m.groupdict()
            if suffixes is not None:
                fields["p"] = suffixes[fields["p"]]
            if "i" in fields:
                fields["j"] = str(int(fields["i"]) + 1)
            return how, tuple(s.format(**fields) for s in sources)
    return None


def ct2_name(source_name: str, framework: str) -> str | None:
    """The CTranslate2 variable a source tensor went into (a fused one for a query, key or
    value projection), or None."""
    for pattern, suffixes, _how, sources in FRAMEWORKS[framework]:
        back = {v: k for k, v in suffixes.items()} if suffixes is not None else None
        for source in sources:
            m = _pattern(source, back).match(source_name)
            if m:
                fields = m.groupdict()
                if back is not None:
                    fields["p"] = back[fields["p"]]
                if "j" in fields:
                    fields["i"] = str(int(fields["j"]) - 1)
                return pattern.format(**fields)
    return None
