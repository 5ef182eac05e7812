"""One overlay rule everywhere: for one ``from``, the overlay reaching furthest along the path wins.

A side branch's newer, shorter compaction must not un-compact the main branch, in history,
windows, the threshold check, the admin tree, fork and export.
"""

from __future__ import annotations

import pytest

from agent_sessions import SessionManager, estimate_message_tokens
from agent_sessions.admin.export import history_document
from agent_sessions.admin.tree_layout import history_tokens, load_compactions, load_tree, path_items
from agent_sessions.overlays import apply_overlays
from agent_sessions.types import StoredCompaction
from tests.conftest import msg

pytestmark = pytest.mark.django_db

MAIN = [f"m{i}" for i in range(12)]


def ids(items):
    return [m["id"] for m in items]


def side_branch_compacted(session):
    """m0…m11, a branch b9, b10 under m8; the main branch compacted to m9, then the side branch to m6."""
    for mid in MAIN:
        session.append_message(msg(mid, text=f"{mid} " + "words on the main branch " * 5))
    session.append_message(msg("b9"), "m8")
    session.append_message(msg("b10"), "b9")
    main = session.add_compaction("main summary", "m0", "m9")
    side = session.add_compaction("side summary", "m0", "m6")
    return main, side


def test_side_branch_compaction_keeps_the_main_branch_compacted(session):
    main, side = side_branch_compacted(session)
    assert ids(session.get_history("m11")) == [f"compaction_{main.id}", "m10", "m11"]
    # The side branch does not contain m9, so its own overlay shows there.
    assert ids(session.get_history("b10")) == [f"compaction_{side.id}", "m7", "m8", "b9", "b10"]


def test_tie_on_the_same_range_goes_to_the_newest(session):
    for mid in MAIN[:5]:
        session.append_message(msg(mid))
    session.add_compaction("first", "m1", "m3")
    second = session.add_compaction("second", "m1", "m3")
    assert ids(session.get_history()) == ["m0", f"compaction_{second.id}", "m4"]


def test_recent_window_uses_the_same_rule(session):
    main, _ = side_branch_compacted(session)
    window = session.get_recent_history("m11", max_content_bytes=10**9)
    assert ids(window.messages) == [f"compaction_{main.id}", "m10", "m11"]
    # A window starting inside both ranges: the overlay ending furthest still covers its start.
    last_six = sum(s.bytes for s in session.get_history_row_stats("m11")[-6:])
    window = session.get_recent_history("m11", max_content_bytes=last_six)
    assert ids(window.messages) == [f"compaction_{main.id}", "m10", "m11"]


def test_threshold_check_agrees_with_history_without_falling_back(session):
    side_branch_compacted(session)
    for leaf in ("m11", "b10", "m9", "m7"):
        expected = estimate_message_tokens(session.get_history(leaf))
        assert session.storage.visible_history_tokens(leaf) == expected, leaf


def test_admin_tree_folds_the_same_overlay(session):
    main, _ = side_branch_compacted(session)
    tree = load_tree(session.session_id)
    items = path_items(tree.path_to("m11"), load_compactions(session.session_id))
    assert [(i.overlay.id if i.overlay else None, [n.id for n in i.nodes]) for i in items] == [
        (main.id, MAIN[:10]),
        (None, ["m10"]),
        (None, ["m11"]),
    ]
    assert history_tokens(items) == estimate_message_tokens(session.get_history("m11"))


def test_fork_and_export_agree():
    manager = SessionManager()
    sid = manager.create("source").id
    session = manager.get_session(sid)
    main, _ = side_branch_compacted(session)
    fork = manager.fork(sid, "m11", "fork")
    forked = manager.get_history(fork.id)
    assert len(forked) == 3
    assert forked[0]["parts"] == [{"type": "text", "text": "main summary"}]
    assert [m["parts"] for m in forked[1:]] == [m["parts"] for m in session.get_history("m11")[1:]]
    assert ids(history_document(sid, "m11")["history"]) == [f"compaction_{main.id}", "m10", "m11"]


def test_pure_rule_on_a_path():
    path = [{"id": f"m{i}"} for i in range(8)]
    long = StoredCompaction("long", "L", "m1", "m6")
    short = StoredCompaction("short", "S", "m1", "m3")
    assert ids(apply_overlays(path, [long, short])) == ["m0", "compaction_long", "m7"]
    assert ids(apply_overlays(path, [short, long])) == ["m0", "compaction_long", "m7"]
