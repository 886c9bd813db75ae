"""A TorchServe model archive (``.mar``): what TorchServe runs when it serves the model.

``torch-model-archiver`` writes a zip with ``MAR-INF/MANIFEST.json``. Its ``model`` names the
``handler`` (one of TorchServe's built-in handlers, or a Python file of the archive that
TorchServe imports and runs), the ``modelFile`` (eager mode: the Python file defining the
module, imported), the ``serializedFile`` (the weights: ``torch.load``, ``torch.jit.load`` or an
ONNX session) and the ``requirementsFile`` (pip-installed when ``install_py_dep_per_model`` is
set). Every member is examined by the archive walk; the manifest says which member plays which
part, and code TorchServe runs is never ``safe``.
"""

from __future__ import annotations

from .examination import ERROR, FOREIGN, FileResult

MANIFEST = "MAR-INF/MANIFEST.json"
MAX_MANIFEST = 1 << 20
# ts/torch_handler/*.py: the handlers TorchServe ships (its own code, not the archive's)
BUILTIN_HANDLERS = frozenset({"image_classifier", "image_segmenter", "object_detector",
                              "text_classifier", "base_handler", "dali_image_classifier",
                              "vision_handler", "densenet_handler", "request_envelope",
                              "unified_handler", "contractions", "text_handler"})


def examine_manifest(data: bytes, names: list[str], res: FileResult) -> None:
    """The manifest's parts, each named with what TorchServe does with it."""
    import json

    res.kind = "torchserve-mar"
    if len(data) > MAX_MANIFEST:
        res.add(ERROR, f"{MANIFEST} of {len(data):,} bytes: not examined", MANIFEST)
        return
    try:
        model = json.loads(data).get("model") or {}
        if not isinstance(model, dict):
            raise ValueError("its model entry is not an object")
    except (ValueError, AttributeError) as e:
        res.add(ERROR, f"{MANIFEST} is not TorchServe's JSON ({e}): not examined", MANIFEST)
        return
    present = set(names)
    handler = model.get("handler")
    if isinstance(handler, str) and handler:
        module = handler.split(":", 1)[0]
        file = module if module.endswith(".py") else module + ".py"
        if file in present:
            res.add(FOREIGN, f"handler {handler}: Python code TorchServe imports and runs when "
                    f"it serves the model ({file} is examined as code)", file)
        elif module not in BUILTIN_HANDLERS:
            res.add(FOREIGN, f"handler {handler!r}: neither a built-in TorchServe handler nor "
                    "a file of the archive: not examined", MANIFEST)
    for key, what in (("modelFile", "Python code TorchServe imports to build the model "
                       "(eager mode)"),
                      ("requirementsFile", "packages TorchServe pip-installs when "
                       "install_py_dep_per_model is set")):
        value = model.get(key)
        if isinstance(value, str) and value:
            res.add(FOREIGN, f"{key} {value}: {what}", value)
    serialized = model.get("serializedFile")
    if isinstance(serialized, str) and serialized and serialized not in present:
        res.add(ERROR, f"serializedFile {serialized!r} is not in the archive", MANIFEST)
