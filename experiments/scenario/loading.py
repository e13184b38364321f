"""Reading YAML files and turning validation problems into one clear CapsimError.

Every problem names the file, the line when known, the field path (``workload.mean_interarrival``), what was
expected and what was found. Validation collects all problems before raising, so a user fixes a file in one pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from sim.model import CapsimError
from sim.registry import did_you_mean

__all__ = ["Source", "Problem", "read_yaml", "raise_problems", "pydantic_problems", "did_you_mean", "path_str",
           "inner_model", "free_mapping"]

Path_ = tuple[str | int, ...]


@dataclass
class Source:
    """A parsed YAML document plus where each field path sits in the file (1-based lines)."""

    file: str
    data: Any
    lines: dict[Path_, int]

    def line(self, path: Path_) -> int | None:
        """Line of ``path``, or of its nearest ancestor that is in the file."""
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return None


@dataclass
class Problem:
    """One thing wrong with a file: where (field path) and what (a message saying expected vs found)."""

    path: Path_
    message: str
    line: int | None = None


def path_str(path: Sequence[str | int]) -> str:
    """``('policies', 2, 'kind')`` → ``policies[2].kind``."""
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out or "(top level)"


MAX_BYTES = 2_000_000
"""The largest YAML file read (2 MB: scenarios and sweeps are a few KB; a runtime table of thousands of entries
fits)."""
MAX_NODES = 100_000
"""The most values a YAML document may hold once its aliases are expanded: a "billion laughs" file of a few lines
names billions, and is refused before anything is built from it."""
MAX_DEPTH = 60
_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map", "merge", "timestamp")}


def _line_map(node: yaml.Node, out: dict[Path_, int]) -> None:
    """Record the line of every field path, walking each node once (aliases are not expanded again)."""
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, Path_]] = [(node, ())]
    while stack:
        n, path = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, yaml.MappingNode):
            for key_node, value_node in n.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
                sub = path + (key,)
                out.setdefault(sub, key_node.start_mark.line + 1)
                stack.append((value_node, sub))
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                sub = path + (i,)
                out.setdefault(sub, item.start_mark.line + 1)
                stack.append((item, sub))


def _check_nodes(root: yaml.Node, where: str) -> None:
    """Refuse what a scenario never needs and a hostile file would use: aliases expanding to more than ``MAX_NODES``
    values, an alias inside itself, nesting deeper than ``MAX_DEPTH``, tags other than YAML's plain ones (no Python
    objects); and a key given twice in one mapping, which YAML silently resolves to the last one."""
    size: dict[int, int] = {}
    state: dict[int, int] = {}  # 1: being walked, 2: done
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        n, depth, leaving = stack.pop()
        line = f"{where}:{n.start_mark.line + 1}"
        if leaving:
            kids = _children(n)
            size[id(n)] = 1 + sum(size[id(k)] for k in kids)
            state[id(n)] = 2
            if size[id(n)] > MAX_NODES:
                raise CapsimError(f"{line}: too large: expanding its aliases gives more than {MAX_NODES:,} values "
                                  f"(a scenario or sweep holds far fewer); write the values out, or use fewer aliases")
            continue
        if state.get(id(n)) == 2:
            continue
        if state.get(id(n)) == 1:
            raise CapsimError(f"{line}: an alias refers to a node that contains it (a recursive structure); "
                              f"expected plain values")
        if depth > MAX_DEPTH:
            raise CapsimError(f"{line}: nested more than {MAX_DEPTH} levels deep; expected a scenario or sweep")
        if n.tag not in _TAGS:
            raise CapsimError(f"{line}: the tag {n.tag!r} is not allowed; capsim reads plain YAML values only "
                              f"(text, numbers, true/false, null, lists, mappings)")
        if isinstance(n, yaml.MappingNode):
            keys: dict[Any, int] = {}
            for k, _ in n.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    if k.value in keys:
                        raise CapsimError(f"{where}:{k.start_mark.line + 1}: the key {k.value!r} appears twice in one "
                                          f"mapping (also on line {keys[k.value]}); YAML keeps only the last, so give "
                                          f"it once")
                    keys[k.value] = k.start_mark.line + 1
        state[id(n)] = 1
        stack.append((n, depth, True))
        stack.extend((k, depth + 1, False) for k in _children(n))


def _children(n: yaml.Node) -> list[yaml.Node]:
    if isinstance(n, yaml.MappingNode):
        return [x for kv in n.value for x in kv]
    if isinstance(n, yaml.SequenceNode):
        return list(n.value)
    return []


def _text(p: Path, what: str) -> str:
    """The file's text: UTF-8 (a UTF-8 byte-order mark allowed), at most ``MAX_BYTES``; anything else is named."""
    size = p.stat().st_size
    if size > MAX_BYTES:
        raise CapsimError(f"{p}: {what} is {size:,} bytes; expected at most {MAX_BYTES:,} (is it the right file?)")
    raw = p.read_bytes()
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(raw) > 1 and (raw[0] == 0) != (raw[1] == 0)):
        raise CapsimError(f"{p}: {what} is UTF-16 or UTF-32 text; save it as UTF-8")
    if b"\0" in raw:
        raise CapsimError(f"{p}: {what} is a binary file, not YAML text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise CapsimError(f"{p}:{line}: {what} is not UTF-8 text (byte 0x{raw[e.start]:02x}); save it as UTF-8") \
            from None


def read_yaml(path: str | Path, what: str = "file") -> Source:
    """Parse a YAML file within limits (``_text``, ``_check_nodes``); a missing file, a syntax error or a refused
    document becomes a CapsimError with the line number."""
    p = Path(path)
    if not p.is_file():
        hint = " (it is a directory)" if p.is_dir() else ""
        raise CapsimError(f"{p}: {what} not found{hint}; check the path (relative paths are from {Path.cwd()})")
    try:
        text = _text(p, what)
    except OSError as e:
        raise CapsimError(f"{p}: cannot read the {what}: {e.strerror}") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_nodes(node, str(p))
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        detail = " ".join(x for x in (e.context, e.problem) if x)
        raise CapsimError(f"{p}{where}: not valid YAML: {detail}") from None
    except yaml.YAMLError as e:
        raise CapsimError(f"{p}: not valid YAML: {e}") from None
    except RecursionError:
        raise CapsimError(f"{p}: nested too deeply to read; expected a scenario or sweep") from None
    finally:
        loader.dispose()
    if data is None or node is None:  # no node, no data
        raise CapsimError(f"{p}: {what} is empty; expected a mapping of fields (see README.md, A scenario file)")
    lines: dict[Path_, int] = {}
    _line_map(node, lines)
    return Source(str(p), data, lines)


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _found(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping" if value else "an empty mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    return f"{value!r}"


_EXPECT = {
    "int_parsing": "a whole number",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "float_parsing": "a number",
    "float_type": "a number",
    "finite_number": "a finite number",
    "string_type": "text",
    "bool_parsing": "true or false",
    "bool_type": "true or false",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping (key: value)",
    "model_type": "a mapping (key: value)",
    "model_attributes_type": "a mapping (key: value)",
}


def _model_at(model: type[BaseModel], loc: Sequence[Any]) -> type[BaseModel] | None:
    """The pydantic model that owns the last key of ``loc`` (for listing known keys), if it can be found; a union's
    tag in ``loc`` (``<custom>``) picks the member it names."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if isinstance(part, str) and part.startswith("<"):
            current = _tagged(current, part) or current
            continue
        fields = getattr(inner_model(current), "model_fields", None)
        if not fields or part not in fields:
            return None
        current = fields[part].annotation
    current = inner_model(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _tagged(annotation: Any, tag: str) -> Any:
    """The member of a tagged union inside ``annotation`` whose ``Tag`` is ``tag``, or None."""
    if get_origin(annotation) is Annotated:
        base, *meta = get_args(annotation)
        if any(getattr(m, "tag", None) == tag for m in meta):
            return base
        return _tagged(base, tag)
    for arg in get_args(annotation):
        found = _tagged(arg, tag)
        if found is not None:
            return found
    return None


def inner_model(annotation: Any) -> Any:
    """The first pydantic model inside a field's annotation (through unions, ``Annotated`` and containers), or None:
    the model that owns the keys below the field (error locations, dotted paths of a sweep's grid)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = inner_model(arg)
        if found is not None:
            return found
    meta = getattr(annotation, "__origin__", None)
    if meta is not None:
        return inner_model(meta)
    return None


def free_mapping(annotation: Any) -> bool:
    """Whether a field takes a mapping of free keys (``dict[str, ...]``, alone or as a member of a union): its keys
    are data, not fields of a model."""
    if get_origin(annotation) is dict or annotation is dict:
        return True
    if get_origin(annotation) is Annotated:
        return free_mapping(get_args(annotation)[0])
    if get_origin(annotation) in (Union, UnionType):
        return any(free_mapping(a) for a in get_args(annotation))
    return False


def pydantic_problems(err: ValidationError, model: type[BaseModel], prefix: Path_ = ()) -> list[Problem]:
    """Translate pydantic's errors into Problems with clean field paths and expected-vs-found messages."""
    out: list[Problem] = []
    for e in err.errors(include_url=False):
        loc = [p for p in e["loc"] if not (isinstance(p, str) and p.startswith("<"))]
        kind = e["type"]
        value = e.get("input")
        ctx = e.get("ctx") or {}
        if kind == "extra_forbidden":
            owner = _model_at(model, e["loc"][:-1])
            known = sorted(owner.model_fields) if owner else []
            key = loc[-1]
            msg = f"unknown key {key!r}{did_you_mean(str(key), known)}"
            if known:
                msg += f" (known keys: {', '.join(known)})"
        elif kind == "missing":
            msg = "required field is missing"
        elif kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
            op = {"greater_than": ">", "greater_than_equal": "≥", "less_than": "<", "less_than_equal": "≤"}[kind]
            bound = next(iter(ctx.values()), "?")
            msg = f"expected a number {op} {bound}, found {_found(value)}"
        elif kind in ("too_short", "too_long"):
            bound = ctx.get("min_length" if kind == "too_short" else "max_length", "?")
            word = "at least" if kind == "too_short" else "at most"
            kind_of = "a mapping" if isinstance(value, dict) else "a list"
            msg = (f"expected {kind_of} with {word} {bound} item{'' if bound == 1 else 's'}, found "
                   f"{ctx.get('actual_length', '?')}")
        elif kind in _EXPECT:
            msg = f"expected {_EXPECT[kind]}, found {_found(value)}"
            if isinstance(value, bool) and not kind.startswith("bool"):
                msg += " (YAML reads yes/no/on/off/true/false as true or false)"
            elif isinstance(value, str) and kind.startswith(("float", "int")) and _looks_numeric(value):
                msg += " (text, not a number: unquote it; YAML reads 1e12 as text, write 1.0e12)"
        elif kind in ("value_error", "assertion_error"):
            text = str(ctx.get("error", e["msg"]))
            msg = text if "found" in text else f"{text}, found {_found(value)}"
        elif kind in ("union_tag_not_found", "union_tag_invalid", "capsim_choice"):
            msg = f"{e['msg']}, found {_found(value)}"
        elif kind == "literal_error":
            msg = f"expected {ctx.get('expected', e['msg'])}, found {_found(value)}"
        else:
            msg = f"{e['msg']}; found {_found(value)}"
        out.append(Problem(tuple(prefix) + tuple(loc), msg))
    return out


def raise_problems(source: Source | str, problems: list[Problem], what: str = "") -> None:
    """Raise one CapsimError listing every problem with file, line and field; do nothing if there are none."""
    if not problems:
        return
    file = source.file if isinstance(source, Source) else source
    located = []
    for p in problems:
        line = p.line if p.line is not None else (source.line(p.path) if isinstance(source, Source) else None)
        located.append((line, p))
    located.sort(key=lambda lp: lp[0] if lp[0] is not None else 10**9)
    lines = []
    for line, p in located:
        where = f"{file}:{line}" if line else file
        lines.append(f"{where}: {path_str(p.path)}: {p.message}")
    head = f"{len(problems)} problems in {what or file}:\n  " if len(problems) > 1 else ""
    raise CapsimError(head + "\n  ".join(lines))
