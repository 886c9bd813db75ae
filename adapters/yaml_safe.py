"""YAML side files (Sockeye ``config``, ``args.yaml``) parsed without constructing Python objects.

Sockeye dumps its configs with Python tags (``!ModelConfig``, ``!!python/tuple``,
``!!python/object:sockeye.config.Config``). ``yaml.safe_load`` refuses them and ``yaml.load``
would build objects; here every tagged node becomes plain data: a tagged mapping is a dict with
its tag under ``__tag__``, a tagged sequence a list, a tagged scalar its string value.
"""

from __future__ import annotations

from pathlib import Path

from .errors import FormatError
from .source import Source, as_source

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

TAG_KEY = "__tag__"
MAX_BYTES = 10_000_000
MAX_NODES = 1_000_000


class YamlProblem(Exception):
    """Text that is not acceptable YAML; ``line`` (1-based) when the parser knows it."""

    def __init__(self, problem: str, line: int | None = None) -> None:
        super().__init__(problem)
        self.problem, self.line = problem, line


def _loader(line_key: str | None):
    import yaml

    # libyaml's parser when PyYAML was built with it; the constructors stay safe either way.
    class InertLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
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
    if line_key is not None:

        def mapping_with_line(loader: InertLoader, node: yaml.MappingNode) -> dict[str, Any]:
            data = loader.construct_mapping(node, deep=True)
            data[line_key] = node.start_mark.line + 1
            return data

        InertLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                    mapping_with_line)
    return InertLoader, yaml.YAMLError


def parse_yaml(text: str, line_key: str | None = None) -> Any:
    """YAML text as plain dicts, lists and scalars (never Python objects); with ``line_key``,
    each mapping also records its first line under that key. Raises :class:`YamlProblem`."""
    loader_class, yaml_error = _loader(line_key)
    loader = loader_class(text)
    try:
        data = loader.get_single_data()
    except yaml_error as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise YamlProblem(problem, mark.line + 1 if mark is not None else None) from None
    except RecursionError:
        raise YamlProblem("nesting too deep") from None
    finally:
        loader.dispose()
    if _expanded_size(data, MAX_NODES) > MAX_NODES:
        # Aliases are shared references when parsed but expand when printed (a "billion laughs").
        raise YamlProblem(f"expands to more than {MAX_NODES} nodes through aliases")
    return data


def load_yaml(path: Path | Source) -> Any:
    """Parse a YAML file into plain dicts, lists and scalars; never builds Python objects."""
    source = as_source(path)
    if source.size > MAX_BYTES:
        raise FormatError(
            f"YAML side file is {source.size} bytes (limit {MAX_BYTES})", source.where
        )
    text = source.read_text(MAX_BYTES)
    try:
        return parse_yaml(text)
    except YamlProblem as e:
        where = f"line {e.line}" if e.line is not None else None
        raise FormatError(f"not valid YAML ({e.problem})", source.where, where) from None


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
