"""Where a reply is written: the one function every path of the chat view stores an assistant message with.

Keeping it in one place lets model-call records (SPEC §8) wrap exactly this write.
"""

from __future__ import annotations

from typing import cast

from ..manager import rows
from ..session import Session
from ..ui_message import UIMessage


def store_reply(
    session: Session,
    message: dict,
    *,
    parent_id: str,
    continued: bool,
    using: str,
    model: str | None = None,
) -> None:
    """Store the assistant reply and bump the session's ``updated_at``, in one transaction.

    ``continued``: the message is already stored (a client-side tool follow-up continues it) and
    is replaced; otherwise it is appended as a child of ``parent_id`` (a sibling of earlier replies
    on regenerate).  ``model``: the view's ``model`` option, for the model-call record (SPEC §8)."""
    with rows.write_transaction(using):
        reply = cast("UIMessage", message)  # rebuilt from the chunks; the storage checks it
        if continued:
            session.update_message(reply)
        else:
            session.append_message(reply, parent_id)
        rows.touch(using, session.session_id)
