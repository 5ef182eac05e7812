"""Model-call records (SPEC §8): snapshot at entry, exact input afterwards, errors, order, storage, fork, delete."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent_sessions import Session, SessionManager
from agent_sessions.exceptions import InvalidUsage
from agent_sessions.models import ModelCallContent, ModelCallRecord
from agent_sessions.types import COMPACTION_PREFIX
from tests.conftest import msg

pytestmark = pytest.mark.django_db


def ids(messages):
    return [m["id"] for m in messages]


def reply(mid, text=None):
    return msg(mid, "assistant", text)


@pytest.fixture
def chat(session):
    """A session with a memory block (so there is a prompt and a context tool) and two turns."""
    session.with_context("memory", description="facts")
    session.append_message(msg("u1"))
    session.append_message(reply("a1"))
    session.append_message(msg("u2"))
    return session


def record(session, mid, **kwargs):
    with session.model_call(model="m-1", **kwargs) as call:
        call.finish(reply(mid))
    return call


# ── recording ────────────────────────────────────────────────────────────────


def test_a_call_hands_over_its_input_and_records_it(chat):
    with chat.model_call(model="gpt-test", params={"temperature": 0.3}) as call:
        assert ids(call.messages) == ["u1", "a1", "u2"]
        assert call.system == chat.stored_system_prompt()
        assert "MEMORY" in call.system
        assert [t["name"] for t in call.tools] == sorted(chat.tools())
        call.finish(reply("a2"), usage={"input_tokens": 12, "output_tokens": 3}, cost=0.002)
    assert ids(chat.get_history()) == ["u1", "a1", "u2", "a2"]
    seen = chat.model_input("a2")
    assert seen["system"] == call.system
    assert seen["messages"] == call.messages
    assert seen["tools"] == call.tools
    assert (seen["model"], seen["params"], seen["status"], seen["error"]) == (
        "gpt-test",
        {"temperature": 0.3},
        "ok",
        None,
    )
    assert seen["usage"] == {"input_tokens": 12, "output_tokens": 3}
    assert seen["cost"] == pytest.approx(0.002)
    assert seen["latency_ms"] >= 0
    assert abs(seen["started_at"] - timezone.now()) < timedelta(minutes=1)


def test_the_reply_goes_under_the_snapshot_even_when_other_messages_landed(chat):
    with chat.model_call(model="m") as call:
        chat.append_message(msg("u3"))  # another writer, while the model runs
        call.finish(reply("a2"))
    assert chat.get_message("a2") is not None
    assert ids(chat.get_history("a2")) == ["u1", "a1", "u2", "a2"]
    assert ids(chat.model_input("a2")["messages"]) == ["u1", "a1", "u2"]


def test_explicit_tools_and_leaf(chat):
    offered = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
    with chat.model_call(model="m", tools=offered, leaf_id="a1") as call:
        call.finish(reply("a1b"))
    seen = chat.model_input("a1b")
    assert seen["tools"] == offered
    assert ids(seen["messages"]) == ["u1", "a1"]
    assert ids(chat.get_history("a1b")) == ["u1", "a1", "a1b"]


def test_an_exception_is_recorded_and_reraised_and_appends_nothing(chat):
    with pytest.raises(RuntimeError, match="rate limited"), chat.model_call(model="m") as call:
        raise RuntimeError("rate limited")
    assert call.message is None
    assert ids(chat.get_history()) == ["u1", "a1", "u2"]
    [latest] = chat.model_calls(limit=1)
    assert (latest["status"], latest["error"], latest["message_id"]) == ("error", "rate limited", None)
    assert latest["latency_ms"] >= 0


def test_an_invalid_reply_writes_no_message_and_records_the_error(chat):
    from agent_sessions import InvalidMessage

    with pytest.raises(InvalidMessage), chat.model_call(model="m") as call:
        call.finish({"id": "x", "role": "", "parts": []})
    assert chat.get_message("x") is None
    assert chat.model_calls()[0]["status"] == "error"


def test_finish_twice_and_before_start_are_refused(chat):
    call = chat.model_call(model="m")
    with pytest.raises(RuntimeError):
        call.finish(reply("z"))
    with call:
        call.finish(reply("a2"))
        with pytest.raises(RuntimeError):
            call.finish(reply("a3"))
    assert chat.get_message("a3") is None


def test_a_block_left_without_finish_is_recorded_as_unfinished(chat):
    with chat.model_call(model="m"):
        pass
    assert chat.model_calls()[0]["status"] == "unfinished"


@pytest.mark.parametrize(
    "bad", [{"model": ""}, {"model": 3}, {"model": "m", "params": [1]}, {"model": "m", "params": {"x": float("nan")}}]
)
def test_bad_arguments_are_refused_before_the_model_runs(chat, bad):
    with pytest.raises(ValueError, match="model must be|params must be|Out of range float"):
        chat.model_call(**bad)
    assert chat.model_calls() == []


@pytest.mark.parametrize("cost", [float("inf"), float("-inf"), float("nan"), -0.01, "0.5", True])
def test_a_cost_that_is_not_a_finite_amount_is_refused_and_nothing_is_appended(chat, cost):
    with pytest.raises(InvalidUsage, match="cost must be a finite number"), chat.model_call(model="m") as call:
        call.finish(reply("a2"), cost=cost)
    assert ids(chat.get_history()) == ["u1", "a1", "u2"]
    assert [c["status"] for c in chat.model_calls()] == ["error"]


def test_a_message_no_call_produced_has_no_input(chat):
    assert chat.model_input("a1") is None
    assert chat.model_input("unknown") is None
    assert chat.model_input("nul\x00") is None


# ── exact afterwards ─────────────────────────────────────────────────────────


def test_the_input_stays_exact_after_refresh_block_edit_and_branch(chat):
    with chat.model_call(model="m") as call:
        call.finish(reply("a2"))
    before = chat.model_input("a2")
    chat.replace_context_block("memory", "the user likes tea")
    chat.refresh_system_prompt()
    assert "tea" in chat.stored_system_prompt()
    chat.append_message(msg("u2b"), "a1")  # a branch
    chat.append_message(reply("a3"))
    after = chat.model_input("a2")
    assert after["system"] == before["system"]
    assert "tea" not in after["system"]
    assert after["messages"] == before["messages"]
    assert after["tools"] == before["tools"]


def test_the_input_stays_exact_after_compaction_and_an_overlay_delete(chat):
    first = chat.add_compaction("earlier: greetings", "u1", "a1")
    with chat.model_call(model="m") as call:
        assert ids(call.messages) == [COMPACTION_PREFIX + first.id, "u2"]
        call.finish(reply("a2"))
    sent = chat.model_input("a2")["messages"]
    assert sent == call.messages
    # a later compaction covering more, then an operator (raw SQL) deleting the first overlay
    chat.add_compaction("everything so far", "u1", "a2")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM assistant_compactions WHERE id = %s", [first.id])
    assert chat.model_input("a2")["messages"] == sent
    assert sent[0]["parts"][0]["text"] == "earlier: greetings"


def test_an_overlay_reaching_the_leaf_still_parents_the_reply_on_the_stored_message(chat):
    chat.add_compaction("all of it", "u1", "u2")
    with chat.model_call(model="m") as call:
        assert len(call.messages) == 1
        call.finish(reply("a2"))
    assert call.leaf_id == "u2"
    assert ids(chat.get_history("a2"))[-2:] == [COMPACTION_PREFIX + chat.get_compactions()[0].id, "a2"]
    assert chat.model_input("a2")["messages"] == call.messages


# ── order, sessions, storage ─────────────────────────────────────────────────


def test_calls_list_newest_first_in_a_stable_order(chat):
    for i in range(4):
        record(chat, f"r{i}")
    same = timezone.now()
    ModelCallRecord.objects.filter(session_id=chat.session_id).update(started_at=same)
    assert [c["message_id"] for c in chat.model_calls()] == ["r3", "r2", "r1", "r0"]
    assert [c["message_id"] for c in chat.model_calls(limit=2, offset=1)] == ["r2", "r1"]
    with pytest.raises(ValueError, match="limit must be"):
        chat.model_calls(limit=-1)


def test_records_belong_to_their_session(chat, session_id):
    other = Session.create().for_session(session_id + "-other")
    other.append_message(msg("u1"))
    record(chat, "a2")
    record(other, "a2")
    assert len(chat.model_calls()) == len(other.model_calls()) == 1
    assert ids(other.model_input("a2")["messages"]) == ["u1"]
    other.clear_messages()
    assert other.model_calls() == []
    assert len(chat.model_calls()) == 1


def test_fifty_calls_store_the_prompt_and_tools_once_and_no_history(chat):
    for i in range(50):
        chat.append_message(msg(f"q{i}", text="a question " * 20))
        record(chat, f"r{i}", params={"temperature": 0})
    contents = ModelCallContent.objects.filter(session_id=chat.session_id)
    assert sorted(contents.values_list("kind", flat=True)) == ["system", "tools"]
    rows = list(ModelCallRecord.objects.filter(session_id=chat.session_id).values())
    assert len(rows) == 50
    for row in rows:
        stored = sum(len(str(v)) for v in row.values() if v is not None)
        assert stored < 400, row  # ids and hashes, never the history
        assert "a question" not in json.dumps(row, default=str)


def test_a_later_call_with_known_content_inserts_only_its_row(chat):
    record(chat, "a2")
    chat.append_message(msg("u3"))
    with CaptureQueriesContext(connection) as queries:
        record(chat, "a3")
    inserts = [q["sql"] for q in queries if "INSERT INTO" in q["sql"].upper() and "model_call" in q["sql"]]
    assert len(inserts) == 1
    assert "agent_sessions_model_calls" in inserts[0]
    assert not [q for q in queries if "agent_sessions_model_call_content" in q["sql"]]


# ── async ────────────────────────────────────────────────────────────────────


@pytest.mark.django_db(transaction=True)
def test_async_twins(session):
    async def run():
        await session.aappend_message(msg("u1"))
        async with session.amodel_call(model="m", params={"n": 1}) as call:
            assert ids(call.messages) == ["u1"]
            await call.finish(reply("a1"), usage={"output_tokens": 2})
        async with session.amodel_call(model="m") as call:
            call.finish(reply("a2"))  # not awaited: done when the block ends
        with pytest.raises(KeyError):
            async with session.amodel_call(model="m"):
                raise KeyError("gone")
        return await session.amodel_input("a1"), await session.amodel_calls()

    seen, calls = asyncio.run(run())
    assert ids(seen["messages"]) == ["u1"]
    assert seen["usage"] == {"output_tokens": 2}
    assert [c["status"] for c in calls] == ["error", "ok", "ok"]
    assert ids(session.get_history()) == ["u1", "a1", "a2"]


# ── fork, delete, export and import ─────────────────────────────────────────


def test_fork_copies_the_records_with_mapped_ids():
    manager = SessionManager()
    info = manager.create("t")
    session = manager.get_session(info.id)
    session.append_message(msg("u1"))
    session.append_message(reply("a1"))
    session.append_message(msg("u2"))
    overlay = session.add_compaction("first turn", "u1", "a1")
    with session.model_call(model="m") as call:
        call.finish(reply("a2"))
    forked = manager.fork(info.id, "a2", "fork")
    mapping = manager.fork_mapping(forked.id)
    copy = manager.get_session(forked.id)
    [row] = copy.model_calls()
    assert row["message_id"] == mapping["a2"]
    assert row["leaf_id"] == mapping["u2"]
    seen = copy.model_input(mapping["a2"])
    assert ids(seen["messages"])[1:] == [mapping["u2"]]
    summary = seen["messages"][0]
    assert summary["id"].startswith(COMPACTION_PREFIX)
    assert summary["id"] != COMPACTION_PREFIX + overlay.id
    assert summary["parts"][0]["text"] == "first turn"
    assert seen["system"] == session.model_input("a2")["system"]
    assert session.model_input("a2")["messages"][1]["id"] == "u2"  # the original is untouched


def test_deleting_a_session_deletes_its_records_and_content():
    manager = SessionManager()
    info = manager.create("t")
    session = manager.get_session(info.id)
    session.append_message(msg("u1"))
    record(session, "a1")
    manager.delete(info.id)
    assert not ModelCallRecord.objects.filter(session_id=info.id).exists()
    assert not ModelCallContent.objects.filter(session_id=info.id).exists()


def test_a_raw_delete_of_the_registry_row_takes_the_records_too():
    manager = SessionManager()
    info = manager.create("t")
    session = manager.get_session(info.id)
    session.append_message(msg("u1"))
    record(session, "a1")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM assistant_sessions WHERE id = %s", [info.id])
    assert not ModelCallRecord.objects.filter(session_id=info.id).exists()
    assert not ModelCallContent.objects.filter(session_id=info.id).exists()


def test_export_and_import_carry_the_records(tmp_path):
    from django.core.management import call_command

    manager = SessionManager()
    info = manager.create("t")
    session = manager.get_session(info.id)
    session.with_context("memory", description="facts")
    session.append_message(msg("u1"))
    session.add_compaction("hello", "u1", "u1")
    with session.model_call(model="m", params={"top_p": 1}) as call:
        call.finish(reply("a1"), usage={"input_tokens": 1}, cost=0.5)
    before = session.model_input("a1")
    path = tmp_path / "out.jsonl"
    call_command("export_sessions", "--output", str(path), "--no-progress", info.id)
    document = json.loads(path.read_text().splitlines()[0])
    assert len(document["model_calls"]) == 1
    assert len(document["model_call_content"]) == 3
    manager.delete(info.id)
    assert session.model_input("a1") is None
    call_command("import_sessions", str(path), "--no-progress")
    after = manager.get_session(info.id).model_input("a1")
    assert {k: after[k] for k in ("system", "messages", "tools", "params", "usage", "cost", "status")} == {
        k: before[k] for k in ("system", "messages", "tools", "params", "usage", "cost", "status")
    }


def test_an_import_whose_content_does_not_match_its_hash_is_refused(tmp_path):
    from django.core.management import CommandError, call_command

    manager = SessionManager()
    info = manager.create("t")
    session = manager.get_session(info.id)
    session.append_message(msg("u1"))
    record(session, "a1")
    path = tmp_path / "out.jsonl"
    call_command("export_sessions", "--output", str(path), "--no-progress", info.id)
    document = json.loads(path.read_text())
    document["model_call_content"][0]["content"] = "tampered"
    path.write_text(json.dumps(document))
    manager.delete(info.id)
    with pytest.raises(CommandError, match=r"model_call_content\[0\]\.hash: does not match the content"):
        call_command("import_sessions", str(path), "--no-progress")
    assert not ModelCallRecord.objects.filter(session_id=info.id).exists()


# ── custom storage ──────────────────────────────────────────────────────────


class TreeList:
    """A custom provider that keeps parents (like the seed's), with no overlays and no ``get_raw_path``."""

    def __init__(self):
        self.rows: dict[str, tuple[dict, str | None]] = {}
        self.order: list[str] = []

    def append_message(self, message, parent_id=None):
        self.rows[message["id"]] = (message, parent_id)
        self.order.append(message["id"])

    def get_message(self, message_id):
        row = self.rows.get(message_id)
        return None if row is None else row[0]

    def get_latest_leaf(self):
        return self.get_message(self.order[-1]) if self.order else None

    def get_history(self, leaf_id=None):
        leaf = leaf_id or (self.order[-1] if self.order else None)
        path = []
        while leaf in self.rows:
            message, leaf = self.rows[leaf]
            path.append(message)
        return path[::-1]


def test_a_custom_storage_records_too(session_id):
    session = Session(TreeList()).for_session(session_id)
    session.append_message(msg("u1"))
    with session.model_call(model="m") as call:
        call.finish(reply("a1"))
    session.append_message(msg("u2"))
    assert ids(session.model_input("a1")["messages"]) == ["u1"]
    assert session.model_calls()[0]["message_id"] == "a1"


def test_prune_deletes_the_records_of_the_sessions_it_deletes():
    from django.core.management import call_command

    from agent_sessions.models import SessionRecord

    manager = SessionManager()
    old, kept = manager.create("old"), manager.create("kept")
    for info in (old, kept):
        session = manager.get_session(info.id)
        session.append_message(msg("u1"))
        record(session, "a1")
    SessionRecord.objects.filter(id=old.id).update(end_reason="ended", updated_at=timezone.now() - timedelta(days=40))
    call_command("prune_sessions", "--days", "30", "--no-progress")
    assert not ModelCallRecord.objects.filter(session_id=old.id).exists()
    assert not ModelCallContent.objects.filter(session_id=old.id).exists()
    assert ModelCallRecord.objects.filter(session_id=kept.id).count() == 1
