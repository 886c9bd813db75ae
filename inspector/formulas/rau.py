"""rau language models (seed 003): ``rau-lstm``, ``rau-rnn``, ``rau-transformer``,
``rau-stack-rnn``, ``rau-stack-transformer``.

Names are the ``state_dict`` keys rau writes. rau composes its models with ``|`` (a left fold,
``(a | b) | c``, that flattens a composed right operand), so leaf ``k`` of ``n`` lives under
``first.`` * (n-1-k) + ``second`` and leaf 0 under ``first.`` * (n-1): an LSTM LM is embedding,
dropout, LSTM, dropout, output, whose embedding is ``first.first.first.first.func.embeddings``.

Conventions verified against real rau (fixtures/rau, truths recorded by rau 0.2.0 and by the
``differentiable-stacks`` branch that holds the stack models):

- RNN LMs always tie the input and output embeddings (one ``(vocab, width)`` matrix, no output
  bias); rau drops PyTorch's redundant ``bias_hh_l{k}`` (``use_extra_bias=False``) and learns an
  initial hidden state ``initial_hidden_state_inputs`` (layers, hidden).
- Transformers are ``nn.TransformerEncoder`` pre-norm layers (attention *with* biases) plus a
  final LayerNorm; the CLI ties the embeddings.
- The superposition stack-RNN feeds the stack reading (``stack_size``) to the controller next to
  the input, so the first layer's ``weight_ih`` is (gates*h, width + stack_size); actions are a
  biased ``Linear(h, 3)``, pushed vectors a biased ``Linear(h, stack_size)``.
- A stack-attention layer is a pre-norm sublayer with three bias-free linears
  (``d -> 3``, ``d -> stack_size``, ``stack_size -> d``) followed by a feed-forward sublayer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint, Role, TensorEntry
from inspector.adapters.side_files import RAU_KWARGS
from inspector.formulas import blocks_torch as bt
from inspector.formulas.core import Arch, HParam, Prediction, register, revised, side_config

Leaf = list[TensorEntry]

# rau's --stack-transformer-layers grammar (rau/models/stack_nn/transformer/parse.py), with its
# quirk kept on purpose: `^` anchors only the first alternative and `$` only the last, and
# re.match needs no full match, so "16-1" is read as 16 standard layers (seed 003's notebook).
LAYER_RE = re.compile(r"^(\d+)|superposition-(\d+)|nondeterministic-(\d+)-(\d+)-(\d+)$")

VOCAB = HParam("vocab_size", 64, "input vocabulary size (rau's input_vocabulary_size)")
PADDING = HParam("use_padding", False, "one more embedding row for a padding symbol", bool)
RNN_COMMON = (
    VOCAB,
    HParam("num_layers", 3, "recurrent layers"),
    HParam("hidden_units", 64, "hidden units per layer (= embedding size)"),
    HParam("learned_initial_state", True, "learned initial hidden state (rau lm train: yes)",
           bool),
    HParam("use_extra_bias", False, "keep PyTorch's redundant bias_hh (rau lm train: no)", bool),
    HParam("bias", True, "bias vectors in the recurrent layers", bool),
    PADDING,
)
TRANSFORMER_COMMON = (
    VOCAB,
    HParam("d_model", 64, "model width"),
    HParam("num_heads", 4, "attention heads (changes no shape; must divide d_model)"),
    HParam("feedforward_size", 256, "hidden units of each feed-forward sublayer"),
    HParam("output_vocab_size", 0, "output vocabulary (0: vocab_size); shapes only untied"),
    HParam("tie_embeddings", True, "output layer shares the embedding matrix (rau lm train: "
           "yes)", bool),
    PADDING,
)


def _sized(hp: Mapping[str, Any], names: Sequence[str], least: int = 1) -> None:
    for n in names:
        if hp[n] < least:
            raise UsageError(f"{n} must be at least {least}")


def _at(prefix: str, tensors: Sequence[TensorEntry]) -> Leaf:
    return [revised(t, name=bt.join(prefix, t.name)) for t in tensors]


def _as(tensors: Sequence[TensorEntry], block: str) -> Leaf:
    return [revised(t, block=block) for t in tensors]


def pipeline(leaves: Sequence[Sequence[TensorEntry]]) -> Leaf:
    """The tensors of ``leaves[0] | leaves[1] | ...`` under the names rau's composition gives."""
    n = len(leaves)
    out: Leaf = []
    for k, leaf in enumerate(leaves):
        prefix = ".".join(["first"] * (n - 1 - k) + (["second"] if k else []))
        out += _at(prefix, leaf)
    return out


