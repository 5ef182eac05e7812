"""SQLite: all-ASCII message text stays out of the trigram index, which only substring
terms read, and those always hold a character of an unspaced script; substring search is unchanged."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.conftest import msg
from tests.support.search_docs import ids

pytestmark = pytest.mark.sqlite_only


def trigram_hits(term: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM assistant_fts_trigram WHERE assistant_fts_trigram MATCH %s", [term])
        return cursor.fetchone()[0]


def fill(session) -> None:
    session.append_message(msg("en", text="plain english words"))
    session.append_message(msg("ja", text="東京の天気は晴れ"))
    session.append_message(msg("mix", text="english weather in 東京の空"))


def test_ascii_rows_are_not_trigram_indexed_and_substring_search_still_finds(session):
    fill(session)
    assert trigram_hits('"lish"') == 1  # only the mixed row: the English one is left out
    assert trigram_hits('"東京の"') == 2
    assert ids(session.search("東京")) == {"ja", "mix"}
    assert ids(session.search("english")) == {"en", "mix"}  # words come from the porter index
    session.update_message(msg("en", text="english in 大阪"))  # now non-ASCII: indexed
    session.update_message(msg("mix", text="english only"))  # now ASCII: left out
    assert trigram_hits('"lish"') == 1
    assert ids(session.search("大阪")) == {"en"}
    assert ids(session.search("東京")) == {"ja"}
    session.delete_messages(["ja"])
    assert ids(session.search("東京")) == set()
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO assistant_fts_trigram(assistant_fts_trigram, rank) VALUES ('integrity-check', 1)")
