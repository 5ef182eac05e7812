"""The fast path of each ``to_*`` converter gives exactly what its checked path gives.

The checked handlers are the reference; the fast ones assume the shapes a stored UIMessage has
and hand any other message back to them. Outputs are compared by ``repr`` (key order, types,
``1`` vs ``1.0`` vs ``True``), and an error must be the checked path's error.
"""

from __future__ import annotations

import math
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_sessions.convert import _parts as parts
from agent_sessions.convert import anthropic, openai_chat, openai_responses
from agent_sessions.session import Session
from bench.convert import history_with_tools

TARGETS = {
    "chat": (openai_chat.to_openai_chat, openai_chat._checked, openai_chat),
    "responses": (openai_responses.to_openai_responses, openai_responses._checked, openai_responses),
    "anthropic": (anthropic.to_anthropic, anthropic._checked, anthropic),
}
PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Str(str):
    """A ``str`` subclass: the checked path treats it as not a string in some places."""


class Dict(dict):
    """A ``dict`` subclass: the checked path skips such parts."""


def outcome(convert, history, system):
    try:
        return "ok", repr(convert(history, system=system))
    except Exception as error:  # the same error, or none, on both paths
        return "error", type(error).__name__


# Values of every kind a malformed message might hold, including what JSON cannot encode or what
# orjson writes differently from json (NaN, 1e-07, integers beyond 64 bits, non-string keys, sets).
odd_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e-7, 0.00001, 1.5, -0.0, math.inf]),
    st.text(max_size=8),
    st.sampled_from(["", "text", "tool-", "tool-x", "output-available", "input-available", "output-error"]),
    st.builds(Str, st.sampled_from(["text", "tool-x", "output-available", "call_1"])),
)
odd_values = st.recursive(
    odd_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(max_size=5), inner, max_size=3),
        st.dictionaries(st.integers(0, 3), inner, max_size=2),
        st.frozensets(st.integers(0, 3), max_size=2),
        st.builds(Dict, st.dictionaries(st.text(max_size=5), inner, max_size=2)),
        st.tuples(inner),
    ),
    max_leaves=6,
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(-1e6, 1e6)
    | st.sampled_from([1e-7, 0.00001, 2.5e-5, math.nan, -math.inf, 2**64])
    | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
# JSON whose orjson text is json.dumps's (no null, no small floats): the fast path keeps such messages.
words = st.text('abc xyz_É"\\\n', max_size=8)
plain_json = st.recursive(
    st.booleans() | st.integers(-(10**12), 10**12) | words,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
    max_leaves=8,
)
STATES = ["input-streaming", "input-available", "output-available", "output-error", "approval-requested"]


@st.composite
def good_part(draw, values=json_values) -> dict:
    """A part as the store keeps it: every type the converters know, well-formed (JSON from ``values``)."""
    kind = draw(st.sampled_from(["text", "step-start", "reasoning", "tool", "dynamic", "file", "other"]))
    if kind == "text":
        return {"type": "text", "text": draw(st.text(max_size=10))}
    if kind == "step-start":
        return {"type": "step-start"}
    if kind == "reasoning":
        meta = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "anthropic": st.fixed_dictionaries(
                        {}, optional={"signature": st.text(max_size=6), "redactedData": st.text(max_size=6)}
                    ),
                    "openai": st.fixed_dictionaries(
                        {},
                        optional={
                            "itemId": st.sampled_from(["rs_1", "rs_2", ""]),
                            "reasoningEncryptedContent": st.text(max_size=6),
                        },
                    ),
                },
            )
        )
        part = {"type": "reasoning", "text": draw(st.text(max_size=10))}
        if meta or draw(st.booleans()):
            part["providerMetadata"] = meta
        return part
    if kind in ("tool", "dynamic"):
        state = draw(st.sampled_from(STATES))
        part = {"type": "tool-weather", "toolCallId": draw(st.sampled_from(["call_1", "call_2"])), "state": state}
        if kind == "dynamic":
            part.update(type="dynamic-tool", toolName=draw(st.sampled_from(["lookup", "", None, 7])))
        if draw(st.booleans()):
            keys = words if values is plain_json else st.text(max_size=5)
            part["input"] = draw(st.dictionaries(keys, values, max_size=3))
        if state == "output-available":
            part["output"] = draw(values)
        elif state == "output-error":
            part["errorText"] = draw(st.text(max_size=10))
        if draw(st.integers(0, 9)) == 0:
            part["providerExecuted"] = True
        return part
    if kind == "file":
        media = draw(st.sampled_from(["image/png", "application/pdf", "text/plain", "audio/wav"]))
        url = draw(st.sampled_from([f"data:{media};base64,aGk=", "https://example.com/a.png", ""]))
        return {"type": "file", "mediaType": media, "url": url, "filename": "a.pdf"}
    return {"type": draw(st.sampled_from(["source-url", "data-weather", "tool-call"])), "id": "x"}


@st.composite
def part(draw):
    """A good part, one with keys dropped or given odd values, an unknown part, or not a dict at all."""
    mode = draw(st.integers(0, 9))
    if mode == 0:
        return draw(odd_values)
    value = draw(good_part())
    if mode <= 3:
        for key in draw(st.lists(st.sampled_from(sorted(value)), max_size=2)):
            if draw(st.booleans()):
                value.pop(key, None)
            else:
                value[key] = draw(odd_values)
    if mode == 4:
        value = Dict(value)
    return value


