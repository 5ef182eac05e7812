"""Arbitrary unicode queries answer, or are refused as too complex, through every search entry point (hypothesis)."""

from __future__ import annotations

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_sessions import DjangoSearchProvider, SearchTooComplex, Session
from agent_sessions.search import cost
from agent_sessions.search.args import as_query, query_terms
from agent_sessions.storage import backends, orm
from tests.conftest import msg

pytestmark = pytest.mark.django_db

# Pieces of syntax (ours and every engine's) mixed with arbitrary text.
SYNTAX = [
    '"', "-", "OR", "AND", "NOT", "NEAR(", "*", "^", ":", "(", ")", "&", "|", "!", "<->", "<2>", "'", "\\",
    "%", "_", "\x00", "\ud800", "会議", "デプロイ", "金曜日", "deploy", "friday", " ", "　", "\n", "ﾃﾞﾌﾟﾛｲ", "İ",
]  # fmt: skip
queries = st.one_of(
    st.text(max_size=60),
    st.lists(st.one_of(st.sampled_from(SYNTAX), st.text(max_size=6)), max_size=12).map("".join),
    st.lists(st.sampled_from(SYNTAX), max_size=20).map(" ".join),
)
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def corpus(db):
    session = Session.create().for_session("fuzz")
    for i, text in enumerate(
        ["deploy on friday", "金曜日にデプロイします", '会議 OR NEAR(x) "quoted" 100% _x_', "mixed deploy 会議"]
    ):
        session.append_message(msg(f"m{i}", text=text))
    provider = DjangoSearchProvider()
    provider.init("fuzz")
    provider.set("k", "deploy 会議 friday")
    # The corpus is really indexed: the subset checks below would pass on an empty index.
    assert {h.id for h in session.search("deploy")} == {"m0", "m3"}
    assert {h.id for h in session.search("デプロイ")} == {"m1"}
    assert [r["key"] for r in provider.search("会議")] == ["k"]
    return session, provider


def _assert_hits(hits, valid):
    assert isinstance(hits, list)
    assert {h.id for h in hits} <= valid


@FUZZ
@given(query=queries)
def test_every_entry_point_answers_any_query_or_refuses_it_as_too_complex(corpus, query):
    """Any text answers with hits from the corpus, or (past the cost limits) is refused by every
    entry point alike with SearchTooComplex; nothing else is raised."""
    session, provider = corpus
    valid = {f"m{i}" for i in range(4)}
    backend = backends.for_alias("default")

    def answer(terms, search):
        try:
            cost.check(as_query(terms))
        except SearchTooComplex:
            with pytest.raises(SearchTooComplex):
                search()
            return []
        return search()

    terms = query_terms(query)
    _assert_hits(answer(terms, lambda: orm.search(query)), valid)
    _assert_hits(answer(terms, lambda: orm.search(query, session_id="fuzz", limit=2, offset=1, role="user")), valid)
    _assert_hits(answer(terms, lambda: session.search(query)), valid)
    assert {r["key"] for r in answer(terms, lambda: provider.search(query))} <= {"k"}
    with connection.cursor() as cursor:
        rows = answer(terms, lambda: backend.search_entries(cursor, "fuzz", terms, 5, snippets=True))
        assert {r[0] for r in rows} <= {"k"}
        words = query.split()
        raw = answer(words, lambda: backend.search_messages(cursor, None, words, 5, snippets=True))
        assert {r[0] for r in raw} <= valid


@FUZZ
@given(scope=st.text(max_size=8), role=st.text(max_size=4))
def test_any_scope_and_role_text(corpus, scope, role):
    hits = orm.search("deploy", session_id=scope, role=role)
    _assert_hits(hits, {"m0", "m3"})
    if scope == "fuzz" and role == "user":
        assert {h.id for h in hits} == {"m0", "m3"}


# Words each corpus message is known to contain (no stopwords: Postgres drops those).
KNOWN = {
    "m0": ["deploy", "friday", "DEPLOY", "Friday"],
    "m1": ["金曜日", "デプロイ", "曜日にデ"],
    "m3": ["mixed", "deploy", "会議"],
}


@FUZZ
@given(data=st.data())
def test_any_mix_of_a_messages_words_finds_it(corpus, data):
    """Known hits: any non-empty selection of a message's own words, in any order, finds that message."""
    session, _ = corpus
    target = data.draw(st.sampled_from(sorted(KNOWN)))
    words = data.draw(st.lists(st.sampled_from(KNOWN[target]), min_size=1, max_size=4))
    query = data.draw(st.sampled_from([" ", "  ", "\n", "　"])).join(words)
    assert target in {h.id for h in session.search(query)}
    assert target in {h.id for h in orm.search(query, session_id="fuzz")}


@FUZZ
@given(noise=st.text(alphabet="qzxjkvw", min_size=6, max_size=12))
def test_a_word_no_message_contains_finds_nothing(corpus, noise):
    """AND semantics: adding a word that occurs nowhere removes every hit."""
    session, provider = corpus
    assert session.search(f"deploy {noise}") == []
    assert provider.search(f"deploy {noise}") == []
