"""What each target cannot express is dropped as its module docstring says: deterministically, never a crash."""

from __future__ import annotations

import pytest

from agent_sessions import InvalidMessage, convert

pytestmark = pytest.mark.no_database  # runs once, in the SQLite run (tests/conftest.py)


def user(text="hi", *extra, id="u"):
    return {"id": id, "role": "user", "parts": [{"type": "text", "text": text}, *extra]}


def assistant(*parts, id="a"):
    return {"id": id, "role": "assistant", "parts": list(parts)}


def call(state="input-available", name="weather", call_id="c1", **extra):
    return {"type": f"tool-{name}", "toolCallId": call_id, "state": state, "input": {"city": "Kyoto"}, **extra}


TEXT = {"type": "text", "text": "Sunny."}
REASONING_ANY = {"type": "reasoning", "text": "let me think"}
PNG_URL = {"type": "file", "mediaType": "image/png", "url": "https://x.test/a.png"}
PDF_URL = {"type": "file", "mediaType": "application/pdf", "url": "https://x.test/a.pdf", "filename": "a.pdf"}
WAV = {"type": "file", "mediaType": "audio/wav", "url": "data:audio/wav;base64,UklGRg=="}
UI_ONLY = [
    {"type": "source-url", "sourceId": "s1", "url": "https://x.test"},
    {"type": "data-weather", "data": {"temp": 20}},
    {"type": "step-start"},
]
UNSENDABLE = [
    call("input-available", call_id="c1"),  # no result: never sent (incomplete_tool_calls="drop")
    call("input-streaming", call_id="c2"),
    call("approval-requested", call_id="c3", approval={"id": "ap"}),
    call("output-available", call_id="c5", output="done", providerExecuted=True),
]
TO = {"chat": convert.to_openai_chat, "responses": convert.to_openai_responses, "anthropic": convert.to_anthropic}
BACK = {
    "chat": convert.from_openai_chat_messages,
    "responses": convert.from_openai_responses,
    "anthropic": convert.from_anthropic_messages,
}


def round_trip(target, history):
    return [{k: v for k, v in m.items() if k != "id"} for m in BACK[target](TO[target](history))]


# ── drops every target shares ───────────────────────────────────────────────


@pytest.mark.parametrize("target", sorted(TO))
def test_ui_only_parts_metadata_and_unsendable_tool_states_are_dropped(target):
    history = [
        {**user(), "metadata": {"k": 1}, "createdAt": "2026-01-01T00:00:00Z"},
        assistant({"type": "step-start"}, *UI_ONLY, *UNSENDABLE, {**TEXT, "state": "done"}),
    ]
    assert round_trip(target, history) == [
        {"role": "user", "parts": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "parts": [{"type": "text", "text": "Sunny."}]},
    ]


@pytest.mark.parametrize("target", sorted(TO))
def test_dynamic_tools_come_back_static_with_their_name(target):
    dynamic = {
        "type": "dynamic-tool",
        "toolName": "lookup",
        "toolCallId": "d1",
        "state": "output-available",
        "input": {"q": "x"},
        "output": "found",
    }
    back = round_trip(target, [user(), assistant(dynamic)])
    assert back[1]["parts"] == [
        {"type": "tool-lookup", "toolCallId": "d1", "state": "output-available", "input": {"q": "x"}, "output": "found"}
    ]


@pytest.mark.parametrize("target", sorted(TO))
def test_non_string_outputs_come_back_as_their_json_text(target):
    back = round_trip(target, [user(), assistant(call("output-available", output={"temp": 21, "sky": "clear"}))])
    assert back[1]["parts"][0]["output"] == '{"temp":21,"sky":"clear"}'


@pytest.mark.parametrize("target", sorted(TO))
def test_files_in_assistant_messages_and_unknown_roles_are_dropped(target):
    history = [user(), assistant(PNG_URL, TEXT), {"id": "t", "role": "tool", "parts": [TEXT]}]
    assert round_trip(target, history)[1:] == [{"role": "assistant", "parts": [TEXT]}]


