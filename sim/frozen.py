"""Constructors of frozen, slotted dataclasses that take the fields positionally, for the engine's views.

The engine builds views (snapshots, job and node views, assignments) at every event. A frozen class refuses attribute
assignment, and setting a slot through its descriptor's ``__set__`` costs a call with an argument tuple per field
(keyword arguments and ``object.__setattr__`` by name cost twice that). ``positional`` makes each object as an
instance of a private twin class of the same layout that takes plain attribute assignment, sets its slots, then gives
it its class (``__class__`` assignment, which Python allows between classes of one layout): a third of the cost.
Where no twin has the same layout (checked once per class) each slot is set through its descriptor instead. This
module imports nothing of the project.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import TypeVar

__all__ = ["positional"]

T = TypeVar("T")


def positional(cls: type[T], kind: type[T] | None = None) -> Callable[..., T]:
    """A constructor of the frozen, slotted dataclass ``cls`` taking its fields positionally, in declaration order
    (those with a default may be left out at the end, as with the keyword constructor; module docstring). ``cls`` has
    no ``__post_init__``, so the object is the one ``cls(...)`` makes of the same values. With ``kind``, a subclass of
    ``cls`` adding slots but no fields, the object is one of ``kind`` with ``cls``'s fields set and its own slots set
    from keyword-only arguments of their names (None when not given)."""
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"positional({cls.__name__}): it has a __post_init__")
    made = cls if kind is None else kind
    names, params = [], []
    space: dict[str, object] = {"_new": object.__new__, "cls": made}
    for f in fields(cls):  # type: ignore[arg-type]
        n = f.name
        slot = cls.__dict__.get(n)
        if not hasattr(slot, "__set__"):
            raise TypeError(f"positional({cls.__name__}): field {n!r} is not a slot")
        space[f"_set_{n}"] = slot.__set__  # type: ignore[union-attr]
        names.append(n)
        if f.default is not MISSING:  # a field added later with a default leaves every call as it was
            space[f"_default_{n}"] = f.default
            params.append(f"{n}=_default_{n}")
        elif f.default_factory is not MISSING or (params and "=" in params[-1]):
            raise TypeError(f"positional({cls.__name__}): field {n!r} has a default factory or follows a default")
        else:
            params.append(n)
    twin = _twin(cls, kind, names)
    extra = [n for n in (kind.__dict__.get("__slots__", ()) if kind is not None else ()) if n != "__weakref__"]
    if extra:
        params += ["*", *(f"{n}=None" for n in extra)]
        space.update({f"_set_{n}": kind.__dict__[n].__set__ for n in extra})
    if twin is not None:
        space["_twin"] = twin
        body = "    o = _twin()\n" + "".join(f"    o.{n} = {n}\n" for n in names + extra) + "    o.__class__ = cls\n"
    else:
        body = "    o = _new(cls)\n" + "".join(f"    _set_{n}(o, {n})\n" for n in names + extra)
    exec(f"def make({', '.join(params)}):\n{body}    return o\n", space)
    make: Callable[..., T] = space["make"]  # type: ignore[assignment]
    make.__qualname__ = f"positional({cls.__name__})"
    return make


def _twin(cls: type, kind: type | None, names: list[str]) -> type | None:
    """A class whose instances take plain attribute assignment and may become ``kind`` (or ``cls``) by ``__class__``
    assignment: the same slots on the same base. None where no such class is found."""
    if kind is None:  # the same slots on ``object`` (a class whose fields are all its own slots)
        if cls.__bases__ != (object,) or set(cls.__dict__.get("__slots__", ())) != set(names):
            return None
        twin = type(f"_{cls.__name__}Twin", (), {"__slots__": tuple(names)})
    else:  # ``kind``'s own slots on ``cls``, whose refusal of assignment is undone
        if kind.__bases__ != (cls,) or "__weakref__" in kind.__dict__.get("__slots__", ()):
            return None
        twin = type(f"_{kind.__name__}Twin", (cls,), {
            "__slots__": kind.__dict__.get("__slots__", ()), "__init__": object.__init__,
            "__setattr__": object.__setattr__, "__delattr__": object.__delattr__})
    try:
        twin().__class__ = kind or cls
    except TypeError:  # the layouts differ after all
        return None
    return twin
