"""Message search through Session.search: ANDed words, isolation, and hostile queries."""

from __future__ import annotations

import pytest
from django.db import connection

from agent_sessions import SearchNotSupported, Session
from tests.conftest import msg

pytestmark = pytest.mark.django_db


def test_words_are_anded_and_best_match_first(session):
    session.append_message(msg("a", text="We deploy the database on Friday"))
    session.append_message(msg("b", text="Friday is a holiday"))
    session.append_message(msg("c", text="deploy deploy deploy on Friday, deploy again"))
    hits = session.search("deploy Friday")
    assert {h.id for h in hits} == {"a", "c"}
    assert hits[0].id == "c"
    assert hits[0].role == "user"
    assert "Friday" in hits[0].content
    assert hits[0].session_id == session.session_id
    assert hits[0].created_at is not None


def test_stemming_finds_inflections(session):
    session.append_message(msg("a", text="the deployment finished"))
    assert [h.id for h in session.search("deployments")] == ["a"]


def test_limit(session):
    for i in range(5):
        session.append_message(msg(f"m{i}", text="needle in a haystack"))
    assert len(session.search("needle", limit=3)) == 3
    assert session.search("needle", limit=0) == []


@pytest.mark.parametrize(
    "query",
    [
        "",
        "   ",
        '"',
        '"unbalanced',
        "AND",
        "OR NOT",
        "NEAR(",
        "NEAR(a b",
        "*",
        "a*",
        "-",
        "-x",
        "col:umn",
        "^start",
        "'; DROP TABLE assistant_messages; --",
        "\x00",
        "(((",
        "a & b | !c <-> d",
        "x" * 10_000,
        "word " * 2_000,
        "日本語",
        "\ud800",
    ],
)
def test_search_never_raises_a_database_error(session, query):
    session.append_message(msg("a", text="an ordinary message about AND OR NEAR"))
    result = session.search(query)
    assert isinstance(result, list)
    assert all(hit.id == "a" for hit in result)
    assert [hit.id for hit in session.search(f"ordinary {query}")] in (["a"], [])  # AND: never another row
    assert [hit.id for hit in session.search("ordinary message")] == ["a"]  # and the index does answer
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM assistant_messages WHERE session_id = %s", [session.session_id])
        assert cursor.fetchone()[0] == 1


def test_blank_query_returns_nothing(session):
    session.append_message(msg("a", text="hello"))
    assert session.search("") == []
    assert session.search("  \t ") == []


def test_custom_storage_without_search_raises_search_not_supported():
    class Bare:
        def __init__(self):
            self.rows = []

        def append_message(self, message, parent_id=None):
            self.rows.append(message)

    s = Session.create(Bare())
    with pytest.raises(SearchNotSupported):
        s.search("x")
