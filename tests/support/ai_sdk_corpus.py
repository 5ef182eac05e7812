"""Stored conversations (AI SDK UIMessages) that tests/test_convert_ai_sdk.py sends through the AI SDK
itself and through ``agent_sessions.convert``: text, files and images, reasoning with provider metadata,
multi-step tool use, errors, denied and dangling calls, system messages in every position, a long history.
"""

from __future__ import annotations

PNG = "data:image/png;base64,iVBORw0KGgo="
PDF = "data:application/pdf;base64,JVBERi0xLjQK"
TXT = "data:text/plain;base64,aGVsbG8gd29ybGQ="


def sys_(text: str, id: str = "s") -> dict:
    return {"id": id, "role": "system", "parts": [{"type": "text", "text": text}]}


def user(*parts, id: str = "u") -> dict:
    return {
        "id": id,
        "role": "user",
        "parts": [{"type": "text", "text": p} if isinstance(p, str) else p for p in parts],
    }


def bot(*parts, id: str = "a") -> dict:
    return {
        "id": id,
        "role": "assistant",
        "parts": [{"type": "text", "text": p} if isinstance(p, str) else p for p in parts],
    }


STEP = {"type": "step-start"}


def call(call_id: str, state: str = "output-available", name: str = "weather", **extra) -> dict:
    part = {"type": f"tool-{name}", "toolCallId": call_id, "state": state, "input": {"city": "Kyoto"}}
    if state == "output-available":
        part["output"] = extra.pop("output", {"temp": 18, "sky": "rain"})
    elif state == "output-error":
        part["errorText"] = extra.pop("errorText", "the weather service timed out")
    part.update(extra)
    return part


def _weather_turn(n: int) -> list[dict]:
    return [
        user(f"Weather in city {n}?", id=f"u{n}"),
        bot(
            STEP,
            "Let me check.",
            call(f"c{n}", output=f"{n} °C"),
            STEP,
            f"It is {n} °C.",
            id=f"a{n}",
        ),
    ]


CASES: dict[str, list[dict]] = {
    "text": [sys_("Be brief."), user("Hi"), bot("Hello! How can I help?"), user("Tell me a joke.")],
    "multi_text_parts": [user("one", "two"), bot("three", "four"), user("five")],
    "image_url_and_data": [
        user(
            "What is in these?",
            {"type": "file", "mediaType": "image/png", "url": "https://example.com/cat.png"},
            {"type": "file", "mediaType": "image/png", "url": PNG, "filename": "dot.png"},
        )
    ],
    "pdf_file": [
        user("Summarise.", {"type": "file", "mediaType": "application/pdf", "url": PDF, "filename": "report.pdf"})
    ],
    "text_file": [user("Summarise.", {"type": "file", "mediaType": "text/plain", "url": TXT, "filename": "notes.txt"})],
    "reasoning_openai": [
        user("Think, then answer."),
        bot(
            STEP,
            {
                "type": "reasoning",
                "text": "The user wants a short answer.",
                "providerMetadata": {"openai": {"itemId": "rs_1", "reasoningEncryptedContent": "ENC"}},
            },
            "Short answer.",
        ),
        user("Again."),
    ],
    "reasoning_anthropic": [
        user("Think, then answer."),
        bot(
            STEP,
            {"type": "reasoning", "text": "Hmm.", "providerMetadata": {"anthropic": {"signature": "SIG"}}},
            {"type": "reasoning", "text": "", "providerMetadata": {"anthropic": {"redactedData": "RED"}}},
            "Answer.",
        ),
        user("Again."),
    ],
    "tool_single_step": [user("Weather in Kyoto?"), bot(STEP, call("c1")), user("Thanks.")],
    "tool_multi_step": [
        user("Weather in Kyoto?"),
        bot(STEP, "Let me check.", call("c1"), STEP, "It is 18 °C and raining."),
        user("And tomorrow?"),
    ],
    "tool_parallel": [
        user("Kyoto and Osaka?"),
        bot(STEP, call("c1"), call("c2", output="sunny"), STEP, "Rain in Kyoto, sun in Osaka."),
    ],
    "tool_error": [
        user("Weather in Kyoto?"),
        bot(STEP, call("c1", "output-error"), STEP, "The service is down, sorry."),
        user("OK."),
    ],
    "tool_denied": [
        user("Delete my files."),
        bot(
            STEP,
            call("c1", "output-denied", name="delete", approval={"id": "ap1", "approved": False, "reason": "no"}),
            STEP,
            "I was not allowed to.",
        ),
        user("Fine."),
    ],
    "dangling_last": [user("Weather in Kyoto?"), bot(STEP, "Let me check.", call("c1", "input-available"))],
    "dangling_then_user": [
        user("Weather in Kyoto?"),
        bot(STEP, "Let me check.", call("c1", "input-available")),
        user("Never mind, what about Osaka?"),
    ],
    "dangling_beside_answered": [
        user("Kyoto and Osaka?"),
        bot(STEP, call("c1"), call("c2", "input-available"), STEP, "Kyoto: rain."),
        user("And Osaka?"),
    ],
    "text_after_call_in_a_step": [
        user("Weather?"),
        bot(STEP, "Checking.", call("c1"), "One moment.", STEP, "Rain."),
        user("Thanks."),
    ],
    "system_first_only": [sys_("Be brief."), user("Hi")],
    "system_consecutive_first": [sys_("Be brief.", id="s1"), sys_("Be kind.", id="s2"), user("Hi")],
    "system_middle_after_leading": [
        sys_("Be brief.", id="s1"),
        user("Hi", id="u1"),
        bot("Hello.", id="a1"),
        sys_("From now on answer in French.", id="s2"),
        user("How are you?", id="u2"),
    ],
    "system_middle_no_leading": [
        user("Hi", id="u1"),
        bot("Hello.", id="a1"),
        sys_("From now on answer in French.", id="s2"),
        user("How are you?", id="u2"),
    ],
    "system_last": [sys_("Be brief.", id="s1"), user("Hi"), sys_("Answer in one word.", id="s2")],
    "assistant_prefill_whitespace": [user("Write a haiku."), bot("Here it is:  ")],
    "long_history": [m for n in range(25) for m in _weather_turn(n)] + [user("Summarise the week.", id="end")],
}