@pytest.mark.parametrize("target", sorted(TO))
def test_the_compaction_overlay_is_an_assistant_text_message(target):
    overlay = {"id": "compaction_7", "role": "assistant", "parts": [{"type": "text", "text": "Summary: Ada, Kyoto."}]}
    assert round_trip(target, [overlay, user()]) == [
        {"role": "assistant", "parts": [{"type": "text", "text": "Summary: Ada, Kyoto."}]},
        {"role": "user", "parts": [{"type": "text", "text": "hi"}]},
    ]


@pytest.mark.parametrize("target", sorted(TO))
@pytest.mark.parametrize(
    "garbage",
    [
        None,
        [None, 3, "x"],
        [{"id": "a", "role": "assistant", "parts": "not a list"}],
        [
            {
                "id": "a",
                "role": "assistant",
                "parts": [
                    None,
                    1,
                    {"type": None},
                    {"type": "tool-x"},
                    {"type": "file", "url": None},
                    {"type": "reasoning"},
                ],
            }
        ],
        [{"id": "u", "role": "user", "parts": [{"type": "file", "mediaType": "image/png"}, {"type": "text"}]}],
    ],
)
def test_malformed_stored_messages_never_crash(target, garbage):
    out = TO[target](garbage)
    assert out in ([], {"messages": []})


@pytest.mark.parametrize("target", sorted(TO))
def test_adjacent_assistant_messages_come_back_as_steps_of_one(target):
    history = [user(), assistant(call("output-available", output="x"), id="a1"), assistant(TEXT, id="a2")]
    back = round_trip(target, history)
    assert len(back) == 2
    assert back[1]["parts"][-2:] == [{"type": "step-start"}, TEXT]


# ── OpenAI Chat Completions ─────────────────────────────────────────────────


def test_chat_drops_reasoning_and_puts_text_before_tool_calls():
    history = [user(), assistant(REASONING_ANY, call("output-available", output="sunny"), TEXT)]
    out = convert.to_openai_chat(history)
    assert out[1] == {
        "role": "assistant",
        "content": "Sunny.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Kyoto"}'}}
        ],
    }
    assert out[2] == {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
    assert round_trip("chat", history)[1]["parts"] == [TEXT, call("output-available", output="sunny")]


def test_chat_sends_errors_as_the_tool_content_and_reads_them_back_as_output():
    out = convert.to_openai_chat([user(), assistant(call("output-error", errorText="city unknown"))])
    assert out[-1] == {"role": "tool", "tool_call_id": "c1", "content": '{"error":"city unknown"}'}
    back = convert.from_openai_chat_messages(out)[1]["parts"][0]
    assert back["state"] == "output-available"
    assert back["output"] == '{"error":"city unknown"}'
    assert "errorText" not in back


def test_chat_keeps_images_and_inline_files_but_drops_hosted_non_images():
    pdf_data = {
        "type": "file",
        "mediaType": "application/pdf",
        "url": "data:application/pdf;base64,JVBE",
        "filename": "r.pdf",
    }
    out = convert.to_openai_chat([user("see", PNG_URL, PDF_URL, pdf_data, WAV)])
    assert out[0]["content"] == [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "r.pdf"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
    ]


def test_chat_image_filenames_are_dropped_and_unknown_image_types_read_back_as_a_range():
    named = {**PNG_URL, "filename": "a.png"}
    assert round_trip("chat", [user("x", named)])[0]["parts"][1] == PNG_URL
    back = convert.from_openai_chat(
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x.test/image"}}]}
    )
    assert back["parts"] == [{"type": "file", "mediaType": "image/*", "url": "https://x.test/image"}]


def test_from_openai_chat_reads_a_completion_object_with_tool_calls_and_a_refusal():
    from openai.types.chat import ChatCompletion

    completion = ChatCompletion.model_validate(
        {
            "id": "cc",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "refusal": "I won't.",
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": '{"x": 2}'}},
                            {"id": "c2", "type": "function", "function": {"name": "calc", "arguments": "{not json"}},
                        ],
                    },
                }
            ],
        }
    )
    assert convert.from_openai_chat(completion, id="a9") == {
        "id": "a9",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "I won't."},
            {"type": "tool-calc", "toolCallId": "c1", "state": "input-available", "input": {"x": 2}},
            {"type": "tool-calc", "toolCallId": "c2", "state": "input-available", "input": "{not json"},
        ],
    }


