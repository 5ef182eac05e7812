"""JSON export of sessions, streamed so a 10,000-message session never sits in memory as one string."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator

from django.core.serializers.json import DjangoJSONEncoder
from django.http import StreamingHttpResponse

from ..manager.rows import RECORD_FIELDS
from ..models import Compaction, Message, SessionRecord
from ..storage import decode
from ..storage.orm import DjangoSessionProvider


def _dump(value: object) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False)


def session_info(record: SessionRecord | None) -> dict | None:
    return None if record is None else {f: getattr(record, f) for f in RECORD_FIELDS}


def _message_row(row: Message) -> str:
    message = decode.message(row.content, row_id=row.message_id, role=row.role)  # a damaged row: marked
    return _dump(
        {
            "id": row.message_id,
            "parent_id": row.parent_id,
            "role": row.role,
            "created_at": row.created_at,
            "message": message,
        }
    )


def iter_session(session_id: str, record: SessionRecord | None) -> Iterator[str]:
    """``{"session", "messages", "compactions"}`` of one session, in insertion order, as chunks."""
    yield '{"session": ' + _dump(session_info(record)) + ', "session_id": ' + _dump(session_id)
    yield ', "messages": ['
    rows = Message.objects.filter(session_id=session_id).order_by("seq")
    for i, row in enumerate(rows.iterator(chunk_size=1000)):
        yield ("," if i else "") + "\n" + _message_row(row)
    yield '], "compactions": ['
    overlays = Compaction.objects.filter(session_id=session_id).order_by("seq")
    for i, c in enumerate(overlays.iterator(chunk_size=1000)):
        yield (
            ("," if i else "")
            + "\n"
            + _dump(
                {
                    "id": c.compaction_id,
                    "summary": c.summary,
                    "from_message_id": c.from_message_id,
                    "to_message_id": c.to_message_id,
                    "created_at": c.created_at,
                }
            )
        )
    yield "]}"


def iter_sessions(records: Iterable[SessionRecord]) -> Iterator[str]:
    """A JSON array of :func:`iter_session` documents."""
    yield "["
    for i, record in enumerate(records):
        if i:
            yield ",\n"
        yield from iter_session(record.pk, record)
    yield "]"


def json_download(chunks: Iterable[str], filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(chunks, content_type="application/json")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", filename)
    response["Content-Disposition"] = f'attachment; filename="{safe}"'
    return response


def history_document(session_id: str, leaf_id: str) -> dict:
    """``get_history(leaf_id)`` of one branch (overlays applied), as exported."""
    return {
        "session_id": session_id,
        "leaf_id": leaf_id,
        "history": DjangoSessionProvider(session_id).get_history(leaf_id),
    }
