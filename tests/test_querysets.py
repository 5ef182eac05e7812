"""ORM relations and Message querysets (for_session, path, search, roots, leaves, children_of), on either database."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.db.models import Count

from agent_sessions import Session, SessionManager
from agent_sessions.models import Compaction, CompactionJob, Message, SessionRecord
from tests.conftest import msg

pytestmark = pytest.mark.django_db


def ids(queryset) -> list[str]:
    return [m.message_id for m in queryset]


@pytest.fixture
def tree(session_id):
    """m0 ─ m1 ─ m2, and a later branch m0 ─ b1 (the latest leaf)."""
    session = Session.create().for_session(session_id)
    session.append_message(msg("m0", "user", "plan the migration"))
    session.append_message(msg("m1", "assistant", "migration plan: copy then switch"))
    session.append_message(msg("m2", "user", "and the rollback?"))
    session.append_message(msg("b1", "assistant", "regenerated: a different migration answer"), "m0")
    return session


# ── path ────────────────────────────────────────────────────────────────────
def test_path_of_latest_leaf_and_of_given_leaf(tree, session_id):
    qs = Message.objects.for_session(session_id)
    assert ids(qs.path()) == ["m0", "b1"]
    assert ids(qs.path("m2")) == ["m0", "m1", "m2"]
    assert ids(qs.path("m1")) == ["m0", "m1"]
    assert ids(qs.path("nope")) == []
    # The same rows, in the same order, as the Session API's walk.
    assert ids(qs.path("m2")) == [m["id"] for m in tree.get_history("m2")]


def test_path_chains_with_filter_values_and_count(tree, session_id):
    qs = Message.objects.for_session(session_id)
    assert ids(qs.path("m2").filter(role="user")) == ["m0", "m2"]
    assert list(qs.path("m2").values_list("message_id", "depth")) == [("m0", 1), ("m1", 2), ("m2", 3)]
    assert qs.path("m2").count() == 3
    assert qs.path("m2").exclude(role="user").get().message_id == "m1"


def test_path_needs_one_session(tree, session_id):
    with pytest.raises(ValueError, match="for_session"):
        Message.objects.filter(session_id=session_id).path()
    with pytest.raises(ValueError, match="leaf_id must be a string without NUL characters"):
        Message.objects.for_session(session_id).path("a\x00b")
    with pytest.raises(ValueError, match="session_id must be a string without NUL characters"):
        Message.objects.for_session(None)


def test_path_through_the_relation_of_a_registry_row(db):
    manager = SessionManager()
    info = manager.create("chat")
    manager.append(info.id, msg("u1", "user", "hi"))
    manager.append(info.id, msg("a1", "assistant", "hello"))
    record = SessionRecord.objects.get(pk=info.id)
    assert ids(record.messages.path()) == ["u1", "a1"]
    assert ids(record.messages.leaves()) == ["a1"]


def test_path_over_rows_of_a_foreign_writer(session_id):
    """Rows written without depth/tokens (the seed's providers) walk the same way."""
    with connection.cursor() as cursor:
        for mid, parent in (("f0", None), ("f1", "f0"), ("f2", "f1")):
            cursor.execute(
                "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content) "
                "VALUES (%s, %s, %s, 'user', '{}', '')",
                [mid, session_id, parent],
            )
    qs = Message.objects.for_session(session_id)
    assert ids(qs.path()) == ["f0", "f1", "f2"]
    assert list(qs.path().values_list("depth", flat=True)) == [None, None, None]


def test_path_in_the_default_namespace(db):
    session = Session.create()  # session_id ''
    session.append_message(msg("d0"))
    session.append_message(msg("d1"))
    assert ids(Message.objects.for_session("").path()) == ["d0", "d1"]


# ── roots, leaves, children ────────────────────────────────────────────────
def test_roots_leaves_and_children(tree, session_id):
    qs = Message.objects.for_session(session_id)
    assert ids(qs.roots()) == ["m0"]
    assert ids(qs.leaves()) == ["m2", "b1"]
    assert ids(qs.children_of("m0")) == ["m1", "b1"]
    assert ids(qs.children_of("m2")) == []
    tree.delete_messages(["m1"])  # m2 stays, as the root of its subtree
    assert ids(qs.roots()) == ["m0", "m2"]
    assert ids(qs.leaves()) == ["m2", "b1"]


def test_leaves_are_per_session(tree, session_id):
    other = Session.create().for_session(session_id + "-other")
    other.append_message(msg("m0"))
    # The same id in another session is a leaf there, and not a parent here.
    assert sorted(ids(Message.objects.filter(message_id="m0").leaves())) == ["m0"]
    assert Message.objects.filter(message_id="m0").leaves().get().session_id == session_id + "-other"


# ── search ───────────────────────────────────────────────────────────────────
def test_search_is_ranked_best_first(tree, session_id):
    hits = list(Message.objects.for_session(session_id).search("migration"))
    assert sorted(ids(hits)) == ["b1", "m0", "m1"]
    ranks = [h.rank for h in hits]
    assert all(isinstance(r, float) and r > 0 for r in ranks)
    assert ranks == sorted(ranks, reverse=True)
    # The same hits in the same order as the Session API's search.
    assert ids(hits) == [r.id for r in tree.search("migration")]


def test_search_language_and_chaining(tree, session_id):
    qs = Message.objects.for_session(session_id)
    assert ids(qs.search("migration -regenerated").order_by("seq")) == ["m0", "m1"]
    assert ids(qs.search('"copy then switch"')) == ["m1"]
    assert ids(qs.search("migration").filter(role="user")) == ["m0"]
    assert qs.search("migration").count() == 3
    assert list(qs.search("rollback").values_list("message_id", flat=True)) == ["m2"]
    assert ids(qs.search("")) == []
    assert ids(qs.search("   ")) == []
    assert ids(qs.search("zebra")) == []
    # As a subquery, and combined with a path.
    assert ids(Message.objects.filter(seq__in=qs.search("migration").values("seq"))) == ["m0", "m1", "b1"]
    assert ids(qs.path("m2").search("migration").order_by("seq")) == ["m0", "m1"]


def test_search_across_sessions_of_one_owner(db):
    users = get_user_model().objects
    alice, bob = users.create_user("alice"), users.create_user("bob")
    manager = SessionManager()
    for owner, text in ((alice, "deploy on friday"), (alice, "deploy again"), (bob, "deploy never")):
        info = manager.create("s")
        SessionRecord.objects.filter(pk=info.id).update(owner=owner)
        manager.append(info.id, msg(f"m-{owner.username}-{len(text)}", "user", text))
    hits = Message.objects.filter(session__owner=alice).search("deploy")
    assert sorted(ids(hits)) == ["m-alice-12", "m-alice-16"]
    assert Message.objects.filter(session__owner=bob).search("deploy").get().text_content == "deploy never"
    assert Message.objects.search("deploy").count() == 3


def test_search_cjk_substring(session_id):
    session = Session.create().for_session(session_id)
    session.append_message(msg("j1", "user", "来週の会議について"))
    session.append_message(msg("j2", "user", "会議の議事録、会議室の予約"))
    session.append_message(msg("j3", "user", "unrelated"))
    hits = list(Message.objects.for_session(session_id).search("会議"))
    assert ids(hits) == ["j2", "j1"]  # more occurrences rank higher
    assert hits[0].rank > hits[1].rank


# ── relations ────────────────────────────────────────────────────────────────
def test_sessions_by_model_with_message_counts(db):
    manager = SessionManager()
    for model, n in (("gpt", 2), ("gpt", 3), ("claude", 1)):
        info = manager.create("s", model=model)
        for i in range(n):
            manager.append(info.id, msg(f"m{i}"))
    rows = SessionRecord.objects.order_by("model").values("model").annotate(n=Count("messages"))
    assert list(rows) == [{"model": "claude", "n": 1}, {"model": "gpt", "n": 5}]


def test_relations_have_no_database_constraint(session_id):
    """Rows of unregistered sessions (and of the default namespace) are written and read as before."""
    Message.objects.create(message_id="x", session_id=session_id, role="user", content="{}")
    Compaction.objects.create(compaction_id="c", session_id="", summary="s", from_message_id="a", to_message_id="b")
    CompactionJob.objects.create(session_id=session_id)
    assert Message.objects.filter(session_id=session_id).count() == 1
    assert Compaction.objects.filter(session_id="").count() == 1
    assert CompactionJob.objects.get(session_id=session_id).session_id == session_id
    with pytest.raises(SessionRecord.DoesNotExist):
        Message.objects.get(session_id=session_id).session  # noqa: B018
    record = SessionRecord.objects.create(id=session_id)
    assert record.messages.count() == 1
    assert record.compaction_job.session_id == session_id
    assert Message.objects.get(session_id=session_id).session == record


def test_the_relations_are_in_the_migration_state_without_database_constraints():
    from django.db import connection

    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "assistant_messages")
    assert not any(c["foreign_key"] for c in constraints.values())
    out = io.StringIO()
    call_command("makemigrations", "agent_sessions", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def test_examples_of_the_data_model_docs(db):
    from django.db.models import Sum

    users = get_user_model().objects
    user = users.create_user("carol")
    manager = SessionManager()
    mine, other = manager.create("a", model="gpt"), manager.create("b", model="gpt")
    SessionRecord.objects.filter(pk=mine.id).update(owner=user)
    manager.append(mine.id, msg("m0", "user", "pay the invoice"))
    manager.append(mine.id, msg("m1", "assistant", "invoice paid"))
    manager.append(other.id, msg("x0", "user", "an invoice for someone else"))
    assert list(SessionRecord.objects.values("model").annotate(n=Sum("message_count"))) == [{"model": "gpt", "n": 3}]
    owned = SessionRecord.objects.filter(owner=user, messages__in=Message.objects.search("invoice")).distinct()
    assert [r.id for r in owned] == [mine.id]
    per_session = Message.objects.search("invoice").order_by().values("session_id").annotate(n=Count("seq"))
    assert sorted((r["session_id"], r["n"]) for r in per_session) == sorted([(mine.id, 2), (other.id, 1)])