@pytest.mark.parametrize(
    "bad", [None, "text", 3, {"role": "tool", "content": "x", "tool_call_id": "c"}, {"choices": []}]
)
def test_from_openai_chat_rejects_what_is_not_a_message(bad):
    with pytest.raises(InvalidMessage):
        convert.from_openai_chat(bad)


def test_orphan_tool_messages_are_dropped():
    out = convert.from_openai_chat_messages(
        [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "nobody", "content": "x"},
            {"role": "assistant", "content": "ok"},
            {"role": "tool", "tool_call_id": "nobody", "content": "x"},
        ],
        id="m",
    )
    assert out == [
        {"id": "m", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
        {"id": "m-1", "role": "assistant", "parts": [{"type": "text", "text": "ok"}]},
    ]


# ── OpenAI Responses ────────────────────────────────────────────────────────


def test_responses_keeps_openai_reasoning_with_encrypted_content_and_drops_other_reasoning():
    openai_reasoning = [
        {
            "type": "reasoning",
            "text": "a",
            "providerMetadata": {"openai": {"itemId": "rs_1", "reasoningEncryptedContent": "ENC"}},
        },
        {
            "type": "reasoning",
            "text": "b",
            "providerMetadata": {"openai": {"itemId": "rs_1", "reasoningEncryptedContent": "ENC"}},
        },
    ]
    anthropic_reasoning = {"type": "reasoning", "text": "c", "providerMetadata": {"anthropic": {"signature": "S"}}}
    out = convert.to_openai_responses([user(), assistant(*openai_reasoning, anthropic_reasoning, REASONING_ANY, TEXT)])
    assert out[1:] == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "encrypted_content": "ENC",
            "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}],
        },
        {"role": "assistant", "content": "Sunny."},
    ]
    assert convert.from_openai_responses(out)[1]["parts"] == [*openai_reasoning, TEXT]


def test_responses_merges_steps_without_tool_results():
    history = [user(), assistant(TEXT, {"type": "step-start"}, call(), {"type": "step-start"}, TEXT)]
    assert round_trip("responses", history)[1]["parts"] == [TEXT, TEXT]


def test_responses_error_results_come_back_as_output():
    out = convert.to_openai_responses([user(), assistant(call("output-error", errorText="boom"))])
    assert out[-1] == {"type": "function_call_output", "call_id": "c1", "output": '{"error":"boom"}'}
    assert convert.from_openai_responses(out)[1]["parts"][0]["output"] == '{"error":"boom"}'


def test_from_openai_responses_reads_a_response_output_and_skips_other_item_types():
    from openai.types.responses import Response

    response = Response.model_validate(
        {
            "id": "resp",
            "object": "response",
            "created_at": 0,
            "model": "gpt",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {"type": "reasoning", "id": "rs_9", "summary": [], "encrypted_content": "E"},
                {
                    "type": "web_search_call",
                    "id": "ws",
                    "status": "completed",
                    "action": {"type": "search", "query": "q"},
                },
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Hello", "annotations": []}],
                },
                {"type": "function_call", "id": "fc_1", "call_id": "c7", "name": "calc", "arguments": '{"x":1}'},
            ],
        }
    )
    assert convert.from_openai_responses(response, id="r") == convert.from_openai_responses(response.output, id="r")
    assert convert.from_openai_responses(response.output, id="r") == [
        {
            "id": "r",
            "role": "assistant",
            "parts": [
                {
                    "type": "reasoning",
                    "text": "",
                    "providerMetadata": {"openai": {"itemId": "rs_9", "reasoningEncryptedContent": "E"}},
                },
                {"type": "text", "text": "Hello"},
                {"type": "tool-calc", "toolCallId": "c7", "state": "input-available", "input": {"x": 1}},
            ],
        }
    ]


