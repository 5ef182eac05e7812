"""types.dump_message (the stored JSON) and types.compact_json are json.dumps with the stored settings:
the same text for anything JSON holds, the same errors for what it cannot, with one encoder built once."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_sessions import InvalidMessage
from agent_sessions.types import compact_json, dump_message, validate_message

pytestmark = pytest.mark.no_database  # runs once, in the SQLite run (tests/conftest.py)


def reference(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        | st.dictionaries(st.integers(), inner, max_size=2)
    ),  # int keys: json writes them as strings
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_the_text_is_json_dumps_text(value):
    assert compact_json(value) == reference(value)
    message = {"id": "m", "role": "user", "parts": [{"type": "data", "data": value}]}
    assert dump_message(message) == reference(message)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1, 2}, b"bytes", object()])
def test_what_json_cannot_hold_raises_the_same_error(bad):
    with pytest.raises((TypeError, ValueError)) as ours:
        compact_json({"x": [bad]})
    with pytest.raises((TypeError, ValueError)) as theirs:
        reference({"x": [bad]})
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)


def test_an_error_leaves_the_encoder_usable():
    with pytest.raises(TypeError):
        compact_json({"a": [1, {"b": object()}]})
    assert compact_json({"a": [1, {"b": 2}]}) == '{"a":[1,{"b":2}]}'


def test_a_cyclic_message_is_refused_and_the_next_one_stored_as_usual():
    message = {"id": "m", "role": "user", "parts": []}
    message["parts"].append(message)
    with pytest.raises(InvalidMessage, match="nests deeper"):
        validate_message(message)
    with pytest.raises(ValueError, match="nests too deeply"):
        compact_json(message)
    assert validate_message({"id": "n", "role": "user", "parts": []}) == '{"id":"n","role":"user","parts":[]}'
