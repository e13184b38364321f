"""Reading YAML files and turning validation problems into one clear CapsimError.

Every problem names the file, the line when known, the field path (``workload.mean_interarrival``), what was
expected and what was found. Validation collects all problems before raising, so a user fixes a file in one pass.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Iterable, Sequence, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from sim.model import CapsimError

__all__ = ["Source", "Problem", "read_yaml", "raise_problems", "pydantic_problems", "did_you_mean", "path_str"]

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


def _line_map(node: yaml.Node, path: Path_, out: dict[Path_, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            sub = path + (key,)
            out[sub] = key_node.start_mark.line + 1
            _line_map(value_node, sub, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            sub = path + (i,)
            out[sub] = item.start_mark.line + 1
            _line_map(item, sub, out)


def read_yaml(path: str | Path, what: str = "file") -> Source:
    """Parse a YAML file; a missing file or a syntax error becomes a CapsimError with the line number."""
    p = Path(path)
    if not p.is_file():
        hint = " (it is a directory)" if p.is_dir() else ""
        raise CapsimError(f"{p}: {what} not found{hint}; check the path (relative paths are from {Path.cwd()})")
    text = p.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        detail = " ".join(x for x in (e.context, e.problem) if x)
        raise CapsimError(f"{p}{where}: not valid YAML: {detail}") from None
    except yaml.YAMLError as e:
        raise CapsimError(f"{p}: not valid YAML: {e}") from None
    lines: dict[Path_, int] = {}
    if node is not None:
        _line_map(node, (), lines)
    return Source(str(p), {} if data is None else data, lines)


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """A ``did you mean 'x'?`` hint, or empty."""
    close = difflib.get_close_matches(str(word), list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


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
        fields = getattr(_inner_model(current), "model_fields", None)
        if not fields or part not in fields:
            return None
        current = fields[part].annotation
    current = _inner_model(current)
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


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    meta = getattr(annotation, "__origin__", None)
    if meta is not None:
        return _inner_model(meta)
    return None


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
            msg = f"expected {e['msg'].lower().replace('list should have', 'a list with')}, found {_found(value)}"
        elif kind in _EXPECT:
            msg = f"expected {_EXPECT[kind]}, found {_found(value)}"
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
