"""Which hyperparameters a text listing shows: those that determine shapes first, the rest only
under ``--verbose`` (a ``.keras`` file's compile settings, a scheduler's ``_step_count``, a
Lightning checkpoint's loop counters do not crowd the table out).

Shape-determining means: the key (its last dotted component) is a hyperparameter the formula
engine reads (:data:`FORMULA_KEYS`, kept equal to the built-in architectures' names and aliases by
a test), or a Keras layer-config key that sets a weight's shape (:data:`LAYER_KEYS`). An adapter
that condenses what it found into ``summary`` (Sockeye) has already chosen: its summary is shown.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

MAX_LINES = 40
MAX_VALUE = 120

FORMULA_KEYS = frozenset("""
add_bias_kv add_cross_attention architecture attention_based_copying attention_bias bias
bidirectional cnn_activation_type cnn_hidden_dropout cnn_kernel_width cnn_num_hidden
cnn_positional_embedding_type cnn_project_qkv controller conv_embed_max_filter_width
conv_embed_num_filters conv_embed_num_highway_layers d_ff d_kv d_model decoder
decoder_attention_heads decoder_ffn_dim decoder_layers decoder_only decoder_vocab_size dim
dim_feedforward do_layer_norm_before edit emb_dim embed_dim enable_bias encoder
encoder_attention_heads encoder_ffn_dim encoder_layers feed_forward_proj feedforward_size
ffn_dim head_dim hidden_dim hidden_size hidden_units include_reading_in_output input_shape
input_size intermediate_size kdim layer_norm_elementwise_affine layer_normalization layers
learned_initial_state length_task length_task_layers lhuc max_len max_position_embeddings
max_seq_len mlp_bias mode model n_embd n_head n_heads n_hidden n_inner n_layer n_layers
n_positions n_vocab neural_vocab_selection nhead norm num_attention_heads num_decoder_layers
num_embed num_encoder_layers num_heads num_hidden_layers num_key_value_heads num_labels
num_layers num_stack_layers output_vocab_size proj_size relative_attention_num_buckets
rnn_attention_coverage_num_hidden rnn_attention_coverage_type rnn_attention_in_upper_layers
rnn_attention_mhdot_heads rnn_attention_num_hidden rnn_attention_type
rnn_attention_use_prev_word rnn_cell_type rnn_context_gating rnn_decoder_state_init
rnn_enc_last_hidden_concat_to_embedding rnn_num_hidden rnn_residual_connections rotary_pct
share_encoder_decoder_embeddings sinusoidal_pos_embds source_factor_vocab_sizes
source_factors_combine source_factors_num_embed source_factors_share_embedding
source_vocab_size src_vocab_size stack_size target_factor_vocab_sizes target_factors_combine
target_factors_num_embed target_factors_share_embedding target_vocab_size tgt_vocab_size
tie_embeddings tie_weights tie_word_embeddings transformer_attention_heads
transformer_feed_forward_num_hidden transformer_feed_forward_use_glu transformer_model_size
transformer_positional_embedding_type transformer_postprocess transformer_preprocess
type_vocab_size use_extra_bias use_padding vdim vocab_size vocab_source_size vocab_target_size
weight_normalization weight_tying weight_tying_type word_embed_proj_dim
block_count embedding_length expert_count expert_feed_forward_length feed_forward_length
head_count head_count_kv key_length rope_dimension_count rope_freqs tied_output value_length
num_local_experts num_experts moe_intermediate_size shared_expert_intermediate_size
decoder_sparse_step mlp_only_layers
ffn_hidden_size kv_channels group_query_attention num_query_groups swiglu padded_vocab_size
make_vocab_size_divisible_by tensor_model_parallel_size pipeline_model_parallel_size
untie_embeddings_and_output_weights add_bias_linear add_qkv_bias normalization
position_embedding_type
add_ffnbias add_qkvbias bridge brnn copy_attn copy_attn_type coverage_attn dec-depth
dec_hid_size dec_layers dec_rnn_size decoder.attention decoder.embeddings.embedding_dim
decoder.ff_size decoder.hidden_size decoder.init_hidden decoder.input_feeding
decoder.layer_norm decoder.num_heads decoder.num_layers decoder.rnn_type decoder.type
decoder_attention decoder_embed_dim decoder_ffn_embed_dim decoder_hidden_size decoder_input_dim
decoder_learned_pos decoder_normalize_before decoder_num_heads decoder_out_embed_dim
decoder_output_dim dim-emb enc-depth enc_hid_size enc_layers enc_rnn_size encoder.bidirectional
encoder.embeddings.embedding_dim encoder.ff_size encoder.hidden_size encoder.layer_norm
encoder.num_heads encoder.num_layers encoder.rnn_type encoder.type encoder_bidirectional
encoder_embed_dim encoder_ffn_embed_dim encoder_hidden_size encoder_learned_pos
encoder_normalize_before ffn ffn_bias ffn_inner_dim final_norm frozen generator_prefix
global_attention heads input_feed language_model layer_norm layernorm_embedding legacy-output
max_relative_positions max_source_positions max_target_positions maximum_position
maximum_relative_position mha_bias no_cross_attention no_decoder_final_norm
no_token_positional_embeddings num_kv num_units output-omit-bias output_layer_bias
parallel_residual pos_ffn_activation_fn position_encoder position_encoding positions pre_norm
projection_bias quant_noise_pq quantization relative_positions_buckets reuse_copy_attn rnn_type
scale_attn scale_fc scale_heads scale_resids share_all_embeddings share_decoder_embeddings
share_decoder_input_output_embed share_embeddings shared_embeddings shared_layer_norm
shared_positions source-vocab source_vocab src_vocab_len src_word_vec_size target-vocab
target_vocab tgt_vocab_len tgt_word_vec_size tied-embeddings tied-embeddings-all
tied-embeddings-src tied_embeddings tied_projection tied_softmax transformer-decoder-dim-ffn
transformer-decoder-ffn-depth transformer-dim-ffn transformer-ffn-depth transformer-heads
transformer-postprocess transformer-postprocess-top transformer-preprocess transformer_ff
trg_vocab_size
""".split())
"""Every hyperparameter name (and alias) of the built-in architectures that is a config key
(tests/test_cli_output.py keeps it in step with :mod:`inspector.formulas`)."""

LAYER_KEYS = frozenset("""
units filters kernel_size input_dim output_dim use_bias batch_shape batch_input_shape
reset_after depth_multiplier key_dim value_dim groups center scale merge_mode
emsize nhid nlayers ntoken ninp
""".split())
"""Keras layer-config keys that set a weight's shape, and the PyTorch examples' training
arguments (``word_language_model``: emsize, nhid, nlayers, ntoken)."""

SHAPE_KEYS = FORMULA_KEYS | LAYER_KEYS


def is_shape_key(key: str) -> bool:
    """Whether a flattened key (``config.layers``, ``args.nhid``) names a shape-determining
    hyperparameter; private keys (``_step_count``) never do."""
    parts = key.split(".")
    return not any(p.startswith("_") for p in parts) and parts[-1].split("[")[0] in SHAPE_KEYS


def lines(hyper: dict[str, Any], verbose: bool = False) -> list[tuple[str, str]]:
    """``(key, value)`` lines of a listing's hyperparameters: the adapter's ``summary`` if any,
    else the shape-determining keys; ``verbose``: all of them, shape-determining first. A last
    line says what was left out and where it is."""
    if "summary" in hyper and not verbose:
        shown = _flatten(hyper["summary"])
        return _cap(shown) + [("(all of them)", "--verbose, or --format json")]
    flat = _flatten({k: v for k, v in hyper.items() if k != "summary"} if verbose else hyper)
    shape = [(k, v) for k, v in flat if is_shape_key(k)]
    rest = [(k, v) for k, v in flat if not is_shape_key(k)]
    if verbose:
        return _cap(shape + rest, MAX_LINES * 25)
    out = _cap(shape)
    if rest:
        out.append((f"(+{len(rest):,} more)", "--verbose lists them"))
    return out


def _cap(items: list[tuple[str, str]], limit: int = MAX_LINES) -> list[tuple[str, str]]:
    if len(items) <= limit:
        return items
    return [*items[:limit], ("...", f"{len(items) - limit:,} more (--format json)")]


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            out.extend(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    layers = _layer_list(value)
    if layers is not None:
        return [(f"{prefix}[{i}]", text) for i, text in enumerate(layers)]
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > MAX_VALUE:
        text = text[:MAX_VALUE - 3] + "..."
    return [(prefix, text)]


def _layer_list(value: Any) -> list[str] | None:
    """A Keras ``layers`` list as ``["GRU(units=4, reset_after=true)", "Dense(units=2)"]``:
    each layer's class and its shape-determining config keys."""
    if not (isinstance(value, list) and value and all(
            isinstance(x, dict) and "class_name" in x for x in value)):
        return None
    out = []
    for layer in value:
        cfg = layer.get("config") if isinstance(layer.get("config"), dict) else {}
        args = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in cfg.items()
                         if k in SHAPE_KEYS)
        out.append(f"{layer['class_name']}({args})")
    return out
