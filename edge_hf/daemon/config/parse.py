"""Reading the YAML: a file of bounded size, depth and alias expansion, no repeated keys; then
validation, whose first problem becomes one line naming file, line, key and (a single, redacted)
value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from edge_hf.core.contract import POSE_MODEL
from edge_hf.core.errors import UserError, shown
from edge_hf.core.files import read_small_file
from edge_hf.daemon.config.schema import Config

MAX_CONFIG_BYTES = 1_000_000
MAX_CONFIG_VALUES = 100_000  # after alias expansion: a few cameras need hundreds
MAX_CONFIG_DEPTH = 20


def _check_shape(root: yaml.Node | None, source: str) -> None:
    """Refuse a document whose aliases expand past MAX_CONFIG_VALUES values (a "billion laughs"
    bomb) or that nests deeper than MAX_CONFIG_DEPTH, before anything expands it."""
    size: dict[int, int] = {}  # node id -> values it expands to (shared by its aliases)
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)] if root is not None else []
    while stack:
        node, depth, done = stack.pop()
        if depth > MAX_CONFIG_DEPTH:
            raise UserError(f"{source}: nested more than {MAX_CONFIG_DEPTH} levels deep")
        if id(node) in size:
            continue
        if isinstance(node, yaml.MappingNode):
            _refuse_duplicate_keys(node, source)
        children = (
            [v for kv in node.value for v in kv]
            if isinstance(node, yaml.MappingNode)
            else list(node.value)
            if isinstance(node, yaml.SequenceNode)
            else []
        )
        if done or not children:
            size[id(node)] = 1 + sum(size[id(c)] for c in children)
            if size[id(node)] > MAX_CONFIG_VALUES:
                raise UserError(
                    f"{source}: its aliases expand to more than {MAX_CONFIG_VALUES} values; "
                    "write the settings out"
                )
            continue
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in children if id(c) not in size)


def _refuse_duplicate_keys(node: yaml.MappingNode, source: str) -> None:
    """YAML lets a later key silently replace an earlier one (a second `cameras:` drops the first
    list): refuse it, naming both lines."""
    seen: dict[Any, int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode):
            continue
        line = key.start_mark.line + 1
        if key.value in seen:
            raise UserError(
                f"{source}:{line}: key {key.value!r} is already set on line {seen[key.value]}; "
                "a key may appear once per section: merge the two"
            )
        seen[key.value] = line


def _flow_depth(text: str) -> int:
    """The deepest nesting of YAML flow brackets ([ and {) outside quotes and comments."""
    depth = deepest = 0
    quote = ""
    for line in text.splitlines():
        for ch in line:
            if quote:
                quote = "" if ch == quote else quote
            elif ch in "'\"":
                quote = ch
            elif ch == "#":
                break
            elif ch in "[{":
                depth += 1
                deepest = max(deepest, depth)
            elif ch in "]}":
                depth = max(0, depth - 1)
        quote = "" if quote == "'" else quote
    return deepest


def _line_index(text: str) -> dict[tuple[Any, ...], int]:
    """Map each key path in the YAML document to its 1-based line number."""
    lines: dict[tuple[Any, ...], int] = {}

    def walk(node: yaml.Node, path: tuple[Any, ...]) -> None:
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                sub = (*path, key.value)
                lines[sub] = key.start_mark.line + 1
                walk(value, sub)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*path, i))

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root is not None:
        walk(root, ())
    return lines


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_config(text: str, source: str = "<config>") -> Config:
    """Validate YAML text; the first problem becomes a one-line UserError naming file, line, key."""
    if len(text) > MAX_CONFIG_BYTES:
        raise UserError(f"{source}: {len(text)} bytes; a config is at most {MAX_CONFIG_BYTES}")
    if _flow_depth(text) > MAX_CONFIG_DEPTH:  # before the parser, which is slow on those
        raise UserError(f"{source}: nested more than {MAX_CONFIG_DEPTH} levels deep")
    try:
        _check_shape(yaml.compose(text, Loader=yaml.SafeLoader), source)
        data = yaml.safe_load(text)
    except RecursionError:
        raise UserError(f"{source}: nested more than {MAX_CONFIG_DEPTH} levels deep") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{where}: not valid YAML ({problem})") from None
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping of settings at the top level")
    try:
        cfg = Config.model_validate(data)
    except ValidationError as exc:
        lines = _line_index(text)
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        # The nearest enclosing key that appears in the file gives the line.
        line = next((lines[loc[:i]] for i in range(len(loc), -1, -1) if loc[:i] in lines), 1)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling; see the README's configuration reference)"
        # A section-level problem (duplicate cameras, all disabled) would echo the whole section,
        # RTSP passwords included: only a single value is ever shown.
        raw = err.get("input")
        nested = isinstance(raw, dict) or (
            isinstance(raw, list) and any(isinstance(x, (dict, list)) for x in raw)
        )
        quiet = err["type"] in ("missing", "extra_forbidden") or nested
        if isinstance(raw, str):  # a camera URL's password or ?token=… never reaches a log
            from edge_hf.daemon.sources import redact

            raw = redact(raw)
        value = "" if quiet else f" = {shown(raw)}"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise UserError(f"{source}:{line}: {_dotted(loc)}{value}: {msg}{more}") from None
    check_zones(cfg, source, _line_index(text))
    return cfg


def check_zones(cfg: Config, source: str = "config", lines: dict[Any, int] | None = None) -> None:
    """Zones are judged on the people the pose model finds: a camera with zones while the person
    stage is off is refused (one line, with the line number when `lines` has it)."""
    if cfg.person.model is not None:
        return
    for i, cam in enumerate(cfg.cameras):
        if cam.zones:
            line = (lines or {}).get(("cameras", i, "zones"))
            names = ", ".join(z.name for z in cam.zones)
            raise UserError(
                f"{source}{f':{line}' if line else ''}: cameras[{i}].zones ({names}): zones need "
                "the person stage (where each person lies), and it is off: set person.model "
                f"({POSE_MODEL}), or remove the zones"
            )


def load_config(path: Path) -> Config:
    """Read and validate a YAML config file (a regular file of at most MAX_CONFIG_BYTES)."""
    try:
        text = read_small_file(path, MAX_CONFIG_BYTES, str(path), "a config").decode("utf-8")
    except OSError as exc:
        raise UserError(f"{path}: cannot read the config ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{path}: not UTF-8 text (byte {exc.start}); save the config as UTF-8"
        ) from None
    return parse_config(text, str(path))
