"""UIMessages ⇄ OpenAI Responses API input items.

``to_openai_responses(history)`` builds the ``input`` of ``client.responses.create``;
``from_openai_responses(response.output)`` (or any list of input items) gives UIMessages.

Mapping, in part order: text → a message item (``{"role", "content"}``; one item per
assistant text part); files → ``input_image`` / ``input_file`` (hosted URL or data);
reasoning parts carrying ``providerMetadata.openai.itemId`` → one ``reasoning`` item per
item id (each part is one summary entry; ``reasoningEncryptedContent`` is sent as
``encrypted_content``), stored the way the AI SDK does; tool parts → ``function_call``;
their results → ``function_call_output`` after the step's items (``errorText`` for errors,
JSON text for non-string outputs).

The Responses input cannot express these, so they are dropped, always the same way:

* reasoning parts without an OpenAI item id (another provider's reasoning), and the
  item's raw ``content`` reasoning text (only the summary is kept);
* files in assistant messages; filenames of images;
* step boundaries not followed by a tool result (items have no step marker, so those
  steps merge with the next);
* tool parts still streaming their input, awaiting approval or denied, and tools the
  provider executed; ``dynamic-tool`` vs ``tool-<name>`` (read back as ``tool-<name>``);
* whether a result was an error (it comes back as ``output-available`` with the text);
  non-string outputs come back as their JSON text;
* ``source-*`` and ``data-*`` parts, text ``state`` / ``providerMetadata``, message
  ``metadata`` / ``createdAt`` and ids; roles other than system/user/assistant; item
  types other than messages, reasoning and function calls (web search, MCP, shell...).

On the way back, a run of assistant-side items becomes one assistant UIMessage, a new
step starting after the tool results, so adjacent assistant UIMessages come back as one.
"""

from __future__ import annotations

from typing import Any

from . import _parts as P
from . import _walk as W


def to_openai_responses(messages: Any, *, system: str | None = None, incomplete_tool_calls: str = "drop") -> list[dict]:
    """Responses API ``input`` items for UIMessages (a ``system`` message first when given).

    Tool calls without a result are left out (``incomplete_tool_calls="drop"``) or raise
    :class:`~agent_sessions.MissingToolResults` (``"raise"``). Well-formed messages take the fast
    handlers; any other goes through the checked ones, which define the output (:func:`_walk.each_role_fast`).
    """
    messages = P.check_incomplete(messages, incomplete_tool_calls)
    items = [{"role": "system", "content": system}] if system else []
    return W.each_role_fast(messages, _FAST, _HANDLERS, items, len, W.list_undo)


def _checked(messages: Any, *, system: str | None = None) -> list[dict]:
    """:func:`to_openai_responses` through the checked handlers only: the reference for the fast path."""
    return W.each_role(messages, _HANDLERS, [{"role": "system", "content": system}] if system else [])


def _file_block(part: dict, url: str) -> dict:
    media_type = P.file_media_type(part)
    if media_type.startswith("image/"):
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    block: dict = {"type": "input_file"}
    inline = P.split_data_url(url)
    if inline is None:
        block["file_url"] = url
    else:
        block["file_data"] = P.data_url(media_type or inline[0], inline[1])
    if isinstance(part.get("filename"), str) and part["filename"]:
        block["filename"] = part["filename"]
    return block


def _assistant(parts: list, items: list[dict]) -> None:
    """Append the items of each step in part order, the step's tool results after them."""
    results: list[dict] = []
    reasoning: dict | None = None  # the reasoning item being filled (consecutive parts, one item id)
    for kind, part in P.typed_parts(parts):
        if kind == "text":
            text = part.get("text")
            if type(text) is str:
                items.append({"role": "assistant", "content": text})
        elif kind == "step-start":
            items.extend(results)
            results = []
        elif kind == "reasoning":
            reasoning = _add_reasoning(items, reasoning, part)
        else:
            found = P.sent_call(part)
            if found is None:
                continue
            call_id, name, state = found
            items.append({"type": "function_call", "call_id": call_id, "name": name, "arguments": P.input_json(part)})
            results.append({"type": "function_call_output", "call_id": call_id, "output": P.output_text(part, state)})
    items.extend(results)


#: Role → the function appending that role's items.
_HANDLERS = W.openai_roles(_assistant, "input_text", _file_block)


def _add_reasoning(items: list[dict], reasoning: dict | None, part: dict) -> dict | None:
    """Add a reasoning part to the open ``reasoning`` item (``items[-1]`` with the same OpenAI item id) or
    to a new one; returns the open item. Parts without an item id are dropped."""
    meta = P.reasoning_meta(part, "openai")
    item_id = meta.get("itemId")
    if type(item_id) is not str or not item_id:
        return reasoning
    if reasoning is None or reasoning["id"] != item_id or items[-1] is not reasoning:
        reasoning = {"type": "reasoning", "id": item_id, "summary": []}
        items.append(reasoning)
    text = part.get("text")
    if type(text) is str and text:
        reasoning["summary"].append({"type": "summary_text", "text": text})
    encrypted = meta.get("reasoningEncryptedContent")
    if type(encrypted) is str and "encrypted_content" not in reasoning:
        reasoning["encrypted_content"] = encrypted
    return reasoning


