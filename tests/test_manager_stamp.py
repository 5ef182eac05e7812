"""Writes stamp the registry row in their own transaction: SessionManager's appends (storage/appends.STAMP)
its deletions and overlays, the adapters' pops, and the API's message routes (``manager.rows.write_transaction``).

Sent as a transaction of its own, the stamp would cost a second commit per append.  These
tests hold the two together (a stamp that fails takes the write back), keep what the stamp
meant (the manager's clock, a repeated append still stamps) and keep refused input from
writing anything.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from agent_sessions import InvalidMessage, Session
from agent_sessions.manager import SessionManager, clock
from agent_sessions.models import Message, SessionRecord

from .conftest import msg
from .support.api import ui

pytestmark = pytest.mark.django_db(transaction=True)

# A stamp refused by the database: the registry's clock is moved on to the year 2100 (its next
# readings follow it, see manager/clock.py), and a trigger refuses that year on a "fragile"
# session's row.  The database's own stamps (the count triggers' clock_timestamp()) pass, so only
# the manager's stamp fails, whether it goes as a statement of its own or rides on the append
# function's count.
_FAR = datetime(2100, 1, 1, tzinfo=UTC)
_REFUSE_STAMP = {
    "postgresql": [
        "CREATE FUNCTION test_refuse_stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "RAISE EXCEPTION 'stamp refused' USING ERRCODE = 'integrity_constraint_violation'; END $$",
        "CREATE TRIGGER test_refuse_stamp BEFORE UPDATE ON assistant_sessions FOR EACH ROW "
        "WHEN (NEW.name = 'fragile' AND NEW.updated_at >= '2100-01-01Z') EXECUTE FUNCTION test_refuse_stamp()",
    ],
    "sqlite": [
        "CREATE TRIGGER test_refuse_stamp BEFORE UPDATE ON assistant_sessions FOR EACH ROW "
        "WHEN NEW.name = 'fragile' AND NEW.updated_at >= '2100-01-01' "
        "BEGIN SELECT RAISE(ABORT, 'stamp refused'); END",
    ],
}
_UNDO = {
    "postgresql": ["DROP TRIGGER test_refuse_stamp ON assistant_sessions", "DROP FUNCTION test_refuse_stamp()"],
    "sqlite": ["DROP TRIGGER test_refuse_stamp"],
}


@pytest.fixture
def refused_stamps(monkeypatch):
    """Call it to install the trigger and move the registry's clock on (after the sessions are created)."""

    def install() -> None:
        with connection.cursor() as cursor:
            for sql in _REFUSE_STAMP[connection.vendor]:
                cursor.execute(sql)
        monkeypatch.setattr(clock, "_last", _FAR)

    yield install
    with connection.cursor() as cursor:
        for sql in _UNDO[connection.vendor]:
            cursor.execute(sql)


def _stamp(session_id: str):
    return SessionRecord.objects.values_list("updated_at", flat=True).get(pk=session_id)


def _stored(session_id: str) -> list[str]:
    return list(Message.objects.filter(session_id=session_id).order_by("seq").values_list("message_id", flat=True))


def test_append_and_its_stamp_commit_together(refused_stamps):
    manager = SessionManager()
    sid, other = manager.create("fragile").id, manager.create("sturdy").id
    refused_stamps()
    with pytest.raises(Exception, match="stamp refused"):
        manager.append(sid, msg("a"))
    assert _stored(sid) == []  # the insert went back with the stamp
    with pytest.raises(Exception, match="stamp refused"):
        manager.append_all(sid, [msg("b"), msg("c")])
    assert _stored(sid) == []
    manager.append(other, msg("a"))
    assert _stored(other) == ["a"]  # the trigger leaves other sessions alone


def test_deletions_and_overlays_commit_with_their_stamp(refused_stamps):
    manager = SessionManager()
    sid = manager.create("fragile").id
    manager.append_all(sid, [msg("a"), msg("b"), msg("c")])
    refused_stamps()
    with pytest.raises(Exception, match="stamp refused"):
        manager.delete_messages(sid, ["c"])
    with pytest.raises(Exception, match="stamp refused"):
        manager.add_compaction(sid, "summary", "a", "b")
    assert _stored(sid) == ["a", "b", "c"]
    assert manager.get_compactions(sid) == []


