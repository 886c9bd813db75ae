"""YAML side files (Sockeye ``config``, ``args.yaml``) parsed without constructing Python objects.

Sockeye dumps its configs with Python tags (``!ModelConfig``, ``!!python/tuple``,
``!!python/object:sockeye.config.Config``). ``yaml.safe_load`` refuses them and ``yaml.load``
would build objects; here every tagged node becomes plain data: a tagged mapping is a dict with
its tag under ``__tag__``, a tagged sequence a list, a tagged scalar its string value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import FormatError

TAG_KEY = "__tag__"
MAX_BYTES = 10_000_000
MAX_NODES = 1_000_000


def _loader():
    import yaml

    class InertLoader(yaml.SafeLoader):
        """SafeLoader that turns unknown tags into plain data instead of failing."""

    def construct_tagged(loader: InertLoader, tag_suffix: str, node: yaml.Node) -> Any:
        tag = node.tag
        if isinstance(node, yaml.MappingNode):
            data = {TAG_KEY: tag}
            data.update(loader.construct_mapping(node, deep=True))
            return data
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    InertLoader.add_multi_constructor("!", construct_tagged)
    InertLoader.add_multi_constructor("tag:yaml.org,2002:python/", construct_tagged)
    return InertLoader, yaml.YAMLError


def load_yaml(path: Path) -> Any:
    """Parse a YAML file into plain dicts, lists and scalars; never builds Python objects."""
    loader, yaml_error = _loader()
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise FormatError(f"YAML side file is {size} bytes (limit {MAX_BYTES})", str(path))
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise FormatError(f"cannot read YAML ({e})", str(path)) from None
    try:
        data = loader(text).get_single_data()
    except yaml_error as e:
        raise FormatError(f"not valid YAML ({str(e).splitlines()[0]})", str(path)) from None
    except RecursionError:
        raise FormatError("YAML nesting too deep", str(path)) from None
    if _expanded_size(data, MAX_NODES) > MAX_NODES:
        # Aliases are shared references when parsed but expand when printed (a "billion laughs").
        raise FormatError(f"YAML expands to more than {MAX_NODES} nodes through aliases", str(path))
    return data


def _expanded_size(data: Any, budget: int) -> int:
    """Nodes in ``data`` with every alias expanded, counting stops just past ``budget``."""
    count, stack = 0, [data]
    while stack and count <= budget:
        node = stack.pop()
        count += 1
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return count
