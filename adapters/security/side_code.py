"""Text files beside the weights that carry code: Python source, ``auto_map`` in
``config.json`` / ``tokenizer_config.json``, chat templates, Hydra and NeMo YAML configs.

``scan`` examines each such file by content and name (:func:`examine_text_file`); the
Hugging Face directory reader adds the same items as findings (:func:`hf_dir_findings`), so
``show`` and ``inspector.load`` refuse what ``scan`` calls dangerous.

``auto_map`` (transformers ``dynamic_module_utils.get_class_from_dynamic_reference``): a value
``"modeling_x.XModel"`` names ``modeling_x.py`` in the model's folder, which
``from_pretrained(trust_remote_code=True)`` imports; ``"other/repo--modeling_x.XModel"``
fetches and imports it from another repository. A value may also be a list (a tokenizer's slow
and fast class). Code that is not in the folder is not examined: an error line names it.
"""

from __future__ import annotations

import json

from .examination import DANGEROUS, ERROR
from .python_source import examine_source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..model import Finding
    from ..source_interface import Source
    from .examination import FileResult

MAX_JSON_BYTES = 16 << 20
MAX_YAML_BYTES = 10_000_000
JSON_CONFIGS = ("config.json", "tokenizer_config.json", "processor_config.json",
                "preprocessor_config.json", "adapter_config.json", "chat_template.json",
                "video_preprocessor_config.json")
# The configs beside config.json whose auto_map or chat template from_pretrained reads
# (tokenizer, processor, feature extractor / image processor, video processor).
SIDE_CONFIGS = ("tokenizer_config.json", "chat_template.json", "processor_config.json",
                "preprocessor_config.json", "video_preprocessor_config.json")
TEMPLATE_DIR = "additional_chat_templates"
MAX_RELATIVE = 100  # modules one auto_map file pulls in through relative imports
NEMO_CONFIG = "model_config.yaml"


def examine_text_file(source: Source, res: FileResult) -> bool:
    """``scan``'s look at a text file by its name: True when it was one of these kinds."""
    name = source.name
    if name.endswith(".py"):
        res.kind = "python"
        for level, text in _source_items(source, name):
            res.add(level, text)
        return True
    if name.endswith(".json") and source.size <= MAX_JSON_BYTES:
        items = json_config_items(source, strict=name in JSON_CONFIGS)
        if items is None:
            return False  # JSON that names no code: plain text
        res.kind = "json-config"
        for level, text, where in items:
            res.add(level, text, where)
        return True
    if name.endswith(".jinja"):  # transformers' chat_template.jinja
        res.kind = "chat-template"
        for level, text, where in _jinja_items(source):
            res.add(level, text, where)
        return True
    if name.endswith((".yaml", ".yml")):
        res.kind = "yaml"
        for level, text, where in yaml_items(source, name == NEMO_CONFIG):
            res.add(level, text, where)
        return True
    return False


def _source_items(source: Source, label: str) -> list[tuple[str, str]]:
    """:func:`.python_source.examine_source` of a file, its size checked before it is read."""
    from .python_source import MAX_SOURCE_BYTES

    if source.size > MAX_SOURCE_BYTES:
        return [(ERROR, f"Python source of {source.size:,} bytes (limit {MAX_SOURCE_BYTES:,}): "
                        "not parsed")]
    return examine_source(source.read(0, source.size), label)


def _jinja_items(source: Source) -> list[tuple[str, str, str | None]]:
    """A ``chat_template.jinja`` file's template, its size checked before it is read."""
    from .chat_template import MAX_TEMPLATE_CHARS

    if source.size > 4 * MAX_TEMPLATE_CHARS:
        return [(ERROR, f"chat template of {source.size:,} bytes: not examined", source.name)]
    return template_items(source.read(0, source.size).decode("utf-8", "replace"), source.name)


