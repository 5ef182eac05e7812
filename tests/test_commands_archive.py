"""export_sessions / import_sessions: a JSON Lines round trip that keeps branches, overlays and blocks."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from agent_sessions.manager import SessionManager
from agent_sessions.models import ContextBlockRecord, Message, SearchEntry, SessionRecord
from agent_sessions.storage.orm import DjangoSessionProvider

from .conftest import msg, tool_msg

pytestmark = pytest.mark.django_db(transaction=False)


def run(name: str, *args, **kwargs) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(name, *args, stdout=out, stderr=err, **kwargs)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def tree_file(tmp_path):
    """``tree_file(text)`` → the path of a new file holding ``text``."""
    counter = iter(range(1_000))

    def write(text: str) -> str:
        path = tmp_path / f"export-{next(counter)}.jsonl"
        path.write_text(text, encoding="utf-8")
        return str(path)

    return write


def _manager() -> SessionManager:
    return SessionManager().with_context("memory", description="Learned facts", max_tokens=1100).with_cached_prompt()


@pytest.fixture
def tree():
    """A session with two branches, a tool call, an overlay, a memory block, a frozen prompt and a search entry;
    plus a fork of it (copies carry origin ids)."""
    manager = _manager()
    info = manager.create("Trip", model="gpt-x", source="tests")
    sid = info.id
    for message in (
        msg("u1", text="plan a trip to Kyoto"),
        msg("a1", "assistant"),
        msg("u2"),
        tool_msg("a2", "weather", "call-1", {"city": "Kyoto"}, {"high_c": 19}),
        msg("u3"),
        msg("a3", "assistant", text="day two: Arashiyama"),
    ):
        manager.append(sid, message)
    manager.append(sid, msg("a3b", "assistant", text="day two, alternative: Fushimi Inari"), "u3")  # regenerate
    manager.append(sid, msg("u4", text="and day three?"), "a3")  # continue the first branch
    manager.add_compaction(sid, "## Topic\nKyoto trip", "u1", "a2")
    session = manager.get_session(sid)
    session.replace_context_block("memory", "Likes quiet gardens.")
    frozen = session.freeze_system_prompt()
    SearchEntry.objects.create(label=f"notes_{sid}", key="gardens", content="Moss gardens are quiet.")
    manager.add_usage(sid, 120, 45, 0.25)
    fork = manager.fork(sid, "a2", "Trip (fork)")
    return {"manager": manager, "sid": sid, "fork": fork.id, "frozen": frozen}


def _snapshot(manager: SessionManager, sid: str) -> dict:
    """What a user reads back: every branch's history, branches, overlays, record, blocks, prompt."""
    session = _manager().get_session(sid)
    leaves = Message.objects.filter(session_id=sid).exclude(
        message_id__in=Message.objects.filter(session_id=sid, parent_id__isnull=False).values("parent_id")
    )
    return {
        "histories": {leaf.message_id: session.get_history(leaf.message_id) for leaf in leaves},
        "latest": session.get_history(),
        "branches": session.get_branches("u3"),
        "compactions": [
            (c.id, c.summary, c.from_message_id, c.to_message_id, c.created_at) for c in session.get_compactions()
        ],
        "info": manager.get(sid),
        "prompt": session.freeze_system_prompt(),
        "memory": session.get_context_block("memory").content,
        "search": [r.id for r in session.search("Arashiyama")],
    }


def test_round_trip_keeps_everything(tree, tree_file):
    manager, sid, fork = tree["manager"], tree["sid"], tree["fork"]
    before = _snapshot(manager, sid)
    assert len(before["histories"]) == 2
    assert before["branches"][1]["id"] == "a3b"
    assert before["latest"][0]["id"].startswith("compaction_")
    mapping = manager.fork_mapping(fork)

    exported, err = run("export_sessions", sid, fork)
    lines = exported.splitlines()
    assert len(lines) == 2
    assert "100%" in err
    document = json.loads(lines[0])
    assert document["session_id"] == sid
    assert document["session"]["model"] == "gpt-x"
    assert [(m["id"], m["parent_id"]) for m in document["messages"]] == [
        ("u1", None),
        ("a1", "u1"),
        ("u2", "a1"),
        ("a2", "u2"),
        ("u3", "a2"),
        ("a3", "u3"),
        ("a3b", "u3"),
        ("u4", "a3"),
    ]
    assert document["messages"][3]["message"]["parts"][0]["output"] == {"high_c": 19}
    assert [b["label"] for b in document["context_blocks"]] == [f"_system_prompt_{sid}", f"memory_{sid}"]
    assert document["search_entries"][0]["key"] == "gardens"
    assert json.loads(lines[1])["messages"][0]["origin_id"] == "u1"

    manager.delete(sid)
    manager.delete(fork)
    assert not Message.objects.filter(session_id=sid).exists()

    path = tree_file(exported)
    out, err = run("import_sessions", path)
    assert "Imported 2 session(s), 12 message(s)." in out
    assert "100%" in err

    after = _snapshot(manager, sid)
    assert after == before
    assert after["prompt"] == tree["frozen"]
    assert manager.fork_mapping(fork) == mapping
    again, _ = run("export_sessions", sid, fork)
    assert again == exported  # byte-identical second export


