"""Checked by mypy in ``make lint`` (never run): the public API as a type checker sees it.

Each ``assert_type`` fails the lint when an export turns into ``Any`` or an async twin
loses its sync method's signature.
"""

from __future__ import annotations

from typing import assert_type

from agent_sessions import (
    CompactResult,
    RecentHistory,
    SearchResult,
    Session,
    SessionInfo,
    SessionManager,
    StoredCompaction,
    UIMessage,
)
from agent_sessions.session.compaction import CompactionHandle


async def session_api(session: Session) -> None:
    assert_type(Session.create().for_session("s").with_context("memory"), Session)
    assert_type(session.compaction, CompactionHandle)
    assert_type(session.stored_system_prompt(), str | None)
    assert_type(await session.astored_system_prompt(), str | None)
    assert_type(await session.aget_history(), list[UIMessage])
    assert_type(await session.aappend_message({"id": "m", "role": "user", "parts": []}), bool)
    assert_type(await session.asearch("kyoto", limit=5), list[SearchResult])
    assert_type(await session.aget_recent_history(max_content_bytes=1000), RecentHistory)
    assert_type(await session.aget_compactions(), list[StoredCompaction])
    assert_type(await session.acompact(), CompactResult | None)
    assert_type(await session.afreeze_system_prompt(), str)


async def manager_api(manager: SessionManager) -> None:
    assert_type(await manager.acreate("chat"), SessionInfo)
    assert_type(await manager.aget_history("s"), list[UIMessage])
    assert_type(await manager.asearch("kyoto"), list[SearchResult])
    assert_type(await manager.aget_session("s"), Session)
