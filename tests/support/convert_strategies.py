"""Hypothesis strategies: conversations in the canonical form each converter target can express.

What a target cannot express (see each ``agent_sessions.convert`` module's docstring) is
left out here and covered by the drop tests instead, so the round trip must be the identity.
"""

from __future__ import annotations

import base64
import itertools

from hypothesis import strategies as st

TARGETS = ("chat", "responses", "anthropic")
TOOL_NAMES = ("weather", "calc", "search_docs", "get-time")
IMAGE_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=24)
scalars = st.none() | st.booleans() | st.integers(-(10**9), 10**9) | st.text(max_size=12)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
tool_inputs = st.dictionaries(st.text(max_size=8), json_values, max_size=3)
payloads = st.binary(min_size=1, max_size=16).map(lambda b: base64.b64encode(b).decode("ascii"))
filenames = st.none() | st.from_regex(r"[a-z]{1,8}\.(pdf|txt)", fullmatch=True)


def _file(media_type: str, url: str, filename: str | None = None) -> dict:
    part = {"type": "file", "mediaType": media_type, "url": url}
    if filename:
        part["filename"] = filename
    return part


@st.composite
def image(draw) -> dict:
    media_type = draw(st.sampled_from(sorted(IMAGE_EXT)))
    if draw(st.booleans()):
        name = draw(st.from_regex(r"[a-z0-9]{1,10}", fullmatch=True))
        return _file(media_type, f"https://files.example.com/{name}.{IMAGE_EXT[media_type]}")
    return _file(media_type, f"data:{media_type};base64,{draw(payloads)}")


@st.composite
def document(draw, target: str) -> dict:
    name = draw(filenames)
    if target == "chat":
        kind = draw(st.sampled_from(["pdf", "wav", "mp3"]))
        if kind == "pdf":
            return _file("application/pdf", f"data:application/pdf;base64,{draw(payloads)}", name)
        media_type = "audio/wav" if kind == "wav" else "audio/mpeg"
        return _file(media_type, f"data:{media_type};base64,{draw(payloads)}")
    if target == "anthropic" and draw(st.booleans()):
        body = base64.b64encode(draw(text).encode("utf-8")).decode("ascii")
        return _file("text/plain", f"data:text/plain;base64,{body}", name)
    if draw(st.booleans()):
        slug = draw(st.from_regex(r"[a-z0-9]{1,10}", fullmatch=True))
        return _file("application/pdf", f"https://files.example.com/{slug}.pdf", name)
    return _file("application/pdf", f"data:application/pdf;base64,{draw(payloads)}", name)


@st.composite
def user_message(draw, target: str) -> dict:
    parts = draw(
        st.lists(
            st.one_of(text.map(lambda t: {"type": "text", "text": t}), image(), document(target)),
            min_size=1,
            max_size=4,
        )
    )
    return {"role": "user", "parts": parts}


@st.composite
def tool(draw, target: str, ids, *, result: bool = True) -> dict:
    """A tool call with its result or error: a call without one is never sent (``incomplete_tool_calls``)."""
    name = draw(st.sampled_from(TOOL_NAMES))
    part = {
        "type": f"tool-{name}",
        "toolCallId": f"call_{next(ids)}",
        "state": "input-available",
        "input": draw(tool_inputs),
    }
    states = ["output-available", "output-error"] if target == "anthropic" else ["output-available"]
    if result:
        state = draw(st.sampled_from(states))
        if state == "output-error":
            part.update(state=state, errorText=draw(text))
        else:
            part.update(state=state, output=draw(st.text(max_size=24)))
    return part


@st.composite
def reasoning(draw, target: str, ids) -> list[dict]:
    if target == "responses":
        meta = {"itemId": f"rs_{next(ids)}"}
        if draw(st.booleans()):
            meta["reasoningEncryptedContent"] = draw(payloads)
        count = draw(st.integers(1, 2))
        texts = draw(st.lists(text, min_size=count, max_size=count)) if count > 1 else [draw(st.text(max_size=24))]
        return [{"type": "reasoning", "text": t, "providerMetadata": {"openai": dict(meta)}} for t in texts]
    if draw(st.booleans()):
        return [
            {
                "type": "reasoning",
                "text": draw(st.text(max_size=24)),
                "providerMetadata": {"anthropic": {"signature": draw(payloads)}},
            }
        ]
    return [{"type": "reasoning", "text": "", "providerMetadata": {"anthropic": {"redactedData": draw(payloads)}}}]


@st.composite
def step(draw, target: str, ids, *, last: bool) -> list[dict]:
    """One step; every step but the last ends in a tool result where the target marks steps only so."""
    if target == "chat":
        texts = draw(st.lists(text.map(lambda t: {"type": "text", "text": t}), max_size=2))
        tools = draw(st.lists(tool(target, ids), min_size=0 if texts else 1, max_size=2))
        return texts + tools
    kinds = draw(st.lists(st.sampled_from(["text", "tool", "reasoning"]), min_size=1, max_size=4))
    parts: list[dict] = []
    for kind in kinds:
        if kind == "text":
            parts.append({"type": "text", "text": draw(text)})
        elif kind == "tool":
            parts.append(draw(tool(target, ids)))
        else:
            parts.extend(draw(reasoning(target, ids)))
    if not last and not any("output" in p or "errorText" in p for p in parts):
        parts.append(draw(tool(target, ids, result=True)))
    return _tool_use_last(parts) if target == "anthropic" else parts


def _tool_use_last(parts: list[dict]) -> list[dict]:
    """Anthropic's canonical order: in each run of parts between reasoning parts, tool calls come last."""
    out: list[dict] = []
    calls: list[dict] = []
    for part in parts:
        if part["type"].startswith("tool-"):
            calls.append(part)
        else:
            if part["type"] == "reasoning":
                out.extend(calls)
                calls = []
            out.append(part)
    return out + calls


@st.composite
def assistant_message(draw, target: str, ids) -> dict:
    count = draw(st.integers(1, 3))
    parts: list[dict] = []
    for index in range(count):
        if index:
            parts.append({"type": "step-start"})
        parts.extend(draw(step(target, ids, last=index == count - 1)))
    return {"role": "assistant", "parts": parts}


@st.composite
def conversation(draw, target: str) -> list[dict]:
    """system? then user/assistant turns alternating (adjacent same-role messages would merge)."""
    ids = itertools.count()
    messages: list[dict] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "parts": [{"type": "text", "text": draw(text)}]})
    turns = draw(st.integers(1, 3))
    for index in range(turns):
        messages.append(draw(user_message(target)))
        if index < turns - 1 or draw(st.booleans()):
            messages.append(draw(assistant_message(target, ids)))
    if draw(st.booleans()) and messages[-1]["role"] == "user":
        messages.append(draw(assistant_message(target, ids)))
    last = messages[-1]["parts"][-1]
    if target == "anthropic" and last["type"] == "text":  # a final assistant text goes out stripped
        last["text"] = last["text"].strip() or "."
    return [{"id": f"m{i}", **m} for i, m in enumerate(messages)]
