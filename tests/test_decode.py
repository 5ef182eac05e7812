"""storage.decode.loads is json.loads: the same values for what this library writes and for
anything a foreign writer may have stored, and the same errors for what is not JSON."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_sessions.storage.decode import loads

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(JSON, st.sampled_from([None, (",", ":"), (", ", ": ")]), st.booleans(), st.sampled_from(["", " ", "\n\t"]))
def test_equals_json_loads(value, separators, ensure_ascii, padding):
    text = padding + json.dumps(value, separators=separators, ensure_ascii=ensure_ascii) + padding
    assert loads(text) == json.loads(text)
    assert type(loads(text)) is type(json.loads(text))


@pytest.mark.parametrize(
    "text",
    [
        '"\\ud800"',  # a lone surrogate escape
        "[" + "1" * 40 + "]",  # an integer past 64 bits stays an int
        "NaN",
        "[Infinity, -Infinity]",
        '{"a": 1, "a": 2}',  # the last duplicate wins
        "1e400",
        b'{"from": "bytes"}',
        '{"indented":\n  [1,\n   2]\n}',
    ],
)
def test_what_foreign_writers_may_store_decodes_as_json_loads_does(text):
    got, expected = loads(text), json.loads(text)
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == expected
        assert repr(got) == repr(expected)


@pytest.mark.parametrize("text", ["", "   ", '{"a": 1} trailing', "\ufeff{}", '{"a": }', "[1, 2", "{'single': 1}"])
def test_what_is_not_json_raises_as_json_loads_does(text):
    with pytest.raises(json.JSONDecodeError) as ours:
        loads(text)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert str(ours.value) == str(theirs.value)