def test_responses_sends_hosted_files_by_url():
    out = convert.to_openai_responses([user("see", PNG_URL, PDF_URL)])
    assert out[0]["content"][1:] == [
        {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "auto"},
        {"type": "input_file", "file_url": "https://x.test/a.pdf", "filename": "a.pdf"},
    ]


# ── Anthropic ───────────────────────────────────────────────────────────────


def test_anthropic_keeps_a_system_message_after_a_turn_in_place_and_merges_same_role_turns():
    history = [
        {"id": "s1", "role": "system", "parts": [{"type": "text", "text": "Be kind."}]},
        {"id": "s0", "role": "system", "parts": [{"type": "text", "text": "Be fair."}]},
        user("one", id="u1"),
        user("one more", id="u1b"),
        {"id": "s2", "role": "system", "parts": [{"type": "text", "text": "Be brief."}]},
        user("two", id="u2"),
    ]
    assert convert.to_anthropic(history) == {
        "system": "Be kind.\n\nBe fair.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "one more"}]},
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "text": "two"}]},
        ],
        "extra_headers": {"anthropic-beta": "mid-conversation-system-2026-04-07"},
    }


def test_anthropic_keeps_signed_and_redacted_thinking_and_drops_unsigned_reasoning():
    signed = {"type": "reasoning", "text": "hmm", "providerMetadata": {"anthropic": {"signature": "SIG"}}}
    redacted = {"type": "reasoning", "text": "", "providerMetadata": {"anthropic": {"redactedData": "RD"}}}
    out = convert.to_anthropic([user(), assistant(signed, redacted, REASONING_ANY, TEXT)])
    assert out["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "hmm", "signature": "SIG"},
        {"type": "redacted_thinking", "data": "RD"},
        {"type": "text", "text": "Sunny."},
    ]
    assert convert.from_anthropic_messages(out)[1]["parts"] == [signed, redacted, TEXT]


def test_anthropic_marks_errors_and_replaces_non_object_inputs():
    part = {**call("output-error", errorText="no such city"), "input": ["not", "an", "object"]}
    out = convert.to_anthropic([user(), assistant(part)])
    assert out["messages"][1:] == [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "weather", "input": {}}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "no such city", "is_error": True}],
        },
    ]


def test_anthropic_drops_empty_text_and_unsupported_media_types():
    bmp = {"type": "file", "mediaType": "image/bmp", "url": "data:image/bmp;base64,Qk0="}
    out = convert.to_anthropic([user("", bmp, WAV, PNG_URL, PDF_URL), assistant({"type": "text", "text": ""})])
    assert out == {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
                    {"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}, "title": "a.pdf"},
                ],
            }
        ]
    }


def test_anthropic_tool_results_and_the_next_user_message_share_one_turn():
    out = convert.to_anthropic([user(), assistant(call("output-available", output="sunny")), user("thanks", id="u2")])
    assert out["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "sunny"},
            {"type": "text", "text": "thanks"},
        ],
    }
    assert [m["role"] for m in convert.from_anthropic_messages(out)] == ["user", "assistant", "user"]


def test_from_anthropic_reads_a_response_message():
    from anthropic.types import Message

    message = Message.model_validate(
        {
            "id": "msg",
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 5},
            "content": [
                {"type": "thinking", "thinking": "plan", "signature": "SIG"},
                {"type": "text", "text": "Checking.", "citations": None},
                {"type": "tool_use", "id": "tu_1", "name": "weather", "input": {"city": "Kyoto"}},
            ],
        }
    )
    assert convert.from_anthropic(message, id="a1") == {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "text": "plan", "providerMetadata": {"anthropic": {"signature": "SIG"}}},
            {"type": "text", "text": "Checking."},
            {"type": "tool-weather", "toolCallId": "tu_1", "state": "input-available", "input": {"city": "Kyoto"}},
        ],
    }


@pytest.mark.parametrize("bad", [None, [], {"role": "system", "content": "x"}, {"content": []}])
def test_from_anthropic_rejects_what_is_not_a_message(bad):
    with pytest.raises(InvalidMessage):
        convert.from_anthropic(bad)