def test_append_stamps_with_the_managers_clock(monkeypatch):
    manager = SessionManager()
    sid = manager.create("s").id
    monkeypatch.setattr(clock, "_last", _FAR)  # ahead of the database's clock: only the manager's stamps reach it
    manager.append(sid, msg("a"))
    first = _stamp(sid)
    assert _FAR < first <= clock._last  # the registry's clock, to the microsecond
    manager.append_all(sid, [msg("b"), msg("c")])
    assert first < _stamp(sid) <= clock._last
    assert SessionRecord.objects.get(pk=sid).message_count == 3


def test_a_repeated_append_still_stamps_and_stores_nothing():
    manager = SessionManager()
    sid = manager.create("s").id
    manager.append(sid, msg("a"))
    first = _stamp(sid)
    manager.append(sid, msg("a", text="again"))
    assert _stamp(sid) > first
    assert _stored(sid) == ["a"]
    assert manager.get_session(sid).get_message("a")["parts"][0]["text"] == "a text"


def test_a_refused_id_writes_no_stamp():
    manager = SessionManager()
    sid = manager.create("s").id
    manager.append(sid, msg("a"))
    manager.append(sid, msg("b"))  # under a
    Message.objects.filter(session_id=sid, message_id="a").delete()  # b keeps naming "a" as its parent
    stamp = _stamp(sid)
    with pytest.raises(InvalidMessage, match="use a new id"):
        manager.append(sid, msg("a"))
    assert _stamp(sid) == stamp
    assert _stored(sid) == ["b"]


def test_an_append_to_an_id_without_a_registry_row_registers_it():
    """The row is made with the first append (so the session is listed), then stamped as any other."""
    manager = SessionManager()
    manager.append("unregistered", msg("a"))
    first = _stamp("unregistered")
    manager.append("unregistered", msg("b"))
    assert _stored("unregistered") == ["a", "b"]
    row = SessionRecord.objects.get(pk="unregistered")
    assert (row.name, row.owner_id, row.message_count) == ("", None, 2)
    assert _stamp("unregistered") > first


def test_a_custom_provider_is_still_stamped_after_the_append():
    from .test_custom_storage_append import SeedLikeList  # no transaction to share with the stamp

    manager = SessionManager()
    sid = manager.create("custom").id
    provider = SeedLikeList()
    manager._sessions[sid] = Session.create(provider).for_session(sid)
    before = _stamp(sid)
    manager.append(sid, msg("a"))
    assert [m["id"] for m in provider.rows] == ["a"]
    assert _stamp(sid) > before


def test_the_apis_upserts_and_deletions_commit_with_their_touch(api, refused_stamps):
    sid = api.new_session("fragile")
    api.append(sid, "a", "first")
    api.append(sid, "b", "second")
    refused_stamps()
    replaced = api.put(f"/sessions/{sid}/messages/a", ui("a", "replaced"))
    assert (replaced.status_code, replaced.json()["code"]) == (409, "conflict")  # a JSON 4xx, not a 500
    deleted = api.post(f"/sessions/{sid}/message-deletions", {"ids": ["b"]})
    assert (deleted.status_code, deleted.json()["code"]) == (409, "conflict")
    session = SessionManager().get_session(sid)
    assert session.get_message("a")["parts"][0]["text"] == "first"  # the update went back with the touch
    assert _stored(sid) == ["a", "b"]  # so did the deletion


def test_an_adapters_pop_commits_with_its_stamp(refused_stamps):
    from agent_sessions.integrations._store import SessionStore

    store = SessionStore("fragile", source="test")  # registered with its id as its name
    store.append([msg("a"), msg("b")])
    refused_stamps()
    with pytest.raises(Exception, match="stamp refused"):
        store.pop_latest()
    assert _stored("fragile") == ["a", "b"]
