"""The real ``ai`` client (pinned in ``tests/js/chat``) against ChatView under the compose stack's ASGI server
(gunicorn with uvicorn workers).

The Node script drives the chat the way ``useChat`` does (``AbstractChat`` + ``DefaultChatTransport``):
send, a second turn, regenerate, a client-side tool round trip, an error mid-stream, only-the-last-
message requests, and a client that goes away; this side checks the stored tree against the
messages the client ended with.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest
from django.conf import settings
from django.db import connection

from agent_sessions.api.config import get_manager
from agent_sessions.models import ApiKey, Message, SessionRecord
from tests.support.api import make_user
from tests.support.chat_server import asgi_server, node_project

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def comparable(message: dict) -> dict:
    """What the client and the store must agree on: id, role, parts (the client's ``providerMetadata: undefined``
    and other undefined keys never reach JSON)."""
    return {"id": message["id"], "role": message["role"], "parts": message["parts"]}


@pytest.fixture(scope="module")
def client_run(django_db_blocker, tmp_path_factory):
    project = node_project()
    with django_db_blocker.unblock():
        from django.contrib.auth import get_user_model

        user = make_user(get_user_model(), f"ai-client-{time.monotonic_ns()}")
        _, token = ApiKey.issue(user, "ai client")
        with asgi_server(settings.DB, str(connection.settings_dict["NAME"])) as base:
            done = subprocess.run(
                [shutil.which("node") or "node", "chat.test.mjs"],
                cwd=project,
                env={"CHAT_API": f"{base}/api/chat", "CHAT_TOKEN": token, "PATH": "/usr/bin:/usr/local/bin:/bin"},
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
            assert done.returncode == 0, done.stderr[-4000:]
            out = json.loads(done.stdout)
            # The stopped stream's partial reply is stored when the server sees the disconnect.
            stop = get_manager().get_session(out["stop"]["id"])
            deadline = time.monotonic() + 10
            while stop.get_message(out["stop"]["messages"][-1]["id"]) is None and time.monotonic() < deadline:
                time.sleep(0.1)
        trees = {chat["id"]: Tree.read(chat["id"]) for chat in out.values()}
    return user, out, trees


class Tree:
    """What one chat stored, read before the test database is flushed: rows, children, latest path, owner."""

    def __init__(self, messages: dict, children: dict, history: list, owner_id: int) -> None:
        self.messages, self.children, self.history, self.owner_id = messages, children, history, owner_id

    @classmethod
    def read(cls, chat_id: str) -> Tree:
        session = get_manager().get_session(chat_id)
        ids = list(Message.objects.filter(session_id=chat_id).values_list("message_id", flat=True))
        messages = {mid: session.get_message(mid) for mid in ids}
        children = {mid: [m["id"] for m in session.get_branches(mid)] for mid in ids}
        return cls(messages, children, session.get_history(), SessionRecord.objects.get(id=chat_id).owner_id)

    def path(self, leaf_id: str) -> list[dict]:
        parent_of = {child: parent for parent, kids in self.children.items() for child in kids}
        out = [leaf_id]
        while out[-1] in parent_of:
            out.append(parent_of[out[-1]])
        return [self.messages[mid] for mid in reversed(out)]


def test_send_and_second_turn_match_the_stored_path(client_run):
    user, out, trees = client_run
    chat = out["second"]
    assert chat["status"] == "ready"
    tree = trees[chat["id"]]
    assert tree.owner_id == user.pk
    assert [comparable(m) for m in tree.path(chat["messages"][-1]["id"])] == [comparable(m) for m in chat["messages"]]
    assert chat["messages"][1]["parts"][-1]["text"] == "Reply 1 to: hello there"


def test_regenerate_is_a_sibling_of_the_replaced_reply(client_run):
    _, out, trees = client_run
    before, after = out["second"]["messages"], out["regenerate"]["messages"]
    assert [m["id"] for m in after[:3]] == [m["id"] for m in before[:3]]
    old, new = before[3], after[3]
    assert old["id"] != new["id"]
    tree = trees[out["regenerate"]["id"]]
    assert tree.children[before[2]["id"]] == [old["id"], new["id"]]
    assert comparable(tree.messages[new["id"]]) == comparable(new)
    assert new["parts"][-1]["text"] == "Reply 2 to: and again"
    assert tree.messages[old["id"]]["parts"][-1]["text"] == "Reply 1 to: and again"
    assert [m["id"] for m in tree.history] == [m["id"] for m in after]


def test_client_side_tool_round_trip_is_one_stored_assistant_message(client_run):
    _, out, trees = client_run
    chat = out["tool"]
    assert [c["toolName"] for c in chat["toolCalls"]] == ["getLocation"]
    assert len(chat["messages"]) == 2
    reply = chat["messages"][1]
    assert [p["type"] for p in reply["parts"]] == ["step-start", "text", "tool-getLocation", "step-start", "text"]
    assert reply["parts"][2]["state"] == "output-available"
    assert reply["parts"][2]["output"] == "Oslo"
    tree = trees[chat["id"]]
    assert comparable(tree.messages[reply["id"]]) == comparable(reply)
    assert len(tree.messages) == 2


def test_error_mid_stream_leaves_the_user_message_and_a_marked_partial(client_run):
    _, out, trees = client_run
    chat = out["error"]
    assert chat["status"] == "error"
    assert chat["errors"]
    user_message, partial = chat["messages"]
    tree = trees[chat["id"]]
    assert comparable(tree.messages[user_message["id"]]) == comparable(user_message)
    kept = tree.messages[partial["id"]]
    assert kept["parts"] == partial["parts"]
    assert kept["metadata"]["partial"]["reason"] == "error"


def test_only_the_last_message_posted_still_builds_one_path(client_run):
    _, out, trees = client_run
    chat = out["lastOnly"]
    assert [comparable(m) for m in trees[chat["id"]].history] == [comparable(m) for m in chat["messages"]]


def test_a_client_that_goes_away_leaves_a_marked_partial_reply(client_run):
    _, out, trees = client_run
    chat = out["stop"]
    kept = trees[chat["id"]].messages.get(chat["messages"][-1]["id"])
    assert kept is not None
    assert kept["metadata"]["partial"]["reason"] == "disconnect"
    assert kept["parts"][1]["text"].startswith("w0 w1 w2 ")
    assert len(kept["parts"][1]["text"].split()) < 40
