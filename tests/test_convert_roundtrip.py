"""UIMessage → target → UIMessage is the identity for everything the target can express,
and every target output validates against the SDK's own request types."""

from __future__ import annotations

import pytest
from anthropic.types import MessageParam
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam
from pydantic import TypeAdapter

from agent_sessions import convert
from tests.support.convert_strategies import conversation, json_values

pytestmark = pytest.mark.no_database  # runs once, in the SQLite run (tests/conftest.py)

CHAT = TypeAdapter(list[ChatCompletionMessageParam])
RESPONSES = TypeAdapter(list[ResponseInputItemParam])
ANTHROPIC = TypeAdapter(list[MessageParam])

ROUND_TRIPS = {
    "chat": (convert.to_openai_chat, convert.from_openai_chat_messages),
    "responses": (convert.to_openai_responses, convert.from_openai_responses),
    "anthropic": (convert.to_anthropic, convert.from_anthropic_messages),
}
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def materialize(value):
    """Validated SDK params with their lazy ``Iterable`` fields consumed (which runs their validation)."""
    if isinstance(value, dict):
        return {k: materialize(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or hasattr(value, "__next__"):
        return [materialize(v) for v in value]
    return value


def validate(target: str, output) -> None:
    """The output is accepted by the SDK's request type, and no key of ours is unknown to it."""
    if target == "anthropic":
        assert set(output) <= {"system", "messages"}
        assert isinstance(output.get("system", ""), str)
        assert materialize(ANTHROPIC.validate_python(output["messages"])) == output["messages"]
    else:
        adapter = CHAT if target == "chat" else RESPONSES
        assert materialize(adapter.validate_python(output)) == output


def without_ids(messages: list[dict]) -> list[dict]:
    return [{k: v for k, v in m.items() if k != "id"} for m in messages]


@pytest.mark.parametrize("target", sorted(ROUND_TRIPS))
def test_round_trip_is_identity_for_expressible_conversations(target):
    to_target, back = ROUND_TRIPS[target]

    @PROPERTY
    @given(conversation(target))
    def check(history):
        output = to_target(history)
        validate(target, output)
        assert without_ids(back(output)) == without_ids(history)

    check()


@pytest.mark.parametrize("target", sorted(ROUND_TRIPS))
def test_round_trip_accepts_sdk_objects(target):
    """The SDKs' pydantic objects convert like the dicts they dump to."""
    history = [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "weather?"}]},
        {
            "id": "a",
            "role": "assistant",
            "parts": [
                {"type": "text", "text": "checking"},
                {
                    "type": "tool-weather",
                    "toolCallId": "c1",
                    "state": "output-available",
                    "input": {"city": "Kyoto"},
                    "output": "sunny",
                },
                {"type": "step-start"},
                {"type": "text", "text": "Sunny."},
            ],
        },
    ]
    to_target, back = ROUND_TRIPS[target]
    output = to_target(history)
    if target == "chat":
        from openai.types.chat import ChatCompletionMessage

        objects = [
            output[0],
            ChatCompletionMessage.model_validate(output[1]),
            output[2],
            ChatCompletionMessage.model_validate(output[3]),
        ]
    elif target == "responses":
        from openai.types.responses import ResponseFunctionToolCall

        objects = [*output[:2], ResponseFunctionToolCall.model_validate(output[2]), *output[3:]]
    else:
        from anthropic.types import Message

        def response(turn):
            return Message.model_validate(
                {
                    "id": "msg",
                    "type": "message",
                    "model": "m",
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                    **turn,
                }
            )

        objects = {
            "messages": [
                output["messages"][0],
                response(output["messages"][1]),
                output["messages"][2],
                response(output["messages"][3]),
            ]
        }
    assert without_ids(back(objects)) == without_ids(history)


def test_to_openai_chat_puts_the_system_prompt_first():
    out = convert.to_openai_chat(
        [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}], system="Be brief."
    )
    assert out == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]


@given(json_values | st.lists(st.floats(allow_nan=False, allow_infinity=False)))
@settings(max_examples=200, deadline=None)
def test_the_fast_json_encoder_writes_what_json_dumps_writes(value):
    import json

    from agent_sessions.convert._parts import dumps

    assert dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


tiny_and_huge_floats = (
    st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(min_value=-1e-3, max_value=1e-3)
    | st.floats(min_value=1e14, max_value=1e23)
)


@given(
    st.recursive(
        st.none() | st.integers() | tiny_and_huge_floats | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=10,
    )
)
@settings(max_examples=300, deadline=None)
def test_the_encoder_matches_json_dumps_on_floats_nulls_and_big_integers(value):
    """orjson (when installed) writes some floats and NaN differently; those fall back to json's text."""
    import json

    from agent_sessions.convert._parts import dumps

    assert dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1, 2}])
def test_values_json_cannot_hold_are_refused_as_json_refuses_them(bad):
    from agent_sessions.convert._parts import dumps, input_json

    with pytest.raises((TypeError, ValueError)):
        dumps({"x": [bad]})
    assert input_json({"input": {"x": bad}}) == "{}"
