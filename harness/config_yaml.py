"""YAML → plain data, with limits, for config files.

PyYAML's safe loader builds an alias as a second reference to the anchored object, so a few
hundred bytes of nested aliases ("billion laughs") load in milliseconds and then make every walk
of the result (validation, config_hash, rendering) visit billions of nodes. Its composer also
recurses once per nesting level, so a few thousand levels end in RecursionError. A config is a
few hundred nodes a dozen levels deep: the limits below are far above that and far below harm.
"""
from __future__ import annotations

import yaml

from .errors import ConfigError

MAX_DEPTH = 64          # nesting levels, aliases expanded
MAX_NODES = 100_000     # values, aliases expanded
_TIP = ("a config is a few hundred values a dozen levels deep; write the values out instead of "
        "nesting aliases (&anchor / *alias) or levels")


class _TooMuch(Exception):
    def __init__(self, what: str, mark=None):
        super().__init__(what)
        self.what, self.mark = what, mark


class _Loader(yaml.SafeLoader):
    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:   # before the composer's recursion can reach Python's limit
                raise _TooMuch(f"more than {MAX_DEPTH} levels of nesting", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _children(node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expanded(root) -> None:
    """Count the values and levels the document would have once its aliases are expanded, without
    expanding them: each node is measured once (an alias is the same node object), iteratively."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    ancestors: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            kids = [id(c) for c in _children(node)]
            size[key] = 1 + sum(size[k] for k in kids)
            depth[key] = 1 + max((depth[k] for k in kids), default=0)
            ancestors.discard(key)
            if size[key] > MAX_NODES:
                raise _TooMuch(f"more than {MAX_NODES} values once its aliases are expanded", node.start_mark)
            if depth[key] > MAX_DEPTH:
                raise _TooMuch(f"more than {MAX_DEPTH} levels of nesting once its aliases are expanded",
                               node.start_mark)
            continue
        if key in size:
            continue
        if key in ancestors:
            raise _TooMuch("an alias that refers to itself (a recursive anchor)", node.start_mark)
        ancestors.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node))


def load(text: str, source: str) -> object:
    """The single YAML document in text as plain data; ConfigError for bad YAML or one over the limits."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expanded(node)
        return loader.construct_document(node)
    except _TooMuch as exc:
        where = f" at line {exc.mark.line + 1}" if exc.mark is not None else ""
        raise ConfigError(f"{source}: refused{where}: {exc.what}", tip=_TIP) from None
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{source}: not valid YAML{where}: {problem}",
                          tip="check indentation and quoting near that line") from None
    finally:
        loader.dispose()
