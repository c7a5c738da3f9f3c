"""A config file -> validated Config: its YAML read within limits, then validated, pydantic's errors
turned into one ERROR/TIP.

PyYAML's safe loader builds an alias as a second reference to the anchored object, so a few
hundred bytes of nested aliases ("billion laughs") load in milliseconds and then make every walk
of the result (validation, config_hash, rendering) visit billions of nodes. Its composer also
recurses once per nesting level, so a few thousand levels end in RecursionError. A config is a
few hundred nodes a dozen levels deep: the limits below are far above that and far below harm.

A config may be someone else's (a team's shared file): besides those limits, its size is capped
(PyYAML takes about 100 s for 60 MB), it must be UTF-8 text without NUL, a key given twice in one
mapping is refused (YAML would keep the last silently, and a reviewer reads the first), and every
number anywhere in it is finite and within a 64-bit integer's range (each field has its own, tighter
bound in its section's model).
"""
from __future__ import annotations

import math
import os
from importlib import resources
from pathlib import Path

import yaml
from pydantic import ValidationError

from .. import imageref
from ..errors import ConfigError
from .model import Config

MAX_DEPTH = 64          # nesting levels, aliases expanded
MAX_NODES = 100_000     # values, aliases expanded
# bytes of a config file: the built-in default with all its comments is 15 KB, the examples 2-4 KB
MAX_BYTES = 1024**2
# the largest integer anywhere in a config: Kubernetes' and Slurm's integers are 64-bit
MAX_INT = 2**63 - 1
_TIP = ("a config is a few hundred values a dozen levels deep; write the values out instead of "
        "nesting aliases (&anchor / *alias) or levels")


class _TooMuch(Exception):
    def __init__(self, what: str, mark=None, tip: str | None = None):
        super().__init__(what)
        self.what, self.mark, self.tip = what, mark, tip


class _Loader(yaml.SafeLoader):
    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def construct_mapping(self, node, deep=False):
        """As SafeLoader's, but a key written twice in one mapping is refused (a merged `<<: *anchor`
        key may still be overridden: that is what a merge is for)."""
        if isinstance(node, yaml.MappingNode):
            seen: dict[object, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node)
                if key in seen:
                    first = seen[key]
                    raise _TooMuch(f"key {str(key)[:80]!r} is given twice in one mapping (first at line "
                                   f"{first + 1}); YAML would keep only the last", key_node.start_mark,
                                   tip="keep one of the two: a reader of the file sees the first, the harness "
                                       "would use the last")
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)

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


def load_yaml(text: str, source: str) -> object:
    """The single YAML document in text as plain data; ConfigError for bad YAML or one over the limits."""
    nul = text.find("\0")
    if nul >= 0:
        raise ConfigError(f"{source}: holds a NUL character (at character {nul}): a config is text",
                          tip="the file is binary or damaged; write it again with `poc config show > poc.yaml`")
    loader = None
    try:
        loader = _Loader(text)   # the reader refuses other control characters already here
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expanded(node)
        return loader.construct_document(node)
    except _TooMuch as exc:
        where = f" at line {exc.mark.line + 1}" if exc.mark is not None else ""
        raise ConfigError(f"{source}: refused{where}: {exc.what}", tip=exc.tip or _TIP) from None
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{source}: not valid YAML{where}: {problem}",
                          tip="check indentation and quoting near that line") from None
    finally:
        if loader is not None:
            loader.dispose()


def _check_numbers(data: object, source: str) -> object:
    """data, when every number in it is finite and an integer within MAX_INT (whatever field holds it:
    a free-form one such as kubernetes.pod.affinity too); else ConfigError naming where."""
    stack: list[tuple[object, str]] = [(data, "")]
    while stack:
        x, where = stack.pop()
        if isinstance(x, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in x.items())
        elif isinstance(x, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(x))
        elif isinstance(x, float) and not math.isfinite(x):
            raise ConfigError(f"{source}: {where or '<top level>'}: {x} is not a finite number",
                              tip="give a number (.inf and .nan are YAML's infinity and not-a-number)")
        elif isinstance(x, int) and not isinstance(x, bool) and abs(x) > MAX_INT:
            raise ConfigError(f"{source}: {where or '<top level>'}: {str(x)[:30]}... is out of range",
                              tip=f"a number in a config is at most {MAX_INT} (each field's own bound is "
                                  "lower: `poc config schema` lists them)")
    return data


def default_yaml() -> str:
    return resources.files("harness").joinpath("default_config.yaml").read_text(encoding="utf-8")


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<top level>"


_TIPS = {
    "extra_forbidden": "remove the key or fix its spelling; `poc config show` lists every valid key",
    "missing": "add the key; `poc config show` shows it with its default",
    "literal_error": "use one of the values listed in the message",
    "image_reference": f"an image reference is {imageref.FORM}, e.g. registry.example.com/team/torch:2.4",
    "slurm_image": f"{imageref.SLURM_FORMS}; an image reference is {imageref.FORM}",
    "pyslurm_transport": "use slurm.transport: ssh (a login node over ssh), rest (slurmrestd with a JWT) or local "
                         "(Slurm's commands on this machine): none needs a library built for the cluster's release",
}


def from_mapping(data: object, source: str = "<config>") -> Config:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, not {type(data).__name__}",
                          tip="start from `poc config show > poc.yaml`")
    _check_numbers(data, source)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        lines, tips = [], []
        for err in exc.errors():
            loc = _loc(tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))))
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{loc}: {msg}")
            tip = _TIPS.get(err["type"])
            if tip and tip not in tips:
                tips.append(tip)
        first, rest = lines[0], lines[1:]
        message = f"{source}: {first}" + "".join(f"\nERROR {source}: {line}" for line in rest)
        raise ConfigError(message,
                          tip="; ".join(tips) or "fix the value; `poc config show` documents each field") from None


def load(path: str | os.PathLike | None) -> Config:
    """Load a config file, or the built-in default when path is None."""
    data, source = read_mapping(path)
    return from_mapping(data, source)


def read_mapping(path: str | os.PathLike | None) -> tuple[object, str]:
    """A config file's (or the built-in default's) plain data, not yet validated, and its name for
    messages: the CLI applies its --set and POC_* overrides to it before from_mapping validates."""
    if path is None:
        text, source = default_yaml(), "<built-in default>"
    else:
        p = Path(path).expanduser()
        if not p.is_file():
            raise ConfigError(f"config file {str(path)!r} does not exist",
                              tip="write one with `poc config show > poc.yaml`, or omit --config for the default")
        text, source = _read(p), str(path)
    return load_yaml(text, source), source   # with alias and nesting limits: ERROR/TIP, never a hang


def _read(p: Path) -> str:
    """A config file's text: at most MAX_BYTES, UTF-8 (ConfigError otherwise, never a traceback)."""
    try:
        with open(p, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"config file {str(p)!r}: {exc.strerror or exc}", tip="check the path and its permissions") \
            from None
    if len(data) > MAX_BYTES:
        raise ConfigError(f"config file {str(p)!r} is larger than {MAX_BYTES:,} bytes; not read",
                          tip="a config is a few KB (the built-in default, with its comments, is 15 KB): is it the "
                              "right file?")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ConfigError(f"config file {str(p)!r} is not UTF-8 text (byte {exc.start}, line {line})",
                          tip="save it as UTF-8; a config is YAML text") from None


def expand(path: str | None) -> str | None:
    return None if path is None else os.path.expandvars(os.path.expanduser(path))
