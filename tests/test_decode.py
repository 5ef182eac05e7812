"""storage.decode.loads and loads_many are json.loads: the same values for what this library
writes and for anything a foreign writer may have stored (orjson's big integers included), and
the same errors for what is not JSON."""

from __future__ import annotations

import gc
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_sessions.storage import decode
from agent_sessions.storage.decode import loads, loads_many

pytestmark = pytest.mark.no_database  # runs once, in the SQLite run (tests/conftest.py)

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


# ── batches: loads_many ────────────────────────────────────────────────

NUMBER_TEXTS = st.one_of(
    st.integers().map(str),
    st.from_regex(r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
)


def _same(got, expected) -> None:
    assert repr(got) == repr(expected)  # floats vs ints, -0.0, big integers: repr tells them apart


@settings(max_examples=300, deadline=None)
@given(st.lists(JSON, max_size=12), st.sampled_from([(",", ":"), (", ", ": ")]), st.booleans())
def test_a_batch_decodes_as_json_loads_does_row_by_row(values, separators, ensure_ascii):
    texts = [json.dumps(v, separators=separators, ensure_ascii=ensure_ascii) for v in values]
    _same(loads_many(texts), [json.loads(t) for t in texts])
    _same(loads_many(texts * 30), [json.loads(t) for t in texts * 30])  # a large batch


@settings(max_examples=500, deadline=None)
@given(st.lists(NUMBER_TEXTS, min_size=1, max_size=6))
def test_numbers_decode_to_the_same_int_or_float(numbers):
    """orjson turns an integer past 64 bits into a float; such texts must go to json."""
    texts = ['{"n":' + n + "}" for n in numbers] + ["[" + ",".join(numbers) + "]"]
    _same(loads_many(texts), [json.loads(t) for t in texts])
    for text in texts:
        _same(loads(text), json.loads(text))


@pytest.mark.parametrize(
    "number",
    [
        "18446744073709551615",  # the largest orjson holds as an int
        "18446744073709551616",  # one past: orjson alone gives 1.8446744073709552e+19
        "-9223372036854775809",
        "9" * 19,
        "1" * 40,
        "0.1000000000000000055511151231257827",
        "1e400",
        "-0",
        "-0.0",
    ],
)
def test_long_numbers_among_short_rows_stay_what_json_makes_them(number):
    big = '{"id":"big","n":' + number + "}"
    # The batch is looked at in chunks (decode.GUARD_CHUNK): the long row first, last, and at a chunk's edges.
    for position in (0, decode.GUARD_CHUNK - 1, decode.GUARD_CHUNK, 2 * decode.GUARD_CHUNK + 1):
        texts = [f'{{"id":"m{i}","n":1}}' for i in range(2 * decode.GUARD_CHUNK + 1)]
        texts.insert(position, big)
        _same(loads_many(texts), [json.loads(t) for t in texts])
    _same(loads(big), json.loads(big))


@pytest.mark.parametrize("bad", ['{"a": }', "NaN", '"\\ud800"', "\ufeff{}", None, b'{"b": 1}', '"\ud800"'])
def test_a_batch_with_a_row_orjson_refuses_returns_or_raises_as_json_loads(bad):
    texts = [f'{{"id":"m{i}"}}' for i in range(300)] + [bad]
    try:
        expected: object = [json.loads(t) for t in texts]
    except (TypeError, ValueError) as error:
        expected = error
    if isinstance(expected, Exception):
        with pytest.raises(type(expected)) as ours:
            loads_many(texts)
        assert str(ours.value) == str(expected)
    else:
        assert repr(loads_many(texts)) == repr(expected)  # NaN included: repr(nan) == 'nan'


def test_without_orjson_the_scanner_decodes(monkeypatch):
    monkeypatch.setattr(decode, "_orjson_loads", None)
    texts = [f'{{"id":"m{i}","n":{10**25 + i}}}' for i in range(300)]
    _same(loads_many(texts), [json.loads(t) for t in texts])
    _same(loads(texts[0]), json.loads(texts[0]))


def test_a_batch_leaves_the_host_s_collector_alone():
    """A library must not switch the process's garbage collector, even briefly (workers and servers share it)."""
    texts = [f'{{"id":"m{i}","parts":[{{"type":"text","text":"hi"}}]}}' for i in range(2000)]
    seen = []
    real = decode._loads_many
    try:
        decode._loads_many = lambda batch: seen.append(gc.isenabled()) or real(batch)  # type: ignore[assignment]
        assert len(loads_many(texts)) == 2000
        assert len(decode.messages(texts)) == 2000
        assert seen == [True, True]
        gc.disable()
        loads_many(texts)
        assert seen == [True, True, False]
    finally:
        decode._loads_many = real
        gc.enable()
