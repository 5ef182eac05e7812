"""Search tests' shared helpers: a session filled with documents, hit ids, a session-scoped search."""

from __future__ import annotations

from typing import Any

from agent_sessions.storage import orm
from tests.conftest import msg


def append_docs(session: Any, docs: dict[str, str]) -> Any:
    """Append ``docs`` (message id → text) to ``session``, alternating user/assistant; returns the session."""
    for i, (mid, text) in enumerate(docs.items()):
        session.append_message(msg(mid, role="user" if i % 2 == 0 else "assistant", text=text))
    return session


def ids(hits) -> set[str]:
    """The message ids of search hits."""
    return {h.id for h in hits}


def search(session: Any, query: str, **kw: Any) -> list:
    """``orm.search`` within ``session``."""
    return orm.search(query, session_id=session.session_id, **kw)
