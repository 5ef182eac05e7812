"""Japanese (CJK) text is found by substring: trigram index for 3+ characters, a bounded scan below."""

from __future__ import annotations

import pytest
from django.test import override_settings

from agent_sessions.search import SNIPPET_START, SNIPPET_STOP
from agent_sessions.storage import orm
from tests.conftest import msg
from tests.support.search_docs import append_docs, ids, search

pytestmark = pytest.mark.django_db

DOCS = {
    "deploy": "金曜日にデプロイします",
    "meeting": "明日の会議は十時から始まります",
    "migration": "データベースの移行は来週です。会議で確認しましょう",
    "mixed": "Kubernetes クラスタへのデプロイは deploying scripts で自動化",
    "english": "We deploy the database on Friday",
    "python": "Python入門を学ぶ",
}


@pytest.fixture
def docs(session):
    return append_docs(session, DOCS)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("会議", {"meeting", "migration"}),  # 2 characters: bounded scan
        ("移行", {"migration"}),
        ("金曜日", {"deploy"}),  # 3 characters: trigram index
        ("十時から", {"meeting"}),
        ("デプロイ", {"deploy", "mixed"}),  # 4
        ("データベース", {"migration"}),  # 6
        ("金曜日にデ", {"deploy"}),  # 5
        ("します", {"deploy"}),
        ("存在しない言葉", set()),
        ("会", {"meeting", "migration"}),  # a single character
    ],
)
def test_japanese_substrings(docs, query, expected):
    assert ids(search(docs, query)) == expected


def test_japanese_words_are_anded_ored_and_excluded(docs):
    assert ids(search(docs, "会議 移行")) == {"migration"}
    assert ids(search(docs, "会議 -移行")) == {"meeting"}
    assert ids(search(docs, "移行 OR 金曜日")) == {"migration", "deploy"}
    assert ids(search(docs, "デプロイ -金曜日")) == {"mixed"}
    assert ids(search(docs, '"金曜日にデプロイ"')) == {"deploy"}


def test_mixed_japanese_and_english(docs):
    assert ids(search(docs, "デプロイ kubernetes")) == {"mixed"}
    assert ids(search(docs, "deploy デプロイ")) == {"mixed"}  # stemmed English AND CJK substring
    assert ids(search(docs, "会議 -database")) == {"meeting", "migration"}
    assert ids(search(docs, "デプロイ OR friday")) == {"deploy", "mixed", "english"}
    assert ids(search(docs, "会議 OR friday")) == {"meeting", "migration", "english"}
    assert ids(search(docs, "python入門")) == {"python"}  # one token mixing scripts, any case
    assert ids(search(docs, "Kubernetes クラスタ 会議")) == set()


def test_cjk_snippets_are_highlighted(docs):
    (hit,) = search(docs, "金曜日")
    assert f"{SNIPPET_START}金曜日{SNIPPET_STOP}" in hit.snippet
    (hit,) = search(docs, "移行")
    assert f"{SNIPPET_START}移行{SNIPPET_STOP}" in hit.snippet
    (hit,) = search(docs, "kubernetes デプロイ")
    assert f"{SNIPPET_START}デプロイ{SNIPPET_STOP}" in hit.snippet
    assert SNIPPET_START + "Kubernetes" + SNIPPET_STOP in hit.snippet


def test_cjk_ranking_counts_occurrences(session):
    session.append_message(msg("one", text="会議があります。それから昼食です。"))
    session.append_message(msg("three", text="会議、会議、また会議"))
    session.append_message(msg("two", text="会議のあとで会議"))
    assert [h.id for h in search(session, "会議")] == ["three", "two", "one"]


def test_cjk_pagination_and_role(docs):
    assert ids(search(docs, "会議", role="assistant")) == {"meeting"}
    assert ids(search(docs, "会議", role="user")) == {"migration"}
    first = [h.id for h in search(docs, "会議", limit=1)]
    second = [h.id for h in search(docs, "会議", limit=1, offset=1)]
    assert len(first) == len(second) == 1
    assert set(first + second) == {"meeting", "migration"}


def test_like_wildcards_are_literal(session):
    session.append_message(msg("pct", text="進捗は100%です"))
    session.append_message(msg("other", text="進捗は100です"))
    assert ids(search(session, "0%で")) == {"pct"}
    assert ids(search(session, "会_")) == set()


def test_cross_session_japanese(db):
    from agent_sessions import Session

    Session.create().for_session("jp-1").append_message(msg("a", text="来週の会議"))
    Session.create().for_session("jp-2").append_message(msg("b", text="会議室の予約"))
    assert {(h.session_id, h.id) for h in orm.search("会議")} == {("jp-1", "a"), ("jp-2", "b")}
    assert {(h.session_id, h.id) for h in orm.search("会議室")} == {("jp-2", "b")}


def test_short_query_scan_is_bounded_to_the_newest_rows(session):
    for i in range(5):
        session.append_message(msg(f"m{i}", text=f"会議 {i}"))
    with override_settings(AGENT_SESSIONS_SEARCH_SCAN_ROWS=2):
        assert ids(search(session, "会議")) == {"m3", "m4"}
        # An indexed word in the query lifts the bound: the short term only filters.
        assert ids(search(session, "会議 1")) == {"m1"}
        assert len(search(session, "会議 OR 会議室")) == 2
    assert len(search(session, "会議")) == 5


def test_trigram_index_follows_updates_and_deletes(docs):
    docs.update_message(msg("deploy", text="土曜日にリリースします"))
    assert ids(search(docs, "金曜日")) == set()
    assert ids(search(docs, "土曜日")) == {"deploy"}
    docs.delete_messages(["deploy"])
    assert ids(search(docs, "土曜日")) == set()