def _tie_output(tensors: Leaf, output: str) -> Leaf:
    """Mark ``output`` as the alias of the first tensor stored under the same leaf name."""
    leaf = output.rsplit(".", 1)[-1]
    source = next(t.name for t in tensors if t.name.endswith("." + leaf) and t.name != output)
    return [revised(t, tie=source) if t.name == output else t for t in tensors]


def _output(hp: Mapping[str, Any], width: int) -> Leaf:
    """rau's OutputUnidirectional: the shared matrix, or an untied bias-free Linear."""
    if hp.get("tie_embeddings", True):
        return [bt.param("func", "embeddings", (_rows(hp), width), "embedding")]
    return _as(bt.linear("func.linear", width, _out_vocab(hp), bias=False), "output")


def _rows(hp: Mapping[str, Any]) -> int:
    return hp["vocab_size"] + int(hp["use_padding"])


def _out_vocab(hp: Mapping[str, Any]) -> int:
    return hp.get("output_vocab_size") or hp["vocab_size"]


def _language_model(arch: str, hp: Mapping[str, Any], input_leaf: Leaf, body: list[Leaf],
                    width: int, notes: list[str]) -> Prediction:
    tensors = pipeline([input_leaf, *body, _output(hp, width)])
    if hp.get("tie_embeddings", True):
        if _out_vocab(hp) > hp["vocab_size"]:
            raise UsageError("output_vocab_size cannot exceed vocab_size with tied embeddings")
        tensors = _tie_output(tensors, tensors[-1].name)
    return Prediction(arch, dict(hp), tensors, notes)


# --- recurrent models ----------------------------------------------------------------------------


def recurrence(prefix: str, mode: str, input_size: int, hp: Mapping[str, Any]) -> Leaf:
    """rau's LSTM / SimpleRNN wrapper: learned initial state, then ``rnn.*`` without
    ``bias_hh_l{k}`` unless ``use_extra_bias``."""
    h, layers = hp["hidden_units"], hp["num_layers"]
    out: Leaf = []
    if hp["learned_initial_state"]:
        out.append(bt.param(prefix, "initial_hidden_state_inputs", (layers, h), "initial_state"))
    rnn = bt.rnn(bt.join(prefix, "rnn"), mode, input_size, h, layers, bias=hp["bias"])
    if not hp["use_extra_bias"]:
        rnn = [t for t in rnn if ".bias_hh_l" not in t.name]
    return out + rnn


def _rnn_lm(arch: str, mode: str, hp: Mapping[str, Any], body: Leaf, width: int,
            notes: list[str]) -> Prediction:
    embedding = [bt.param("func", "embeddings", (_rows(hp), width), "embedding")]
    # embedding | dropout | recurrence | dropout | output
    return _language_model(arch, hp, embedding, [[], body, []], width, notes)


def predict_rnn(arch: str, mode: str) -> Callable[[Mapping[str, Any]], Prediction]:
    def predict(hp: Mapping[str, Any]) -> Prediction:
        _sized(hp, ("vocab_size", "num_layers", "hidden_units"))
        h = hp["hidden_units"]
        return _rnn_lm(arch, mode, hp, recurrence("", mode, h, hp), h, [])

    return predict


STACK_RNN_HPARAMS = (
    *RNN_COMMON,
    HParam("stack_size", 32, "superposition stack embedding size"),
    HParam("controller", "lstm", "recurrent controller", str, ("lstm", "rnn")),
    HParam("include_reading_in_output", False,
           "stack reading concatenated to the output (--stack-rnn-connect-reading-to-output)",
           bool),
)


def predict_stack_rnn(hp: Mapping[str, Any]) -> Prediction:
    """Superposition stack-RNN (Joulin & Mikolov), as rau's differentiable-stacks branch
    builds it: embedding width = output width = hidden (+ stack_size with the reading in the
    output); the controller reads embedding + stack reading."""
    _sized(hp, ("vocab_size", "num_layers", "hidden_units", "stack_size"))
    h, s = hp["hidden_units"], hp["stack_size"]
    width = h + s if hp["include_reading_in_output"] else h
    mode = {"lstm": "LSTM", "rnn": "RNN"}[hp["controller"]]
    body = recurrence("controller", mode, width + s, hp)
    body += _as(bt.linear("action_layer.linear", h, 3) +
                bt.linear("push_value_layer.linear", h, s), "stack")
    return _rnn_lm("rau-stack-rnn", mode, hp, body, width, [])


