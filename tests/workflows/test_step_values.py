"""A step's result is kept as a replay will see it: ``as_json`` gives back what a JSON round trip
of the value gives (tuples as lists, an int enum as its int), and refuses what JSON cannot hold
(NaN, infinities, sets, objects) and text with a NUL character, which jsonb cannot store, before
anything is written. Its shortcut for values a round trip leaves alone must not let through
anything else. Pure logic: no database."""

import json
import math
from enum import IntEnum
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from workflows.runtime import as_json
from workflows.store import JSON_ENCODER


class Level(IntEnum):
    LOW = 1


class Text(str):
    pass


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and the infinities included
    st.text(),
    st.sampled_from([Level.LOW, Text("a str subclass")]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=5), inner, max_size=4),
    ),
    max_leaves=12,
)


def holds_nul(value: Any) -> bool:
    """A NUL character in any text of ``value``, its objects' keys included."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(map(holds_nul, value))
    if isinstance(value, dict):
        return any(holds_nul(key) or holds_nul(item) for key, item in value.items())
    return False


def same(left: Any, right: Any) -> bool:
    """Equal, with the same types all the way down (True is not 1, an enum is not its int)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(same(left[k], right[k]) for k in left)
    return bool(left == right)


@settings(max_examples=400, derandomize=True, database=None, deadline=None)
@given(values)
@example(Level.LOW)
@example(Text("kept as a plain str"))
@example(True)
@example(math.nan)
@example((1, "two"))
@example("a\x00b")
@example(["ok", {"k": "\x00"}])
@example({"\x00": 1})
@example(["\\u0000 is a backslash, then text", {"\\\\\\u0000": "\\\\"}])
def test_a_step_value_is_what_a_json_round_trip_gives_or_refused(value: Any) -> None:
    """kills: step-value-shortcut-takes-floats, step-value-shortcut-keeps-subclasses,
    step-value-shortcut-takes-nul, step-value-nested-nul-ignored"""
    try:
        expected = json.loads(JSON_ENCODER.encode(value))
    except ValueError:
        with pytest.raises(ValueError):
            as_json(value)
        return
    if holds_nul(expected):
        with pytest.raises(ValueError, match="NUL character"):
            as_json(value)
        return
    assert same(as_json(value), expected), (value, as_json(value), expected)
