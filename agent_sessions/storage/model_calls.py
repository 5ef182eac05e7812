"""The rows of model-call records (SPEC §8): a call, the content it saw (once per session), reads back.

Content rows are written with ``INSERT … ON CONFLICT DO NOTHING`` and only for hashes this
store has not written or read yet, so a conversation's hundredth call with the same prompt and
tools inserts one row, the call's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connections, router

from ..models import ModelCallContent, ModelCallRecord

FIELDS = (
    "call_id",
    "message_id",
    "leaf_id",
    "overlays",
    "system_hash",
    "tools_hash",
    "sent_hash",
    "model",
    "params",
    "usage",
    "cost",
    "latency_ms",
    "status",
    "error",
    "started_at",
)
"""The columns a read returns, in this order (``seq`` aside)."""

INSERT_CALL = (
    "INSERT INTO agent_sessions_model_calls (id, session_id, message_id, leaf_id, overlays, system_hash, "
    "tools_hash, sent_hash, model, params, usage, cost, latency_ms, status, error, started_at) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
INSERT_CONTENT = (
    "INSERT INTO agent_sessions_model_call_content (session_id, hash, kind, content, created_at) "
    "VALUES (%s, %s, %s, %s, CURRENT_TIMESTAMP) ON CONFLICT (session_id, hash) DO NOTHING"
)
"""Written out: the ORM's model instances and query compilation cost about as much as the append the
record goes with (bench/model_calls.py)."""
LINK = "UPDATE agent_sessions_model_calls SET message_id = %s WHERE session_id = %s AND id = %s"


class ModelCallStore:
    """One session's model-call rows in one Django database (``using`` None: the routers choose)."""

    def __init__(self, session_id: str, using: str | None) -> None:
        self.session_id = session_id
        self.using = using
        self._known: set[str] = set()

    def rekey(self, session_id: str) -> None:
        """Point the store at another session (``Session.for_session``)."""
        if session_id != self.session_id:
            self.session_id = session_id
            self._known.clear()

    @property
    def alias(self) -> str:
        """The database the rows are written to."""
        return self.using or router.db_for_write(ModelCallRecord)

    def forget(self) -> None:
        """Stop trusting that content written before is there (its transaction rolled back)."""
        self._known.clear()

    def _calls(self) -> Any:
        return ModelCallRecord.objects.using(self.using).filter(session_id=self.session_id)

    def save(self, record: dict[str, Any], contents: Iterable[tuple[str, str, str]]) -> None:
        """Insert the call ``record`` (the columns of :data:`FIELDS`), and each ``(hash, kind, content)``
        this session does not hold yet."""
        new = {h: (kind, text) for h, kind, text in contents if h not in self._known}
        connection = connections[self.alias]
        stamp = connection.ops.adapt_datetimefield_value(record["started_at"])
        with connection.cursor() as cursor:
            for key, (kind, text) in new.items():
                cursor.execute(INSERT_CONTENT, [self.session_id, key, kind, text])
            cursor.execute(
                INSERT_CALL,
                [record["call_id"], self.session_id, *(record[f] for f in FIELDS[1:-1]), stamp],
            )
        self._known.update(new)

    def link(self, call_id: str, message_id: str) -> None:
        """Set the reply of a recorded call."""
        with connections[self.alias].cursor() as cursor:
            cursor.execute(LINK, [message_id, self.session_id, call_id])

    def for_message(self, message_id: str) -> dict[str, Any] | None:
        """The newest successful call that produced ``message_id`` (else the newest of any status), or None."""
        rows = list(self._calls().filter(message_id=message_id).order_by("-seq").values(*FIELDS)[:20])
        if not rows:
            return None
        return next((r for r in rows if r["status"] == "ok"), rows[0])

    def page(self, limit: int | None, offset: int) -> list[dict[str, Any]]:
        """The session's calls, newest first (by start, then by insertion: a stable order)."""
        rows = self._calls().order_by("-started_at", "-seq").values(*FIELDS)
        return list(rows[offset : None if limit is None else offset + limit])

    def contents(self, hashes: Iterable[str | None]) -> dict[str, tuple[str, str]]:
        """``{hash: (kind, content)}`` for the hashes this session holds (unknown ones are left out)."""
        wanted = {h for h in hashes if h}
        if not wanted:
            return {}
        rows = ModelCallContent.objects.using(self.using).filter(session_id=self.session_id, hash__in=wanted)
        found = {key: (kind, content) for key, kind, content in rows.values_list("hash", "kind", "content")}
        self._known.update(found)
        return found

    def delete_all(self) -> None:
        """Forget every call of the session and the content only they referenced."""
        self._calls().delete()
        ModelCallContent.objects.using(self.using).filter(session_id=self.session_id).delete()
        self._known.clear()