# --- transformers --------------------------------------------------------------------------------


def _check_heads(hp: Mapping[str, Any]) -> None:
    _sized(hp, ("vocab_size", "d_model", "num_heads", "feedforward_size"))
    if hp["d_model"] % hp["num_heads"]:
        raise UsageError("d_model must be divisible by num_heads")


def _input_leaf(hp: Mapping[str, Any]) -> Leaf:
    """The scaled embedding + sinusoidal positions (a composite leaf; positions are computed)."""
    return [bt.param("first.func.embedding_layer", "embeddings", (_rows(hp), hp["d_model"]),
                     "embedding")]


def _encoder_layers(hp: Mapping[str, Any], n: int, final_norm: bool) -> Leaf:
    return bt.transformer_stack("layers", "encoder", n, hp["d_model"], hp["num_heads"],
                                hp["feedforward_size"], norm=final_norm)


TRANSFORMER_HPARAMS = (*TRANSFORMER_COMMON, HParam("num_layers", 3, "transformer layers"))


def predict_transformer(hp: Mapping[str, Any]) -> Prediction:
    _check_heads(hp)
    _sized(hp, ("num_layers",), 0)
    body = [_encoder_layers(hp, hp["num_layers"], final_norm=True)]
    return _language_model("rau-transformer", hp, _input_leaf(hp), body, hp["d_model"], [])


STACK_TRANSFORMER_HPARAMS = (
    *TRANSFORMER_COMMON,
    HParam("layers", "", "rau's --stack-transformer-layers string, e.g. 2.superposition-32.2; "
           "empty: num_layers standard then num_stack_layers stack layers", str),
    HParam("num_layers", 1, "standard layers before the stack layers (when layers is empty)"),
    HParam("stack_size", 16, "superposition stack embedding size (when layers is empty)"),
    HParam("num_stack_layers", 1, "superposition stack-attention layers (when layers is empty)"),
)


def layer_string(hp: Mapping[str, Any]) -> str:
    """The layer string: ``layers`` as given, else built from the structured hyperparameters."""
    if hp["layers"]:
        return hp["layers"]
    _sized(hp, ("num_layers", "num_stack_layers"), 0)
    _sized(hp, ("stack_size",))
    parts = [str(hp["num_layers"])] if hp["num_layers"] else []
    parts += [f"superposition-{hp['stack_size']}"] * hp["num_stack_layers"]
    if not parts:
        raise UsageError("a stack transformer needs at least one layer")
    return ".".join(parts)


def parse_layers(spec: str) -> tuple[list[tuple[str, int]], list[str]]:
    """``[("transformer", n) | ("superposition", m), ...]`` exactly as rau parses ``spec``, and a
    note for every part rau reads only partly."""
    out: list[tuple[str, int]] = []
    notes: list[str] = []
    for part in spec.split("."):
        m = LAYER_RE.match(part)
        if m is None:
            raise UsageError(f"layers: {part!r} is not a stack transformer layer")
        n, sup = m.group(1), m.group(2)
        if n is None and sup is None:
            raise UsageError("layers: nondeterministic stack attention is not supported")
        out.append(("transformer", int(n)) if n is not None else ("superposition", int(sup)))
        if m.end() != len(part):
            kind, size = out[-1]
            what = f"{size} standard layers" if kind == "transformer" else f"superposition-{size}"
            notes.append(f"rau reads layer part {part!r} as {what} and ignores "
                         f"{part[m.end():]!r}")
    return out, notes


def stack_attention_layer(d: int, s: int, ff: int) -> list[Leaf]:
    """Two pipeline leaves: the stack-attention sublayer and the feed-forward sublayer (each a
    residual around LayerNorm | function | dropout)."""
    attention = bt.layer_norm("wrapped_module.first.first.func", d) + _as(
        bt.linear("wrapped_module.first.second.action_layer.linear", d, 3, bias=False)
        + bt.linear("wrapped_module.first.second.input_to_pushed_vector_layer.linear", d, s,
                    bias=False)
        + bt.linear("wrapped_module.first.second.stack_reading_to_output_layer.linear", s, d,
                    bias=False),
        "stack_attention")
    # Sequential(Layer(d, ff), Dropout, Layer(ff, d)): the second Layer is index 2.
    feedforward = bt.layer_norm("wrapped_module.first.first.func", d) + _as(
        bt.linear("wrapped_module.first.second.func.0.linear", d, ff)
        + bt.linear("wrapped_module.first.second.func.2.linear", ff, d), "feedforward")
    return [attention, feedforward]