def json_config_items(source: Source, strict: bool = True
                      ) -> list[tuple[str, str, str | None]] | None:
    """Items of one JSON config: its ``auto_map`` code and its chat template(s). Not
    ``strict`` (a JSON file of another name): None when it is not JSON or names no code."""
    if source.size > MAX_JSON_BYTES:
        return [(ERROR, f"{source.size:,} bytes (limit {MAX_JSON_BYTES:,}): not examined", None)]
    try:
        data = json.loads(source.read(0, source.size))
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        return [(ERROR, f"not valid JSON ({e})", None)] if strict else None
    if not isinstance(data, dict):
        return [] if strict else None
    if not strict and not {"auto_map", "chat_template", "custom_pipelines"} & data.keys():
        return None
    out = auto_map_items(data.get("auto_map"), source)
    out += auto_map_items(pipeline_refs(data.get("custom_pipelines")), source,
                          "custom_pipelines")
    if "chat_template" in data:
        out += template_items(data["chat_template"])
    return out


def template_items(value: Any, label: str = "") -> list[tuple[str, str, str | None]]:
    from .chat_template import examine_template, template_texts

    out: list[tuple[str, str, str | None]] = []
    for where, text in template_texts(value):
        out += [(lv, t, label or where) for lv, t in examine_template(text)]
    return out


def pipeline_refs(custom: Any) -> dict[str, Any]:
    """``custom_pipelines`` as ``auto_map``-like references: ``pipeline(model,
    trust_remote_code=True)`` imports each task's ``impl`` (``"module.Class"`` or
    ``"repo--module.Class"``) with ``get_class_from_dynamic_module``, as it does ``auto_map``."""
    if not isinstance(custom, dict):
        return {}
    return {str(task): spec["impl"] for task, spec in list(custom.items())[:1000]
            if isinstance(spec, dict) and isinstance(spec.get("impl"), str)}


def auto_map_items(auto_map: Any, source: Source, field: str = "auto_map"
                   ) -> list[tuple[str, str, str | None]]:
    """The modules ``auto_map`` makes ``from_pretrained(trust_remote_code=True)`` import,
    with the modules they import relatively (``from .x import y``), which transformers
    copies beside them and imports too (``get_relative_import_files``)."""
    if not isinstance(auto_map, dict):
        return []
    refs: dict[str, list[str]] = {}
    for key, value in list(auto_map.items())[:1000]:
        for ref in value if isinstance(value, list) else [value]:
            if isinstance(ref, str) and "." in ref:
                refs.setdefault(ref.rpartition(".")[0], []).append(str(key))
    out: list[tuple[str, str, str | None]] = []
    for module, keys in sorted(refs.items()):
        where = f"{field}.{keys[0]}"
        if "--" in module:
            repo, _, mod = module.partition("--")
            out.append((ERROR, f"{field} runs {mod}.py from the repository {repo!r} under "
                               "trust_remote_code: that code is not here, not examined", where))
            continue
        file = module.replace(".", "/") + ".py"
        if file.startswith("/"):  # transformers joins it to the folder: the path itself
            out.append((DANGEROUS, f"{field} names {file}, an absolute path outside the "
                                   "folder: trust_remote_code imports whatever file is there",
                        where))
            continue
        code = _sibling(source, file)
        if code is None:
            out.append((ERROR, f"{field} names {file}, which is not beside {source.name}: the "
                               "code trust_remote_code would run is not examined", where))
            continue
        for level, text in _source_items(code, file):
            out.append((level, f"{file} ({field} {', '.join(keys)}): {text}", file))
        out += _relative_items(code, file, source)
    return out


_RELATIVE = None


def _relative_items(code: Source, file: str, source: Source
                    ) -> list[tuple[str, str, str | None]]:
    """Items of the files ``file`` imports relatively, recursively, found as transformers'
    ``get_relative_imports`` finds them (line patterns ``import .x`` and ``from .x import``)."""
    import re

    from .python_source import MAX_SOURCE_BYTES

    global _RELATIVE
    if _RELATIVE is None:
        _RELATIVE = re.compile(r"^\s*import\s+\.(\S+)\s*$|^\s*from\s+\.(\S+)\s+import",
                               re.MULTILINE)
    out: list[tuple[str, str, str | None]] = []
    seen, todo = {file}, [code]
    while todo:
        if len(seen) > MAX_RELATIVE:
            out.append((ERROR, f"{file} pulls in more than {MAX_RELATIVE} modules through "
                               "relative imports: not all examined", file))
            break
        current = todo.pop()
        if current.size > MAX_SOURCE_BYTES:
            continue  # too large to parse: _source_items has said so
        text = current.read(0, current.size).decode("utf-8", "replace")
        for m in _RELATIVE.finditer(text):
            rel = (m.group(1) or m.group(2)) + ".py"  # transformers adds .py to the name
            if rel in seen:
                continue
            seen.add(rel)
            dep = _sibling(source, rel)
            if dep is None:
                out.append((ERROR, f"{file} imports .{rel[:-3]}, which is not beside "
                                   f"{source.name}: not examined", file))
                continue
            for level, item in _source_items(dep, rel):
                out.append((level, f"{rel} (imported by {file} under trust_remote_code): "
                                   f"{item}", rel))
            todo.append(dep)
    return out


