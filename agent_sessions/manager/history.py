"""Cross-session history for the model: the ``session_search`` tool and the searchable history block."""

from __future__ import annotations

from collections.abc import Callable

from ..tools import Tool
from ..types import SearchResult

NO_RESULTS = "No results found."
TOOL_LIMIT = 10
"""Hits shown to the model per search (as the seed does)."""

HISTORY_DESCRIPTION = "Cross-session conversation history"


def format_results(results: list[SearchResult]) -> str:
    """``[role] content`` blocks separated by ``---``, as the seed renders them.

    A hit with no text parts (found in a tool call's input, output or error) shows its
    snippet instead, so the model sees why it matched.
    """
    return "\n---\n".join(f"[{r.role}] {r.content if r.content.strip() else (r.snippet or '')}" for r in results)


def session_search_tool(search: Callable[..., list[SearchResult]]) -> Tool:
    """The ``session_search`` tool over ``search(query, limit=...)`` (all sessions)."""

    def execute(query: str) -> str:
        results = search(query, limit=TOOL_LIMIT)
        return format_results(results) if results else NO_RESULTS

    return Tool(
        name="session_search",
        description="Search past conversations for relevant context. Searches across all sessions.",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "Search query"}},
            "required": ["query"],
        },
        execute=execute,
    )


class SearchableHistoryProvider:
    """A readonly search provider over every session's messages.

    ``get()`` lists nothing but how many sessions can be searched (so the prompt
    stays small and stable); ``search(query)`` returns the hits.  No ``set``:
    conversation history is not written through a context block.
    """

    def __init__(self, count_sessions: Callable[[], int], search: Callable[..., list[SearchResult]]) -> None:
        self._count_sessions = count_sessions
        self._search = search

    def get(self) -> str:
        n = self._count_sessions()
        return f"{n} session{'' if n == 1 else 's'} available for search." if n else ""

    def search(self, query: str) -> str | None:
        results = self._search(query, limit=TOOL_LIMIT)
        return format_results(results) if results else None
