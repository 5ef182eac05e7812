"""Loaded-skill state: which ``label:key`` skills the model currently has in its history.

The truth lives in the transcript: a skill is loaded while a ``load_context``
tool result for it is visible on the current path, and ``unload_context``
rewrites those results to ``[skill unloaded: KEY]``.  Nothing extra is stored.

After a restart the state is rebuilt lazily, and only when the session has a
skill block (so sessions without one never read their transcript for this).
The scan walks the path newest-first in windows of at most
``AGENT_SESSIONS_SKILL_SCAN_WINDOW_BYTES`` stored bytes: ``get_history_row_stats``
(ids and sizes, no content) plans the windows and ``get_recent_history`` fetches
each one, so memory holds one window of content at a time.  Messages inside a
compaction range on the path are skipped: the model no longer sees them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol, cast

from .. import conf
from ..overlays import applied_ranges
from ..types import COMPACTION_PREFIX, HistoryRowStat, RecentHistory, StoredCompaction
from ..ui_message import UIMessage


class SkillHistory(Protocol):
    """What the skill scan reads and rewrites: a session's message API."""

    def get_history_row_stats(self, leaf_id: str | None = None) -> list[HistoryRowStat]: ...

    def get_recent_history(
        self, leaf_id: str | None = None, *, max_content_bytes: int, min_recent_messages: int = 1
    ) -> RecentHistory: ...

    def get_compactions(self) -> list[StoredCompaction]: ...

    def update_message(self, message: UIMessage) -> Any: ...


LOAD_TOOL = "load_context"
_DEAD_PREFIXES = ("Not found:", "Error:", "[skill unloaded:")


def unloaded_marker(key: str) -> str:
    """What an unloaded skill's tool result is rewritten to."""
    return f"[skill unloaded: {key}]"


def skill_id(label: str, key: str) -> str:
    return f"{label}:{key}"


@dataclass
class _LoadCall:
    holder: dict  # the dict that carries the output
    output_key: str
    label: str
    key: str

    @property
    def live(self) -> bool:
        output = self.holder.get(self.output_key)
        return isinstance(output, str) and not output.startswith(_DEAD_PREFIXES)


def _load_calls(message: dict) -> Iterator[_LoadCall]:
    """``load_context`` tool parts of a message (AI SDK v5 typed/dynamic parts and v4 invocations)."""
    for part in message.get("parts") or []:
        if not isinstance(part, dict):
            continue
        holder, name = part, part.get("toolName")
        if part.get("type") == f"tool-{LOAD_TOOL}":
            name = LOAD_TOOL
        elif part.get("type") == "tool-invocation" and isinstance(part.get("toolInvocation"), dict):
            holder = part["toolInvocation"]
            name = holder.get("toolName")
        if name != LOAD_TOOL:
            continue
        args = holder.get("input", holder.get("args"))
        if not isinstance(args, dict) or not isinstance(args.get("label"), str) or not isinstance(args.get("key"), str):
            continue
        output_key = "output" if "output" in holder or "result" not in holder else "result"
        yield _LoadCall(holder, output_key, args["label"], args["key"])


def _windows(session: SkillHistory) -> Iterator[list[dict]]:
    """Visible raw messages of the current path, newest window first, one bounded window at a time."""
    stats = session.get_history_row_stats()
    if not stats:
        return
    position = {s.id: i for i, s in enumerate(stats)}
    covered = [(start, end) for start, end, _ in applied_ranges([s.id for s in stats], session.get_compactions())]

    def visible(message: dict) -> bool:
        index = position.get(str(message.get("id")))
        if index is None or str(message.get("id")).startswith(COMPACTION_PREFIX):
            return False
        return not any(a <= index <= b for a, b in covered)

    budget = conf.skill_scan_window_bytes()
    end = len(stats) - 1
    while end >= 0:
        start, size = end, stats[end].bytes
        while start > 0 and size + stats[start - 1].bytes <= budget:
            start -= 1
            size += stats[start].bytes
        recent = session.get_recent_history(stats[end].id, max_content_bytes=size, min_recent_messages=end - start + 1)
        yield [m for m in recent.messages if visible(m)]
        end = start - 1


class LoadedSkills:
    """Per-session loaded-skill state: restored from history once, then kept in memory."""

    def __init__(self) -> None:
        self._restored: set[str] | None = None
        self._fresh: set[str] = set()  # loaded in this process before any restore

    def record_load(self, label: str, key: str) -> None:
        """Remember a successful ``load_context``."""
        self._fresh.add(skill_id(label, key))

    def pending(self) -> set[str]:
        """Loads recorded in this process (no history read)."""
        return set(self._fresh)

    def keys(self, session: SkillHistory) -> set[str]:
        """``label:key`` of every loaded skill (restores from history on first call)."""
        if self._restored is None:
            self._restored = self._scan(session, None)
        return self._restored | self._fresh

    def unload(self, session: SkillHistory, label: str, key: str) -> bool:
        """Rewrite every visible result of loading ``label:key``; True if it was loaded."""
        target = skill_id(label, key)
        was_loaded = target in self._fresh or (self._restored is not None and target in self._restored)
        found: list[str] = []
        live_after = self._scan(session, (label, key), found)
        was_loaded = was_loaded or bool(found)
        self._restored = live_after
        self._fresh.discard(target)
        return was_loaded

    def clear(self) -> None:
        """Nothing is loaded (the history was cleared)."""
        self._restored = set()
        self._fresh = set()

    def forget(self) -> None:
        """Drop the cached state; the next read restores from history again."""
        self._restored = None
        self._fresh = set()

    @staticmethod
    def _scan(session: SkillHistory, unload: tuple[str, str] | None, rewritten: list | None = None) -> set[str]:
        live: set[str] = set()
        for window in _windows(session):
            for message in window:
                changed = None
                for load in _load_calls(message):
                    if not load.live:
                        continue
                    if unload is not None and (load.label, load.key) == unload:
                        changed = changed or copy.deepcopy(message)
                        continue
                    live.add(skill_id(load.label, load.key))
                if changed is not None:
                    for load in _load_calls(changed):
                        if load.live and (load.label, load.key) == unload:
                            load.holder[load.output_key] = unloaded_marker(load.key)
                    session.update_message(cast(UIMessage, changed))
                    if rewritten is not None:
                        rewritten.append(changed["id"])
        return live