def predict_stack_transformer(hp: Mapping[str, Any]) -> Prediction:
    _check_heads(hp)
    spec = layer_string(hp)
    parsed, notes = parse_layers(spec)
    body: list[Leaf] = []
    for kind, size in parsed:
        if kind == "transformer":
            body.append(_encoder_layers(hp, size, final_norm=False))
        else:
            body += stack_attention_layer(hp["d_model"], size, hp["feedforward_size"])
    body.append(bt.layer_norm("func", hp["d_model"]))
    standard = sum(n for k, n in parsed if k == "transformer")
    stacked = sum(1 for k, _ in parsed if k != "transformer")
    notes.insert(0, f"layers {spec!r}: {standard} standard, {stacked} stack-attention")
    return _language_model("rau-stack-transformer", hp, _input_leaf(hp), body, hp["d_model"],
                           notes)


# --- reading a rau model directory -------------------------------------------------------------

KWARG_NAMES = {  # rau kwargs.json key -> hyperparameter
    "input_vocabulary_size": "vocab_size",
    "num_layers": "num_layers",
    "hidden_units": "hidden_units",
    "d_model": "d_model",
    "num_heads": "num_heads",
    "feedforward_size": "feedforward_size",
    "stack_rnn_controller": "controller",
    "stack_rnn_connect_reading_to_output": "include_reading_in_output",
    "use_padding": "use_padding",
    "tie_embeddings": "tie_embeddings",
}


def rau_kwargs(ckpt: Checkpoint) -> dict[str, Any]:
    """rau's ``kwargs.json``, as the adapters attached it (``rau_kwargs``: the one a rau directory
    read, else the one beside the parameters file, ``parameters.pt``, or above it,
    ``parameters/main.pt``); ``{}`` when there is none."""
    return side_config(ckpt, RAU_KWARGS)


def from_kwargs(arch: str, hparams: Sequence[HParam]) -> Callable[[Checkpoint], dict[str, Any]]:
    names = {h.name for h in hparams}

    def read(ckpt: Checkpoint) -> dict[str, Any]:
        kw = rau_kwargs(ckpt)
        # rau 0.2.0 does not always record the architecture; the arch's detector chose it then
        if kw.get("architecture") is not None and "rau-" + str(kw["architecture"]) != arch:
            return {}
        out = {h: kw[k] for k, h in KWARG_NAMES.items() if kw.get(k) is not None and h in names}
        if kw.get("output_vocabulary_size") not in (None, kw.get("input_vocabulary_size")):
            out["output_vocab_size"] = kw["output_vocabulary_size"]
        stack = kw.get("stack_rnn_stack")
        if arch == "rau-stack-rnn" and isinstance(stack, list) and stack[0] == "superposition":
            out["stack_size"] = stack[1][0]
        layers = kw.get("stack_transformer_layers")
        if arch == "rau-stack-transformer" and isinstance(layers, list):
            out["layers"] = ".".join(
                str(a[0]) if k == "transformer" else f"{k}-{'-'.join(map(str, a))}"
                for k, a in layers)
            out.pop("num_layers", None)
        return out

    return read


def _shapes(ckpt: Checkpoint) -> dict[str, tuple[int, ...]]:
    return {t.name: tuple(t.shape) for t in ckpt.tensors if t.role is Role.PARAMETER}


def _find(shapes: Mapping[str, tuple[int, ...]], suffix: str) -> tuple[int, ...] | None:
    return next((s for n, s in shapes.items() if n.endswith(suffix)), None)


def infer_recurrent(ckpt: Checkpoint) -> dict[str, Any]:
    """Sizes, layer count and options of an RNN / stack-RNN LM from its shapes."""
    shapes = _shapes(ckpt)
    out: dict[str, Any] = {}
    emb = _find(shapes, "func.embeddings")
    hh = _find(shapes, "rnn.weight_hh_l0")
    if emb is None or hh is None:
        return out
    h = hh[1]
    out.update(vocab_size=emb[0], hidden_units=h,
               num_layers=sum(1 for n in shapes if ".rnn.weight_hh_l" in n),
               learned_initial_state=_find(shapes, ".initial_hidden_state_inputs") is not None,
               use_extra_bias=_find(shapes, ".rnn.bias_hh_l0") is not None,
               bias=_find(shapes, ".rnn.bias_ih_l0") is not None)
    push = _find(shapes, "push_value_layer.linear.weight")
    if push is not None:
        out.update(stack_size=push[0], include_reading_in_output=emb[1] != h,
                   controller="lstm" if hh[0] == 4 * h else "rnn")
    return out


