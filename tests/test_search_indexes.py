"""Postgres search indexes: the (session_id, content_tsv) GIN index, the
trigram index over non-ASCII rows only, on a filled database, and plans."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from agent_sessions import Session
from tests.conftest import msg
from tests.support.scratch import run_with, scratch_database

pytestmark = pytest.mark.postgres_only

_SETUP = "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'project.settings'); django.setup()\n"
_FILL = _SETUP + (
    "from agent_sessions import Session\n"
    "texts = ['deploy the kite on Friday', '金曜日にデプロイします', 'a café kite', 'plain english words',\n"
    "         'デプロイ kite 確認', 'another kite']\n"
    "for sid in ('alpha', 'beta'):\n"
    "    s = Session.create().for_session(sid)\n"
    "    for i, t in enumerate(texts):\n"
    "        s.append_message({'id': f'm{i}', 'role': 'user', 'parts': [{'type': 'text', 'text': t}]})\n"
)
_READ = _SETUP + (
    "import json\nfrom agent_sessions import Session, SessionManager\n"
    "s = Session.create().for_session('alpha')\n"
    "out = {q: [h.id for h in s.search(q)] for q in ('kite', 'deploy friday', 'デプロイ', 'デプロイ kite', 'café')}\n"
    "out['cross'] = sorted((h.session_id, h.id) for h in SessionManager().search('kite'))\n"
    "out['cross_cjk'] = sorted((h.session_id, h.id) for h in SessionManager().search('デプロイ'))\n"
    "print(json.dumps(out))\n"
)
_INDEXES = _SETUP + (
    "import json\nfrom django.db import connection\nc = connection.cursor()\n"
    "c.execute(\"SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'assistant_messages' AND \"\n"
    "          \"indexname IN ('idx_assistant_msg_fts', 'idx_assistant_msg_session_fts', 'idx_assistant_msg_trgm')\")\n"
    "print(json.dumps(dict(c.fetchall())))\n"
)
_EXPECTED = {
    "kite": ["m0", "m2", "m4", "m5"],
    "deploy friday": ["m0"],
    "デプロイ": ["m1", "m4"],
    "デプロイ kite": ["m4"],
    "café": ["m2"],
}


def _indexes(url: str) -> dict[str, str]:
    return json.loads(run_with(url, "-c", _INDEXES).strip().splitlines()[-1])


def _reads(url: str) -> dict:
    out = json.loads(run_with(url, "-c", _READ).strip().splitlines()[-1])
    assert {q: sorted(out[q]) for q in _EXPECTED} == _EXPECTED
    assert out["cross"] == [[sid, m] for sid in ("alpha", "beta") for m in _EXPECTED["kite"]]
    assert out["cross_cjk"] == [[sid, m] for sid in ("alpha", "beta") for m in _EXPECTED["デプロイ"]]
    return out


def test_a_filled_database_has_the_session_keyed_indexes_and_finds_every_hit():
    with scratch_database() as url:
        run_with(url, "manage.py", "migrate", "--noinput", "-v0")
        run_with(url, "-c", _FILL)
        _reads(url)
        new = _indexes(url)
        assert set(new) == {"idx_assistant_msg_session_fts", "idx_assistant_msg_trgm"}
        assert new["idx_assistant_msg_session_fts"].endswith(
            "USING gin (session_id, content_tsv) WITH (gin_pending_list_limit='256')"
        )
        assert "WHERE (octet_length(text_content) <> char_length(text_content))" in new["idx_assistant_msg_trgm"]


def _plan(sql: str, params: list) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(r[0] for r in cursor.fetchall())


def _compiled(query: str, scope: str | None) -> tuple[str, list]:
    from agent_sessions import conf
    from agent_sessions.search import tsquery
    from agent_sessions.search.args import as_query
    from agent_sessions.search.plan import MESSAGES, Filters

    return tsquery.compile_query(as_query(query), MESSAGES, Filters(scope=scope), conf.pg_text_search_config())


@pytest.mark.django_db(transaction=True)
def test_substring_search_can_use_the_partial_trigram_index(session_id):
    session = Session.create().for_session(session_id)
    session.append_message(msg("a", text="金曜日にデプロイします"))
    session.append_message(msg("b", text="plain english"))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE assistant_messages")
    from django.db import transaction

    with transaction.atomic():
        plan = _plan(*_compiled("デプロイ", None))
    assert "idx_assistant_msg_trgm" in plan
    assert [h.id for h in session.search("デプロイ")] == ["a"]


@pytest.mark.django_db(transaction=True)
def test_the_tsquery_is_a_constant_the_planner_can_read(session_id):
    """No CTE hides the query from the planner: the plan shows the folded tsquery itself."""
    from django.db import transaction

    with transaction.atomic():
        plan = _plan(*_compiled("kite -storm", session_id))
    assert "CTE" not in plan
    assert "content_tsv @@ '''kite'' & !''storm'''::tsquery" in plan
    with transaction.atomic():  # across sessions: the same GIN index, by its content_tsv column
        assert "Bitmap Index Scan on idx_assistant_msg_session_fts" in _plan(*_compiled("kite", None))
