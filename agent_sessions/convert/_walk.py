"""The loops every converter shares: role dispatch, user content, block reading, assistant runs.

Each target module supplies only what differs (its block shapes, as small functions or
dispatch tables); the walking, the skipping of malformed entries and the merging of an
assistant run back into one UIMessage live here once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._parts import (
    as_dict,
    as_list,
    is_tool_part,
    join_steps,
    message_ids,
    only_text,
    typed_parts,
    ui_message,
    with_result,
)

Handler = Callable[[list, Any], None]
FileBlock = Callable[[dict, str], "dict | None"]
BlockReader = Callable[[dict], "dict | None"]


def each_role(messages: Any, handlers: Mapping[str, Handler], sink: Any) -> Any:
    """Call ``handlers[role](parts, sink)`` for each message that has a ``parts`` list, in order; ``sink``.

    ``handlers`` is a target's module-level dispatch table and ``sink`` what it fills (no
    closures built per call). SDK objects are dumped first; non-messages, other roles and
    non-string roles are skipped.
    """
    get = handlers.get
    for message in messages if type(messages) is list else as_list(messages):
        if type(message) is not dict:
            message = as_dict(message)
            if not isinstance(message, dict):
                continue
        parts = message.get("parts")
        role = message.get("role")
        if type(parts) is list and type(role) is str:
            handler = get(role)
            if handler is not None:
                handler(parts, sink)
    return sink


def each_role_fast(
    messages: Any,
    fast: Mapping[str, Handler],
    checked: Mapping[str, Handler],
    sink: Any,
    mark: Callable[[Any], Any],
    undo: Callable[[Any, Any], None],
) -> Any:
    """:func:`each_role` through ``fast[role]`` first: straight-line handlers that assume the shapes a
    stored, validated UIMessage has and raise on anything else.

    When a fast handler raises (a missing key, a value of another type, a part it does not know),
    ``undo(sink, mark(sink))`` removes what it added and ``checked[role]`` converts that message
    again, so the output is always the checked converter's. Messages that are not plain dicts with
    a ``parts`` list and a string role, and iterables that are not lists, go to the checked walk.
    """
    if type(messages) is not list:
        return each_role(messages, checked, sink)
    get = fast.get
    for message in messages:
        if type(message) is dict:
            parts = message.get("parts")
            role = message.get("role")
            if type(parts) is list and type(role) is str:
                handler = get(role)
                if handler is None:
                    continue  # a role the target drops (both tables have the same keys)
                saved = mark(sink)
                try:
                    handler(parts, sink)
                except Exception:  # any surprise: the checked converter decides, from a clean sink
                    undo(sink, saved)
                    checked[role](parts, sink)
                continue
        each_role([message], checked, sink)
    return sink


def list_mark(out: list) -> int:
    """``mark`` for a list sink: its length."""
    return len(out)


def list_undo(out: list, length: int) -> None:
    """``undo`` for a list sink: drop what was appended after ``length``."""
    del out[length:]


def openai_roles(assistant: Handler, text_type: str, file_block: FileBlock) -> dict[str, Handler]:
    """The role table of an OpenAI target: ``assistant`` as given; user and system messages become
    ``{"role", "content"}`` (:func:`user_content`, files only from users), skipped when empty."""

    def user(parts: list, out: list[dict]) -> None:
        content = user_content(parts, text_type, file_block)
        if content is not None:
            out.append({"role": "user", "content": content})

    def system(parts: list, out: list[dict]) -> None:
        content = user_content(parts, text_type, None)
        if content is not None:
            out.append({"role": "system", "content": content})

    return {"assistant": assistant, "user": user, "system": system}


def content_blocks(parts: list, text_type: str, file_block: FileBlock | None, *, empty_text: bool = True) -> list[dict]:
    """A user message's content blocks: its text parts as ``text_type`` blocks, its files through ``file_block``.

    ``file_block(part, url)`` gets file parts with a non-empty URL and returns None to drop one;
    ``file_block=None`` drops every file; ``empty_text=False`` drops empty texts.
    """
    blocks: list[dict] = []
    for kind, part in typed_parts(parts):
        if kind == "text":
            text = part.get("text")
            if isinstance(text, str) and (empty_text or text):
                blocks.append({"type": text_type, "text": text})
        elif kind == "file" and file_block is not None:
            url = part.get("url")
            if isinstance(url, str) and url:
                block = file_block(part, url)
                if block is not None:
                    blocks.append(block)
    return blocks


def user_content(parts: list, text_type: str, file_block: FileBlock | None) -> str | list[dict] | None:
    """OpenAI-style ``content``: a lone text as a plain string, else the blocks; None when nothing is left."""
    text = only_text(parts)  # the common case, taken without building blocks
    if text is not None:
        return text
    blocks = content_blocks(parts, text_type, file_block)
    if not blocks:
        return None
    if len(blocks) == 1 and blocks[0]["type"] == text_type:
        return blocks[0]["text"]
    return blocks


def read_blocks(content: Any, readers: Mapping[str, BlockReader]) -> list[dict]:
    """UIMessage parts for a target's content: a string is one text part, blocks go through ``readers[type]``.

    Blocks of other types, readers returning None, and anything that is not a dict are dropped.
    """
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    parts: list[dict] = []
    for block in as_list(content):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        reader = readers.get(kind) if isinstance(kind, str) else None
        if reader is not None:
            part = reader(block)
            if part is not None:
                parts.append(part)
    return parts


def text_block(block: dict) -> dict | None:
    """Reader of a ``{"type", "text"}`` block (every target has one)."""
    text = block.get("text")
    return {"type": "text", "text": text} if isinstance(text, str) else None


def refusal_block(block: dict) -> dict | None:
    """Reader of an OpenAI ``refusal`` block: its text."""
    text = block.get("refusal")
    return {"type": "text", "text": text} if isinstance(text, str) else None


def text_of(content: Any, readers: Mapping[str, BlockReader]) -> str:
    """A tool result's content as one string: itself when a string, else its blocks' texts joined."""
    if isinstance(content, str):
        return content
    return "".join(p["text"] for p in read_blocks(content, readers) if p.get("type") == "text")


class Transcript:
    """UIMessages read back from a target's transcript, in order.

    Assistant-side turns accumulate as steps of one *run* until a message of another role
    arrives; the run then becomes a single assistant UIMessage (steps joined by
    ``step-start``). Ids are ``first``, ``first-1``, ... (fresh ones when ``first`` is None).
    """

    def __init__(self, first_id: str | None) -> None:
        self._ids: Iterator[str] = message_ids(first_id)
        self.messages: list[dict] = []
        self.run: list[list[dict]] | None = None

    def add(self, role: str, parts: list[dict]) -> None:
        """Close the open run, then append a message of ``role``."""
        self.close()
        self.messages.append(ui_message(next(self._ids), role, parts))

    def next_id(self) -> str:
        """Close the open run and hand out the next id (for a message converted elsewhere)."""
        self.close()
        return next(self._ids)

    def new_step(self) -> list[dict]:
        """Start a step of the open run (opening a run if needed); its parts list, to fill."""
        step: list[dict] = []
        if self.run is None:
            self.run = [step]
        else:
            self.run.append(step)
        return step

    def last_step(self) -> list[dict]:
        """The open run's last step (a new run with one step when none is open)."""
        return self.run[-1] if self.run is not None else self.new_step()

    def attach(self, call_id: Any, text: str, *, error: bool = False) -> bool:
        """Put a tool result into the latest part of the open run calling ``call_id``; False if none does."""
        for step in reversed(self.run or ()):
            for index, part in enumerate(step):
                if is_tool_part(part) and part["toolCallId"] == call_id:
                    step[index] = with_result(part, text, error=error)
                    return True
        return False

    def close(self) -> None:
        """Turn the open run, if any, into one assistant UIMessage."""
        if self.run is not None:
            self.messages.append(ui_message(next(self._ids), "assistant", join_steps(self.run)))
            self.run = None

    def done(self) -> list[dict]:
        """All messages, the open run closed."""
        self.close()
        return self.messages
