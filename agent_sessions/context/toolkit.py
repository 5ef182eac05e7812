"""The context tools a session offers (``set_context``, ``load_context``, ``unload_context``, ``search_context``).

Each tool is built from the session's blocks at the time ``tools()`` is called
(labels become a JSON Schema ``enum``) and looks blocks up again when it runs.
Result strings are part of the public contract (the Cloudflare Agents Session tools): the model reads them.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..tools import Tool
from .block import ContextBlock

SEARCH_RESULTS = 10
NO_RESULTS = "No results found."


class ContextOwner(Protocol):
    """What the tools call on the session's context part (``SessionContext`` is one)."""

    def get_context_blocks(self) -> list[ContextBlock]: ...
    def replace_context_block(self, label: str, content: str) -> ContextBlock: ...
    def append_context_block(self, label: str, content: str) -> ContextBlock: ...
    def set_context_entry(
        self, label: str, content: str, *, title: str | None = None, description: str | None = None
    ) -> str: ...
    def search_context(self, label: str, query: str) -> Any: ...
    def load_skill(self, label: str, key: str) -> str | None: ...
    def unload_skill(self, label: str, key: str) -> bool: ...


def _label_schema(blocks: list[ContextBlock], what: str) -> dict:
    return {"type": "string", "enum": [b.label for b in blocks], "description": f"Label of the {what} block."}


def _listing(blocks: list[ContextBlock]) -> str:
    return "\n".join(f"- {b.label}" + (f": {b.description}" if b.description else "") for b in blocks)


def _pick(blocks: list[ContextBlock], label: str, what: str) -> ContextBlock:
    for block in blocks:
        if block.label == label:
            return block
    raise KeyError(f'"{label}" is not a {what} block. Available: {", ".join(b.label for b in blocks) or "none"}')


def usage_text(block: ContextBlock) -> str:
    """``Usage: pct% (tokens/max tokens)``, or ``Usage: tokens tokens`` without a limit."""
    if block.max_tokens:
        pct = round(block.tokens / block.max_tokens * 100)
        return f"Usage: {pct}% ({block.tokens}/{block.max_tokens} tokens)"
    return f"Usage: {block.tokens} tokens"


def format_search_results(results: Any) -> str:
    """Provider results as ``[key]\\ncontent`` blocks; strings pass through; empty → ``No results found.``"""
    if results is None:
        return NO_RESULTS
    if isinstance(results, str):
        return results if results.strip() else NO_RESULTS
    chunks = []
    for item in list(results)[:SEARCH_RESULTS]:
        if isinstance(item, dict):
            key, content = item.get("key"), item.get("content")
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            key, content = item
        elif isinstance(item, str):
            key, content = None, item
        else:
            key, content = getattr(item, "key", None), getattr(item, "content", item)
        chunks.append(f"[{key}]\n{content}" if key is not None else str(content))
    return "\n\n".join(chunks) if chunks else NO_RESULTS


def set_context_tool(session: ContextOwner, blocks: list[ContextBlock]) -> Tool:
    """Write a writable block, or index an entry of a writable skill/search block."""

    def execute(label: str, content: str, metadata: dict | None = None, mode: str = "replace") -> str:
        current = [b for b in session.get_context_blocks() if b.writable]
        block = _pick(current, label, "writable")
        if block.is_skill or block.is_searchable:
            meta = metadata or {}
            title, description = meta.get("title"), meta.get("description")
            key = session.set_context_entry(
                label,
                content,
                title=title if isinstance(title, str) else None,
                description=description if isinstance(description, str) else None,
            )
            return f'Indexed "{key}" in {label}.'
        if mode not in ("replace", "append"):
            raise ValueError('mode must be "replace" or "append"')
        write = session.append_context_block if mode == "append" else session.replace_context_block
        return f"Written to {label}. {usage_text(write(label, content))}"

    description = (
        "Write to a context block in your system prompt. Plain blocks are replaced (or appended to with "
        'mode "append") and must fit their token limit; loadable/searchable blocks store a keyed entry '
        "(metadata.title gives it a stable key). Writable blocks:\n" + _listing(blocks)
    )
    parameters = {
        "type": "object",
        "properties": {
            "label": _label_schema(blocks, "writable"),
            "content": {"type": "string", "description": "The new content (or the entry's text)."},
            "mode": {"type": "string", "enum": ["replace", "append"], "description": "Plain blocks only."},
            "metadata": {
                "type": "object",
                "description": "For loadable/searchable blocks: the entry's title (its key) and description.",
                "properties": {"title": {"type": "string"}, "description": {"type": "string"}},
            },
        },
        "required": ["label", "content"],
    }
    return Tool("set_context", description, parameters, execute)


def _skill_params(blocks: list[ContextBlock]) -> dict:
    return {
        "type": "object",
        "properties": {
            "label": _label_schema(blocks, "loadable"),
            "key": {"type": "string", "description": "The skill's key, as listed in the block."},
        },
        "required": ["label", "key"],
    }


def load_context_tool(session: ContextOwner, blocks: list[ContextBlock]) -> Tool:
    """Load a skill's full text by key."""

    def execute(label: str, key: str) -> str:
        document = session.load_skill(label, key)
        return f"Not found: {key}" if document is None else document

    description = "Load the full text of a skill listed in a loadable block. Loadable blocks:\n" + _listing(blocks)
    return Tool("load_context", description, _skill_params(blocks), execute)


def unload_context_tool(session: ContextOwner, blocks: list[ContextBlock]) -> Tool:
    """Unload a loaded skill to reclaim context."""

    def execute(label: str, key: str) -> str:
        if session.unload_skill(label, key):
            return f'Unloaded "{key}" from {label}. Context reclaimed.'
        return f'Skill "{key}" is not currently loaded in "{label}".'

    description = (
        "Unload a skill you loaded with load_context when you no longer need it; its text is removed "
        "from the conversation to free context. It can be loaded again later."
    )
    return Tool("unload_context", description, _skill_params(blocks), execute)


def search_context_tool(session: ContextOwner, blocks: list[ContextBlock]) -> Tool:
    """Full-text search in a searchable block."""

    def execute(label: str, query: str) -> str:
        return format_search_results(session.search_context(label, query))

    description = (
        f"Full-text search in a searchable context block; returns the best {SEARCH_RESULTS} entries. "
        "Searchable blocks:\n" + _listing(blocks)
    )
    parameters = {
        "type": "object",
        "properties": {
            "label": _label_schema(blocks, "searchable"),
            "query": {"type": "string", "description": "Words to look for (all must match)."},
        },
        "required": ["label", "query"],
    }
    return Tool("search_context", description, parameters, execute)


def context_tools(session: ContextOwner) -> dict[str, Tool]:
    """The tools the session's block kinds call for, by name."""
    blocks = session.get_context_blocks()
    tools: dict[str, Tool] = {}
    writable = [b for b in blocks if b.writable]
    skills = [b for b in blocks if b.is_skill]
    searchable = [b for b in blocks if b.is_searchable]
    if writable:
        tools["set_context"] = set_context_tool(session, writable)
    if skills:
        tools["load_context"] = load_context_tool(session, skills)
        tools["unload_context"] = unload_context_tool(session, skills)
    if searchable:
        tools["search_context"] = search_context_tool(session, searchable)
    return tools
