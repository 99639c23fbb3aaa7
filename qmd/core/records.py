"""`@record`: the plain data classes of the search path, without the dataclasses module.

Importing `dataclasses` loads `inspect` (and with it `ast`, `dis`, `tokenize`), and each
`@dataclass` runs its code generator: together about 10 ms of every `qmd search`, more than
the search itself. `record` builds what those classes use — an `__init__` taking the fields
in order (defaults, `field(default_factory=…)`), `__repr__`, `__eq__`, `__match_args__`,
and for `frozen=True` immutability and `__hash__` — in a fraction of that time.

The `__init__` is generic (a loop over the fields) for a class's first `GENERIC_INSTANCES`
instances and compiled for the rest: compiling one costs about 0.1 ms, and a process makes
few instances of most classes it uses (a first MCP query makes about 20 classes' worth, a
handful each: 3 ms of compiling for a 1 ms answer). Any call the generic one does not take
as it is (a missing, extra or repeated argument) compiles at once, so errors are Python's own.

The type checker sees `dataclasses.dataclass` and `dataclasses.field` (same semantics for
what is used here). Not supported, so not to be used on a record: `dataclasses.fields`,
`asdict`, `dataclasses.replace` (use this module's), `field(...)` options other than `default_factory`, inheritance of fields.
tests/qmd/core/test_records.py holds a record against the dataclass it stands for.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dataclasses import dataclass as record
    from dataclasses import field, replace
else:

    def replace(obj, /, **changes):
        """A copy of the record `obj` with `changes`; TypeError names a field it does not have."""
        names = type(obj).__match_args__
        unknown = [name for name in changes if name not in names]
        if unknown:
            raise TypeError(f"{type(obj).__qualname__} has no field {unknown[0]!r}")
        return type(obj)(*(changes[n] if n in changes else getattr(obj, n) for n in names))

    GENERIC_INSTANCES = 16  # instances of a record made before its __init__ is compiled

    class _Factory:
        __slots__ = ("make",)

        def __init__(self, make):
            self.make = make

    def field(*, default_factory):
        """A field whose default is made per instance (`field(default_factory=list)`)."""
        return _Factory(default_factory)

    def _frozen_setattr(self, name, value):
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def _frozen_delattr(self, name):
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def record(cls=None, /, *, frozen=False):
        """A class decorator like `@dataclass` / `@dataclass(frozen=True)` (see the module doc)."""

        def build(cls):
            names = list(cls.__dict__.get("__annotations__", {}))
            defaults, makers, required = {}, {}, set()
            for name in names:
                default = cls.__dict__.get(name, _Factory)
                if default is _Factory:
                    required.add(name)
                elif isinstance(default, _Factory):
                    makers[name] = default.make
                    delattr(cls, name)
                else:
                    defaults[name] = default
            fields = tuple(names)
            known = frozenset(names)
            assign = object.__setattr__ if frozen else setattr
            made = [0]

            def compiled():
                namespace = {"_missing": _Factory, "_setattr": object.__setattr__}
                params, lines = [], []
                for name in fields:
                    if name in makers:
                        namespace[f"_make_{name}"] = makers[name]
                        params.append(f"{name}=_missing")
                        lines.append(f"  if {name} is _missing: {name} = _make_{name}()")
                    elif name in defaults:
                        namespace[f"_default_{name}"] = defaults[name]
                        params.append(f"{name}=_default_{name}")
                    else:
                        params.append(name)
                    lines.append(f"  _setattr(self, {name!r}, {name})" if frozen else f"  self.{name} = {name}")
                source = f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(lines) or "  pass") + "\n"
                exec(source, namespace)  # noqa: S102 - the source is built from the class's own field names
                init = namespace["__init__"]
                init.__qualname__ = f"{cls.__qualname__}.__init__"
                cls.__init__ = init
                return init

            def __init__(self, *args, **kwargs):  # generic for the first instances (see the module doc)
                made[0] += 1
                given = len(args)
                if (
                    made[0] > GENERIC_INSTANCES or given > len(fields)
                    or (kwargs and (not known.issuperset(kwargs) or any(n in kwargs for n in fields[:given])))
                    or any(n in required and n not in kwargs for n in fields[given:])
                ):
                    compiled()(self, *args, **kwargs)
                    return
                for name, value in zip(fields, args):
                    assign(self, name, value)
                for name in fields[given:]:
                    assign(self, name, kwargs[name] if name in kwargs else makers[name]() if name in makers else defaults[name])

            __init__.__qualname__ = f"{cls.__qualname__}.__init__"
            cls.__init__ = __init__

            def __repr__(self):
                return f"{type(self).__qualname__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in fields) + ")"

            def __eq__(self, other):
                if other.__class__ is not self.__class__:
                    return NotImplemented
                return tuple(getattr(self, n) for n in fields) == tuple(getattr(other, n) for n in fields)

            cls.__repr__ = __repr__
            cls.__eq__ = __eq__
            cls.__match_args__ = fields
            if frozen:
                cls.__setattr__ = _frozen_setattr
                cls.__delattr__ = _frozen_delattr
                cls.__hash__ = lambda self: hash(tuple(getattr(self, n) for n in fields))
            else:
                cls.__hash__ = None  # mutable and compared by value: unhashable, as a dataclass
            return cls

        return build if cls is None else build(cls)


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a frozen record (as `dataclasses.FrozenInstanceError`)."""


__all__ = ["FrozenInstanceError", "field", "record", "replace"]