def test_import_refuses_to_overwrite_unless_replace(tree, tree_file):
    manager, sid = tree["manager"], tree["sid"]
    exported, _ = run("export_sessions", sid)
    path = tree_file(exported)
    manager.append(sid, msg("u5", text="added after the export"))

    with pytest.raises(CommandError, match="already exists; pass --replace"):
        run("import_sessions", path)
    assert manager.get_session(sid).get_message("u5") is not None  # untouched

    run("import_sessions", path, "--replace")
    assert manager.get_session(sid).get_message("u5") is None
    assert Message.objects.filter(session_id=sid).count() == 8
    assert run("export_sessions", sid)[0] == exported


def test_import_is_all_or_nothing(tree, tree_file):
    sid = tree["sid"]
    exported, _ = run("export_sessions", sid)
    document = json.loads(exported)
    document["session_id"] = document["session"]["id"] = "brand-new"
    document["context_blocks"] = []
    document["search_entries"] = []
    document["compactions"] = []
    good = json.dumps(document)
    bad = json.dumps({**document, "session_id": "broken", "session": None, "messages": [{"id": "x", "message": 3}]})
    with pytest.raises(CommandError, match="nothing was imported"):
        run("import_sessions", tree_file(good + "\n" + bad + "\n"))
    assert not SessionRecord.objects.filter(id="brand-new").exists()
    assert not Message.objects.filter(session_id="brand-new").exists()


def test_import_rejects_foreign_files(db, tree_file):
    with pytest.raises(CommandError, match="not an agent_sessions session document"):
        run("import_sessions", tree_file('{"hello": 1}\n'))
    with pytest.raises(CommandError, match="not JSON"):
        run("import_sessions", tree_file("nope\n"))
    with pytest.raises(CommandError, match="cannot read"):
        run("import_sessions", "/nonexistent/file.jsonl")


def test_export_all_to_a_file_and_selection_errors(tree, tmp_path):
    target = tmp_path / "all.jsonl"
    out, err = run("export_sessions", "--all", "-o", str(target), "--no-progress")
    ids = [json.loads(line)["session_id"] for line in target.read_text(encoding="utf-8").splitlines()]
    assert tree["sid"] in ids
    assert tree["fork"] in ids
    assert ids == sorted(ids)
    assert out == ""
    assert "Exported" in err
    assert "%" not in err
    with pytest.raises(CommandError, match="no such session: nope"):
        run("export_sessions", "nope")
    with pytest.raises(CommandError, match="or pass --all"):
        run("export_sessions")


def test_export_of_a_namespace_without_registry_row(db, tree_file):
    """Rows a foreign writer stored without a registry row export without one; importing them registers it."""
    from agent_sessions import Session

    content = json.dumps(msg("m1"))
    DjangoSessionProvider("plain").insert_rows([{"id": "m1", "role": "user", "content": content, "text_content": ""}])
    ContextBlockRecord.objects.create(label="memory_plain", content="x")
    exported, _ = run("export_sessions", "plain")
    document = json.loads(exported)
    assert document["session"] is None
    assert [m["id"] for m in document["messages"]] == ["m1"]
    Message.objects.filter(session_id="plain").delete()
    ContextBlockRecord.objects.filter(label="memory_plain").delete()
    run("import_sessions", tree_file(exported))
    assert Session.create().for_session("plain").get_history()[0]["id"] == "m1"
    assert ContextBlockRecord.objects.get(label="memory_plain").content == "x"
    assert SessionRecord.objects.get(id="plain").message_count == 1  # listed now
