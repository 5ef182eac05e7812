"""Where a reply is written: the one function every path of the chat view stores an assistant message with.

With the view's ``model`` option, the reply's model-call record (SPEC §8) goes with this write.
"""

from __future__ import annotations

from typing import cast

from ..manager import rows
from ..session import ModelCall, Session
from ..ui_message import UIMessage


def store_reply(
    session: Session,
    message: dict,
    *,
    parent_id: str,
    continued: bool,
    using: str,
    call: ModelCall | None = None,
    error: str = "",
) -> None:
    """Store the assistant reply, its model-call record and the session's ``updated_at``, in one transaction.

    ``continued``: the message is already stored (a client-side tool follow-up continues it) and
    is replaced; otherwise it is appended as a child of ``parent_id`` (a sibling of earlier replies
    on regenerate).  ``call``: the model call started for this reply (the view's ``model`` option),
    recorded with it (SPEC §8); ``error``: why the reply is partial."""
    with rows.write_transaction(using):
        reply = cast("UIMessage", message)  # rebuilt from the chunks; the storage checks it
        if continued:
            session.update_message(reply)
        else:
            session.append_message(reply, parent_id)
        if call is not None:
            call.observed(message_id=reply["id"], error=error)
        rows.touch(using, session.session_id)
