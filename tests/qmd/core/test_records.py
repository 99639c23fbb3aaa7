"""`@record` behaves as the `@dataclass` it stands for, in everything qmd uses."""

from __future__ import annotations

import dataclasses

import pytest

from qmd.core.records import FrozenInstanceError, field, record


def _pair(frozen: bool) -> tuple[type, type]:
    def body() -> dict[str, object]:
        return {"__annotations__": {"a": "int", "b": "str", "c": "list[int]", "d": "float | None"}, "b": "x", "c": field(default_factory=list), "d": None}

    ours = record(frozen=frozen)(type("Hit", (), body()))
    theirs_body = body() | {"c": dataclasses.field(default_factory=list)}
    theirs = dataclasses.dataclass(frozen=frozen)(type("Hit", (), theirs_body))
    return ours, theirs


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("frozen", [False, True])
def test_a_record_is_built_like_a_dataclass(frozen: bool, compiled: bool) -> None:
    from qmd.core.records import GENERIC_INSTANCES

    ours, theirs = _pair(frozen)
    if compiled:  # past the generic __init__ of the first instances
        for _ in range(GENERIC_INSTANCES + 1):
            ours(0)
    for args, kwargs in [((1,), {}), ((1, "y"), {}), ((1,), {"d": 2.5}), ((), {"a": 3, "c": [1]}), ((1, "y", [2], float("nan")), {})]:
        mine, reference = ours(*args, **kwargs), theirs(*args, **kwargs)
        assert repr(mine) == repr(reference)
        assert mine.__dict__ == reference.__dict__ or repr(mine.__dict__) == repr(reference.__dict__)
        assert list(mine.__dict__) == ["a", "b", "c", "d"]  # field order (status --json uses __dict__)
        assert (mine == ours(*args, **kwargs)) == (reference == theirs(*args, **kwargs))
    assert ours(1).c is not ours(1).c  # a fresh list each time
    assert ours(1) != ours(2) and ours(1) != theirs(1)
    assert ours.__match_args__ == theirs.__match_args__ == ("a", "b", "c", "d")
    with pytest.raises(TypeError):
        ours()
    with pytest.raises(TypeError):
        ours(1, "x", [], None, 5)
    with pytest.raises(TypeError):
        ours(1, e=2)
    assert ours.b == theirs.b == "x" and not hasattr(ours, "c") and not hasattr(theirs, "c")


def test_a_frozen_record_is_immutable_and_hashable() -> None:
    ours, theirs = _pair(True)
    hit = ours(1, c=())
    with pytest.raises(FrozenInstanceError):
        hit.a = 2
    with pytest.raises(AttributeError):
        del hit.a
    assert hash(hit) == hash(ours(1, c=())) and hash(theirs(1, c=())) == hash(theirs(1, c=()))
    assert {hit, ours(1, c=())} == {hit}


def test_a_mutable_record_is_unhashable_and_settable() -> None:
    ours, theirs = _pair(False)
    hit = ours(1)
    hit.a = 5
    assert hit.a == 5
    with pytest.raises(TypeError):
        hash(hit)
    with pytest.raises(TypeError):
        hash(theirs(1))


def test_methods_and_properties_stay() -> None:
    @record
    class Point:
        x: int
        y: int = 0

        @property
        def norm(self) -> int:
            return abs(self.x) + abs(self.y)

    assert Point(3, -4).norm == 7 and Point(1) == Point(1, 0) and repr(Point(1)) == "test_methods_and_properties_stay.<locals>.Point(x=1, y=0)"


@pytest.mark.parametrize("frozen", [False, True])
def test_replace_copies_with_changes_as_dataclasses_replace_does(frozen: bool) -> None:
    from qmd.core.records import replace

    ours, theirs = _pair(frozen)
    mine, reference = ours(1, "y", [2]), theirs(1, "y", [2])
    assert repr(replace(mine, d=0.5, a=7)) == repr(dataclasses.replace(reference, d=0.5, a=7))
    assert repr(mine) == repr(reference)  # the original is unchanged
    assert replace(mine).c is mine.c  # a shallow copy, as dataclasses.replace
    with pytest.raises(TypeError, match="no field 'e'"):
        replace(mine, e=1)


def test_init_is_compiled_only_past_the_first_instances(monkeypatch: pytest.MonkeyPatch) -> None:
    """A record's first instances cost no compiling (issue 31: a first MCP call imports 55
    records and makes about 20, a few instances each: compiling their __init__ took 3 ms of
    it); a record made often is compiled once; a call the generic __init__ does not take
    compiles at once, so its error is Python's own."""
    import builtins

    import qmd.core.records as records
    from qmd.core.records import GENERIC_INSTANCES

    compiled: list[str] = []

    def counting_exec(source: str, namespace: dict[str, object]) -> None:
        compiled.append(source)
        builtins.exec(source, namespace)

    monkeypatch.setattr(records, "exec", counting_exec, raising=False)

    @record
    class Used:
        a: int
        b: list[int] = field(default_factory=list)

    @record(frozen=True)
    class Unused:
        x: str

    assert compiled == []
    first, second = Used(1), Used(a=2, b=[3])
    assert compiled == [] and (first.a, first.b, second.b) == (1, [], [3]) and first.b is not Used(3).b
    assert Used.__init__.__qualname__.endswith("Used.__init__")
    made = [Used(i) for i in range(GENERIC_INSTANCES)]
    assert len(compiled) == 1 and [m.a for m in made] == list(range(GENERIC_INSTANCES))
    assert Used(7, [1]) == Used(7, b=[1]) and len(compiled) == 1
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        Unused()
    assert len(compiled) == 2
    with pytest.raises(TypeError, match="multiple values"):
        Used(1, a=2)