def _fast_user(parts: list, items: list[dict]) -> None:
    """A user message of one text part as ``{"role", "content": text}``; any other through the checked handler."""
    text = P.only_text(parts)
    if text is not None:
        items.append({"role": "user", "content": text})
        return
    _HANDLERS["user"](parts, items)


def _fast_assistant(parts: list, items: list[dict]) -> None:
    """:func:`_assistant` in straight-line code: the same choices (:func:`_parts.sent_call`), JSON
    through :func:`_parts.fast_input_json`; if anything raises, the checked handler converts the message."""
    results: list[dict] | None = None
    reasoning: dict | None = None  # the reasoning item being filled (consecutive parts, one item id)
    for part in parts:
        if type(part) is not dict:
            continue
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if type(text) is str:
                items.append({"role": "assistant", "content": text})
        elif kind == "step-start":
            if results is not None:
                items.extend(results)
                results = None
        elif kind == "reasoning":
            reasoning = _add_reasoning(items, reasoning, part)
        else:
            found = P.sent_call(part)
            if found is None:
                continue
            call_id, name, state = found
            items.append(
                {"type": "function_call", "call_id": call_id, "name": name, "arguments": P.fast_input_json(part)}
            )
            result = {"type": "function_call_output", "call_id": call_id, "output": P.fast_output_text(part, state)}
            if results is None:
                results = [result]
            else:
                results.append(result)
    if results is not None:
        items.extend(results)


#: Role → the fast handler, falling back to :data:`_HANDLERS` per message (all checked without orjson).
_FAST = {"assistant": _fast_assistant, "user": _fast_user, "system": _HANDLERS["system"]} if P.HAS_ORJSON else _HANDLERS


def from_openai_responses(items: Any, *, id: str | None = None) -> list[dict]:
    """Responses items (input items, ``response.output`` or a whole ``Response``; dicts or SDK objects) as UIMessages.

    Each run of assistant-side items becomes one assistant UIMessage; a step starts after
    tool results; ``function_call_output`` lands in its call's part. Ids are ``id``,
    ``id-1``, ... (fresh ones when ``id`` is None).
    """
    whole = P.as_dict(items)
    if isinstance(whole, dict) and whole.get("object") == "response":
        items = whole.get("output") or []  # a whole Response: its output items
    transcript = W.Transcript(id)
    after_results = False  # the next assistant-side item starts a new step

    def assistant_parts() -> list[dict]:
        nonlocal after_results
        step = transcript.new_step() if after_results else transcript.last_step()
        after_results = False
        return step

    for item in P.as_list(items):
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        role = item.get("role")
        if kind == "message" and role in ("system", "developer", "user"):
            transcript.add("user" if role == "user" else "system", W.read_blocks(item.get("content"), _READERS))
        elif kind == "message" and role == "assistant":
            assistant_parts().extend(W.read_blocks(item.get("content"), _READERS))
        elif kind == "reasoning" and isinstance(item.get("id"), str):
            assistant_parts().extend(_reasoning_parts(item))
        elif kind == "function_call" and isinstance(item.get("call_id"), str):
            assistant_parts().append(
                P.tool_part(str(item.get("name") or ""), item["call_id"], P.parse_arguments(item.get("arguments")))
            )
        elif (
            kind == "function_call_output"
            and transcript.run is not None
            and transcript.attach(item.get("call_id"), W.text_of(item.get("output"), _READERS))
        ):
            after_results = True
    return transcript.done()


def _reasoning_parts(item: dict) -> list[dict]:
    meta: dict = {"itemId": item["id"]}
    if isinstance(item.get("encrypted_content"), str):
        meta["reasoningEncryptedContent"] = item["encrypted_content"]
    summaries = [s.get("text") for s in P.as_list(item.get("summary")) if isinstance(s, dict)]
    summaries = [s for s in summaries if isinstance(s, str)] or [""]
    return [{"type": "reasoning", "text": s, "providerMetadata": {"openai": dict(meta)}} for s in summaries]


def _image(block: dict) -> dict | None:
    url = block.get("image_url")
    return P.file_part(P.guess_media_type(url, "image/*"), url) if isinstance(url, str) else None


def _file(block: dict) -> dict | None:
    filename = block.get("filename")
    inline = P.split_data_url(block.get("file_data", ""))
    if inline is not None:
        return P.file_part(inline[0], P.data_url(*inline), filename)
    url = block.get("file_url")
    if isinstance(url, str):
        return P.file_part(P.guess_media_type(url, "application/octet-stream"), url, filename)
    return None


#: Content block type → its UIMessage part (None drops the block).
_READERS = {
    "input_text": W.text_block,
    "output_text": W.text_block,
    "refusal": W.refusal_block,
    "input_image": _image,
    "input_file": _file,
}