@st.composite
def message(draw):
    """A message, usually well-formed; sometimes with an odd role, odd parts, or not a message."""
    mode = draw(st.integers(0, 19))
    if mode == 0:
        return draw(odd_values)
    role = draw(st.sampled_from(["user", "assistant", "assistant", "system", "tool"]))
    if mode == 1:
        role = draw(odd_scalars)
    parts = draw(st.lists(part(), max_size=6))
    if mode == 2:
        parts = draw(odd_values)
    found = {"id": "m", "role": role, "parts": parts}
    if mode == 3:
        found = Dict(found)
    return found


conversations = st.lists(message(), max_size=6)
systems = st.none() | st.text(max_size=6)


@pytest.mark.no_database
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fast_path_equals_checked_path(target):
    fast, checked, _module = TARGETS[target]

    @PROPERTY
    @given(conversations, systems)
    def check(history, system):
        assert outcome(fast, history, system) == outcome(checked, history, system)

    check()


@pytest.mark.no_database
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_well_formed_conversations_stay_on_the_fast_path(target, monkeypatch):
    """Stored shapes with plain JSON: equal output, and no assistant message falls back to the checked
    handler (user and system messages other than one text part are the checked handlers' by design)."""
    fast, checked, module = TARGETS[target]
    roles = st.sampled_from(["user", "assistant", "assistant", "system"])
    well_formed = st.lists(
        st.builds(
            lambda role, parts: {"id": "m", "role": role, "parts": parts},
            roles,
            st.lists(good_part(plain_json), max_size=8),
        ),
        max_size=6,
    )
    calls = counting(module, monkeypatch)

    @PROPERTY
    @given(well_formed, systems)
    def check(history, system):
        calls.clear()
        expected = outcome(checked, history, system)
        calls.clear()
        assert outcome(fast, history, system) == expected
        assert "assistant" not in calls

    check()


def counting(module, monkeypatch) -> list[str]:
    """Record each message the checked handlers convert through the fast walk."""
    calls: list[str] = []
    handlers = dict(module._HANDLERS)
    for role, handler in handlers.items():

        def wrapped(parts, sink, role=role, handler=handler):
            calls.append(role)
            handler(parts, sink)

        monkeypatch.setitem(module._HANDLERS, role, wrapped)
    return calls


@pytest.mark.no_database
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_bench_history_takes_the_fast_path_throughout(target, monkeypatch):
    """Text, reasoning, tool calls with object outputs and steps: no message falls back."""
    fast, checked, module = TARGETS[target]
    history = history_with_tools(40)
    expected = repr(checked(history, system="be brief"))
    calls = counting(module, monkeypatch)
    assert repr(fast(history, system="be brief")) == expected
    assert calls == []


@pytest.mark.no_database
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_message_failing_half_way_is_undone_and_converted_again(target, monkeypatch):
    """The fast handler has already added the first tool's items when a handler gives up on the
    message (forced here); they are removed and the checked handler converts the message."""
    fast, checked, module = TARGETS[target]
    tool = {"type": "tool-calc", "toolCallId": "c1", "state": "output-available", "input": {"x": 1}, "output": 2}
    history = [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "sum?"}]},
        {
            "id": "a",
            "role": "assistant",
            "parts": [
                {"type": "text", "text": "computing"},
                tool,
                {"type": "step-start"},
                {**tool, "toolCallId": "c2", "output": {1, 2}},
                {"type": "step-start"},
                {"type": "text", "text": "done"},
            ],
        },
        {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "thanks"}]},
    ]
    expected = repr(checked(history))
    calls = counting(module, monkeypatch)
    real = parts.fast_result_text

    def surprise(part, state):
        if part["toolCallId"] == "c2":
            raise RuntimeError("a shape the fast handler did not expect")
        return real(part, state)

    monkeypatch.setattr(parts, "fast_result_text", surprise)
    assert repr(fast(history)) == expected
    assert calls == ["assistant"]
    assert "{1, 2}" in expected  # the checked path's str() of a value JSON cannot hold


@pytest.mark.no_database
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_values_json_writes_differently_keep_jsons_text(target, monkeypatch):
    """orjson writes 1e-07, NaN and None otherwise than json.dumps (or at all): the fast path takes
    json's text for them, as the checked path does, without giving the message up."""
    fast, checked, module = TARGETS[target]
    history = [
        {
            "id": "a",
            "role": "assistant",
            "parts": [
                {"type": "tool-f", "toolCallId": "c", "state": "output-available", "input": {}, "output": [1e-7]},
                {"type": "tool-f", "toolCallId": "d", "state": "output-available", "input": {"x": math.nan}},
                {"type": "tool-f", "toolCallId": "e", "state": "output-available", "input": {"y": None}, "output": {1}},
            ],
        },
    ]
    expected = repr(checked(history))
    calls = counting(module, monkeypatch)
    assert repr(fast(history)) == expected
    assert calls == []
    assert "[1e-07]" in expected
    if target != "anthropic":  # Anthropic sends the input object itself
        assert '{"y":null}' in expected


@pytest.mark.django_db
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_stored_history_converts_on_the_fast_path(target, monkeypatch):
    """What ``get_history()`` returns from this database is what the fast path takes, unchanged."""
    fast, checked, module = TARGETS[target]
    session = Session.create().for_session(f"fast-{uuid.uuid4().hex[:8]}")
    for stored in history_with_tools(12):
        assert session.append_message(stored)
    history = session.get_history()
    assert [m["id"] for m in history] == [f"m{i}" for i in range(12)]
    expected = repr(checked(history))
    calls = counting(module, monkeypatch)
    assert repr(fast(history)) == expected
    assert calls == []