def _sibling(source: Source, relative: str) -> Source | None:
    from ..side_files import file_in

    try:
        folder = source.parent_dir()
    except Exception:  # noqa: BLE001 - a source with no folder: nothing beside it
        return None
    parts = relative.split("/")
    for part in parts[:-1]:
        try:
            folder = folder.child(part)
        except Exception:  # noqa: BLE001 - a path that leaves the folder
            return None
    return file_in(folder, parts[-1])


def yaml_items(source: Source, nemo: bool) -> list[tuple[str, str, str | None]]:
    """The callables a Hydra or NeMo YAML config names (:mod:`.config_targets`)."""
    from ..yaml_safe import YamlProblem, parse_yaml
    from .config_targets import target_items

    if source.size > MAX_YAML_BYTES:
        return [(ERROR, f"{source.size:,} bytes (limit {MAX_YAML_BYTES:,}): not examined", None)]
    try:
        data = parse_yaml(source.read(0, source.size).decode("utf-8"))
    except (YamlProblem, UnicodeDecodeError) as e:
        return [(ERROR, f"not valid YAML ({e})", None)]
    return [(lv, text, where) for lv, text, where in target_items(data, nemo)]


def hf_dir_findings(directory: Source, config: dict[str, Any]) -> list[Finding]:
    """A Hugging Face model folder's ``auto_map`` code (config.json, tokenizer_config.json)
    and chat templates as findings: dangerous ones ``danger`` (every verb refuses them)."""
    from ..side_files import file_in

    config_json = directory.child("config.json")
    items = auto_map_items(config.get("auto_map"), config_json)
    items += auto_map_items(pipeline_refs(config.get("custom_pipelines")), config_json,
                            "custom_pipelines")
    for name in SIDE_CONFIGS:
        side = file_in(directory, name)
        if side is not None:
            items += [(lv, f"{name}: {t}", w) for lv, t, w in json_config_items(side) or ()]
    jinja = file_in(directory, "chat_template.jinja")
    if jinja is not None:
        items += _jinja_items(jinja)
    items += _named_template_items(directory)
    return as_findings(items)


def _named_template_items(directory: Source) -> list[tuple[str, str, str | None]]:
    """``additional_chat_templates/*.jinja``: the named templates a tokenizer loads from the
    folder beside ``chat_template.jinja`` (transformers' ``CHAT_TEMPLATE_DIR``)."""
    from ..side_files import file_in

    try:
        folder = directory.child(TEMPLATE_DIR)
        names = folder.list() if folder.is_dir() else []
    except Exception:  # noqa: BLE001 - no such folder, or one that cannot be listed
        return []
    items: list[tuple[str, str, str | None]] = []
    for name in [n for n in names if n.endswith(".jinja")][:1000]:
        jinja = file_in(folder, name)
        if jinja is not None:
            items += [(lv, t, f"{TEMPLATE_DIR}/{name}") for lv, t, _ in _jinja_items(jinja)]
    return items


def as_findings(items: list[tuple[str, str, str | None]]) -> list[Finding]:
    """Items as checkpoint findings (dangerous -> ``danger``, which the policy refuses)."""
    from ..model import Finding

    out = []
    for level, text, where in items:
        if level == DANGEROUS:
            out.append(Finding("danger", text, where, text))
        else:
            out.append(Finding("warning", text if level != ERROR else f"not examined: {text}",
                               where))
    return out
