"""Fast fixtures for large conversations: rows inserted in bulk with depth and token totals."""

from __future__ import annotations

import json

from django.db import connection

from agent_sessions.tokens import estimate_one_message_tokens
from agent_sessions.types import text_content


def bulk_chain(session_id: str, n: int, *, prefix: str = "m", text: str = "message {i} about the weather") -> list[str]:
    """Insert an n-deep linear chain in a few statements; returns the ids root first."""
    rows = []
    total = 0
    parent = None
    ids = []
    for i in range(n):
        mid = f"{prefix}{i}"
        message = {
            "id": mid,
            "role": "user" if i % 2 == 0 else "assistant",
            "parts": [{"type": "text", "text": text.format(i=i)}],
        }
        tokens = estimate_one_message_tokens(message)
        total += tokens
        rows.append(
            (
                mid,
                session_id,
                parent,
                message["role"],
                json.dumps(message, separators=(",", ":")),
                text_content(message),
                tokens,
                i + 1,
                total,
            )
        )
        parent = mid
        ids.append(mid)
    with connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content, tokens, depth,"
            " path_tokens) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            rows,
        )
    return ids