_LAYER_INDEX = re.compile(r"\.layers\.(\d+)\.self_attn\.")


def infer_transformer(ckpt: Checkpoint) -> dict[str, Any]:
    shapes = _shapes(ckpt)
    emb = _find(shapes, "embedding_layer.embeddings")
    ff = _find(shapes, ".linear1.weight") or _find(shapes, "func.0.linear.weight")
    if emb is None:
        return {}
    out: dict[str, Any] = {"vocab_size": emb[0], "d_model": emb[1]}
    if ff is not None:
        out["feedforward_size"] = ff[0]
    if not any("input_to_pushed_vector_layer" in n for n in shapes):
        layers = {m.group(1) for n in shapes if (m := _LAYER_INDEX.search(n))}
        if layers:
            out["num_layers"] = len(layers)
    linear = _find(shapes, "second.func.linear.weight")
    out["tie_embeddings"] = linear is None
    if linear is not None:
        out["output_vocab_size"] = linear[0]
    return out


def _has(*parts: str) -> Callable[[Checkpoint], bool]:
    def applies(ckpt: Checkpoint) -> bool:
        names = [t.name for t in ckpt.tensors]
        return all(any(p in n for n in names) for p in parts)

    return applies


def _rnn_applies(gates: int) -> Callable[[Checkpoint], bool]:
    def applies(ckpt: Checkpoint) -> bool:
        shapes = _shapes(ckpt)
        hh = _find(shapes, "second.rnn.weight_hh_l0")
        return (hh is not None and hh[0] == gates * hh[1]
                and _find(shapes, "func.embeddings") is not None
                and _find(shapes, "push_value_layer.linear.weight") is None)

    return applies


for _name, _mode, _gates in (("rau-lstm", "LSTM", 4), ("rau-rnn", "RNN", 1)):
    register(Arch(
        name=_name,
        description=f"rau {_mode} language model (tied embeddings; rau lm train "
                    f"--architecture {_name[4:]})",
        hparams=RNN_COMMON,
        predict=predict_rnn(_name, _mode),
        from_checkpoint=from_kwargs(_name, RNN_COMMON),
        infer=infer_recurrent,
        applies=_rnn_applies(_gates),
        scheme="rau",
    ))

register(Arch(
    name="rau-transformer",
    description="rau causally masked pre-norm transformer LM (rau lm train --architecture "
                "transformer)",
    hparams=TRANSFORMER_HPARAMS,
    predict=predict_transformer,
    from_checkpoint=from_kwargs("rau-transformer", TRANSFORMER_HPARAMS),
    infer=infer_transformer,
    applies=lambda c: _has("embedding_layer.embeddings", ".self_attn.")(c)
    and not _has("input_to_pushed_vector_layer")(c),
    scheme="rau",
))

register(Arch(
    name="rau-stack-rnn",
    description="rau superposition stack-RNN LM (differentiable-stacks branch; "
                "--architecture stack-rnn --stack-rnn-stack superposition-<stack_size>)",
    hparams=STACK_RNN_HPARAMS,
    predict=predict_stack_rnn,
    from_checkpoint=from_kwargs("rau-stack-rnn", STACK_RNN_HPARAMS),
    infer=infer_recurrent,
    applies=_has("controller.rnn.weight_ih_l0", "push_value_layer.linear.weight"),
    scheme="rau",
))

register(Arch(
    name="rau-stack-transformer",
    description="rau transformer LM with superposition stack-attention layers "
                "(differentiable-stacks branch; --architecture stack-transformer)",
    hparams=STACK_TRANSFORMER_HPARAMS,
    predict=predict_stack_transformer,
    from_checkpoint=from_kwargs("rau-stack-transformer", STACK_TRANSFORMER_HPARAMS),
    infer=infer_transformer,
    applies=_has("embedding_layer.embeddings", "input_to_pushed_vector_layer"),
    scheme="rau",
))
