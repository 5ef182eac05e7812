"""The query language's parser: pure Python, no database."""

from __future__ import annotations

import pytest

from agent_sessions.search.query import MAX_TERMS, AnyOf, Query, Term, parse

pytestmark = pytest.mark.no_database  # runs once, in the SQLite run (tests/conftest.py)


def groups(query: Query) -> list[list[str]]:
    return [[t.text for t in g.terms] for g in query.groups]


def test_words_are_separate_required_groups():
    q = parse("deploy  friday")
    assert groups(q) == [["deploy"], ["friday"]]
    assert q.excluded == ()


def test_phrase_and_unterminated_phrase():
    q = parse('"deploy the database" "on fri')
    assert q.groups == (AnyOf((Term("deploy the database", True),)), AnyOf((Term("on fri", True),)))


def test_or_binds_tighter_than_and():
    assert groups(parse("a b OR c OR d e")) == [["a"], ["b", "c", "d"], ["e"]]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("OR", [["OR"]]),
        ("OR a", [["OR"], ["a"]]),
        ("a OR", [["a"], ["OR"]]),
        ("a or b", [["a"], ["or"], ["b"]]),
        ('a "OR" b', [["a"], ["OR"], ["b"]]),
        ("a OR -b", [["a"], ["OR"]]),
    ],
)
def test_or_is_literal_where_it_cannot_be_an_operator(text, expected):
    assert groups(parse(text)) == expected


def test_exclusions():
    q = parse('deploy -friday -"late night" pre-release')
    assert groups(q) == [["deploy"], ["pre-release"]]
    assert q.excluded == (Term("friday"), Term("late night", True))


def test_only_exclusions_match_nothing():
    assert not parse("-friday")
    assert parse("-friday").words() == []


@pytest.mark.parametrize("text", ["", "   ", "*", "-", '"', '""', "- -", "&&", "\x00", "\ud800"])
def test_nothing_matchable_is_empty(text):
    assert not parse(text)


def test_control_characters_and_surrogates_separate_words():
    assert groups(parse("a\x00b\ud800c")) == [["a"], ["b"], ["c"]]


def test_non_text_is_empty():
    assert not parse(None)
    assert not parse(42)
    assert not parse(["a"])


def test_cjk_classification():
    q = parse("会議 デプロイ Python入門 deploy")
    short, long_, mixed, latin = q.terms
    assert short.cjk
    assert short.short
    assert long_.cjk
    assert not long_.short
    assert mixed.cjk
    assert not mixed.short
    assert not latin.cjk


def test_duplicates_collapse_and_terms_are_capped():
    assert groups(parse("word " * 2000)) == [["word"]]
    many = parse(" ".join(f"w{i}" for i in range(500)))
    assert len(many.terms) == MAX_TERMS


def test_max_length_truncates():
    assert groups(parse("alpha beta", max_length=5)) == [["alpha"]]
