"""Admin pages and actions, through the admin client: lists, search, filters, the tree page, export, fork."""

from __future__ import annotations

import json
import re
import sys
import types

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent_sessions import Session, registry
from agent_sessions.models import Compaction, CompactionJob, ContextBlockRecord, Message, SearchEntry, SessionRecord
from tests.support.admin_data import branched_session, text

pytestmark = pytest.mark.django_db

BASE = "/admin/agent_sessions"


def page(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def path_ids(html: str) -> list[str]:
    """Ids of the top-level items of the rendered path, named as get_history names them."""
    return re.findall(r'data-history-id="([^"]+)"', html)


@pytest.fixture
def chat():
    return branched_session("chat-1")


# ── session list ────────────────────────────────────────────────────────
def test_session_changelist_columns(admin_client, chat):
    SessionRecord.objects.create(id="empty-1", name="Empty one", model="other-model", source="cli")
    html = page(admin_client.get(f"{BASE}/sessionrecord/"))
    row = re.search(r"<tr>.*?chat-1.*?</tr>", html, re.S).group(0)
    assert "Weather chat" in row
    assert "gpt-test" in row
    assert "web" in row
    assert '<td class="field-message_count">7</td>' in row
    assert '<td class="field-tokens">200</td>' in row
    assert '<td class="field-cost">0.0125</td>' in row
    empty = re.search(r"<tr>.*?empty-1.*?</tr>", html, re.S).group(0)
    assert '<td class="field-message_count">0</td>' in empty


def test_session_changelist_query_count_does_not_grow(admin_client, chat, django_assert_max_num_queries):
    """Counts come from a correlated subquery: 3 sessions or 30 cost the same number of queries."""

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            page(admin_client.get(f"{BASE}/sessionrecord/"))
        return len(ctx.captured_queries)

    few = count()
    for i in range(30):
        SessionRecord.objects.create(id=f"many-{i}", name=f"Many {i}", model="m", source="s")
        Session.create().for_session(f"many-{i}").append_message(text(f"x{i}", "user", "hi"))
    assert count() == few
    with django_assert_max_num_queries(12):
        page(admin_client.get(f"{BASE}/sessionrecord/"))


def test_session_search_uses_full_text(admin_client, chat):
    SessionRecord.objects.create(id="other", name="Unrelated")
    Session.create().for_session("other").append_message(text("o1", "user", "Tell me about volcanoes"))
    html = page(admin_client.get(f"{BASE}/sessionrecord/", {"q": "umbrella"}))
    assert "chat-1" in html
    assert "Unrelated" not in html
    html = page(admin_client.get(f"{BASE}/sessionrecord/", {"q": "volcanoes"}))
    assert "Unrelated" in html
    assert "Weather chat" not in html
    html = page(admin_client.get(f"{BASE}/sessionrecord/", {"q": "Unrelated"}))  # name search still works
    assert "Unrelated" in html
    assert "Weather chat" not in html
    html = page(admin_client.get(f"{BASE}/sessionrecord/", {"q": '"(bad AND'}))  # bad syntax never errors
    assert "0 sessions" in html or "0 results" in html


@pytest.mark.parametrize(
    ("query", "shown", "hidden"),
    [
        ({"model": "gpt-test"}, "Weather chat", "Ended one"),
        ({"source": "batch"}, "Ended one", "Weather chat"),
        ({"end_reason": "compaction"}, "Ended one", "Weather chat"),
    ],
)
def test_session_filters(admin_client, chat, query, shown, hidden):
    SessionRecord.objects.create(
        id="ended", name="Ended one", model="gpt-other", source="batch", end_reason="compaction"
    )
    html = page(admin_client.get(f"{BASE}/sessionrecord/", query))
    assert shown in html
    assert hidden not in html


# ── the tree page ───────────────────────────────────────────────────────
def test_change_page_renders_tree(admin_client, chat):
    html = page(admin_client.get(f"{BASE}/sessionrecord/chat-1/change/"))
    # Stats and the active path to the latest leaf.
    assert '<dd data-stat="messages">7</dd>' in html
    assert '<dd data-stat="leaves">2</dd>' in html
    assert '<code data-stat="leaf">a3</code>' in html
    assert path_ids(html) == [m["id"] for m in chat.get_history()]
    assert re.search(r'class="as-msg as-role-assistant as-active as-selected as-focus" id="msg-a3"', html)
    # The other branch is a stub under its parent u2, with a lazy-load URL.
    u2 = html.split('id="msg-u2"', 1)[1].split('id="msg-a2"', 1)[0]
    assert 'data-branch="a2b"' in u2
    assert "tree/fragment/?node=a2b" in u2
    assert "2 branches" in u2
    # The compacted range: summary shown, originals inside a collapsed <details>, tool call readable.
    block = html.split('class="as-compaction"', 1)[1].split('id="msg-u2"', 1)[0]
    assert "User asked about Kyoto weather" in block
    assert "replaces 2 messages (u1 … a1)" in re.sub("<[^>]+>", "", block)
    assert '<details class="as-originals">' in block
    assert 'id="msg-u1"' in block
    assert 'id="msg-a1"' in block
    assert '<details class="as-tool" data-tool="get_weather">' in block
    assert "<strong>get_weather</strong>" in block
    assert "&quot;city&quot;: &quot;Kyoto&quot;" in block
    assert "&quot;tomorrow&quot;: &quot;cloudy&quot;" in block
    # Token figures per message and per path.
    a3 = Message.objects.get(session_id="chat-1", message_id="a3")
    assert f"{a3.tokens} tok · path {a3.path_tokens}" in html
    assert f'<dd data-stat="path">6 messages, {a3.path_tokens} tokens</dd>' in html


def test_selecting_a_leaf_shows_its_history(admin_client, chat):
    html = page(admin_client.get(f"{BASE}/sessionrecord/chat-1/change/", {"leaf": "a2b"}))
    assert '<code data-stat="leaf">a2b</code>' in html
    assert path_ids(html) == [m["id"] for m in chat.get_history("a2b")]
    assert 'data-branch="a2"' in html  # now the main branch is the stub
    assert 'id="msg-a3"' not in html


def test_selecting_an_inner_message_follows_to_its_latest_leaf(admin_client, chat):
    html = page(admin_client.get(f"{BASE}/sessionrecord/chat-1/change/", {"leaf": "u3"}))
    assert '<code data-stat="leaf">a3</code>' in html
    assert re.search(r'class="as-msg as-role-user as-active as-focus" id="msg-u3"', html)


def test_unknown_leaf_falls_back_to_latest(admin_client, chat):
    html = page(admin_client.get(f"{BASE}/sessionrecord/chat-1/change/", {"leaf": "nope"}))
    assert "not in this session" in html
    assert '<code data-stat="leaf">a3</code>' in html


def test_fragment_view_returns_a_branch(admin_client, chat):
    html = page(admin_client.get(f"{BASE}/sessionrecord/chat-1/tree/fragment/", {"node": "a2b"}))
    assert 'id="msg-a2b"' in html
    assert "Alternative answer: sunny everywhere." in html
    assert "<html" not in html  # a fragment, not a page
    assert admin_client.get(f"{BASE}/sessionrecord/chat-1/tree/fragment/", {"node": "zzz"}).status_code == 404
    assert admin_client.get(f"{BASE}/sessionrecord/chat-1/tree/fragment/").status_code == 404


def test_fragment_of_a_long_chain_ends_in_a_continue_stub(admin_client):
    session = Session.create().for_session("long")
    for i in range(70):
        session.append_message(text(f"l{i}", "user", f"line {i}"))
    html = page(admin_client.get(f"{BASE}/sessionrecord/long/tree/fragment/", {"node": "l5"}))
    assert html.count('class="as-msg ') == 50
    assert 'id="msg-l54"' in html
    assert 'id="msg-l55"' not in html
    assert "15 more messages" in html
    assert "node=l55" in html


def test_tree_view_without_registry_row(admin_client):
    Session.create().for_session("loose").append_message(text("z1", "user", "no registry row here"))
    html = page(admin_client.get(f"{BASE}/sessionrecord/loose/tree/"))
    assert "no registry row here" in html
    assert "Messages of loose" in html


def test_empty_session_page(admin_client):
    SessionRecord.objects.create(id="empty", name="Nothing yet")
    html = page(admin_client.get(f"{BASE}/sessionrecord/empty/change/"))
    assert "This session has no messages." in html


def test_tree_pages_need_staff(client, chat):
    response = client.get(f"{BASE}/sessionrecord/chat-1/tree/")
    assert response.status_code == 302
    assert "/login/" in response["Location"]
    assert client.get(f"{BASE}/sessionrecord/chat-1/tree/fragment/", {"node": "a2b"}).status_code == 302


def test_view_only_staff_sees_tree_but_cannot_fork_or_compact(client, chat, django_user_model):
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_sessionrecord", "view_message"]))
    client.force_login(user)
    html = page(client.get(f"{BASE}/sessionrecord/chat-1/tree/"))
    assert 'id="msg-a3"' in html
    assert "fork here" not in html
    assert "Compact now" not in html
    assert client.post(f"{BASE}/sessionrecord/chat-1/fork/", {"at": "u2"}).status_code == 403
    assert client.post(f"{BASE}/sessionrecord/chat-1/compact/").status_code == 403


# ── export and fork ─────────────────────────────────────────────────────
def test_export_session_json(admin_client, chat):
    response = admin_client.get(f"{BASE}/sessionrecord/chat-1/export/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert 'filename="session-chat-1.json"' in response["Content-Disposition"]
    data = json.loads(b"".join(response.streaming_content))
    assert data["session"]["name"] == "Weather chat"
    assert data["session_id"] == "chat-1"
    assert [m["id"] for m in data["messages"]] == ["u1", "a1", "u2", "a2b", "a2", "u3", "a3"]
    assert data["messages"][1]["message"]["parts"][1]["input"] == {"city": "Kyoto", "days": 2}
    assert data["messages"][4]["parent_id"] == "u2"
    assert [(c["from_message_id"], c["to_message_id"]) for c in data["compactions"]] == [("u1", "a1")]


def test_export_branch_history(admin_client, chat):
    response = admin_client.get(f"{BASE}/sessionrecord/chat-1/export/", {"leaf": "a2b"})
    assert response.json()["history"] == chat.get_history("a2b")


def test_export_unknown_session_is_404(admin_client, db):
    assert admin_client.get(f"{BASE}/sessionrecord/nope/export/").status_code == 404


def test_export_action_on_changelist(admin_client, chat):
    SessionRecord.objects.create(id="empty-2", name="Empty")
    response = admin_client.post(
        f"{BASE}/sessionrecord/",
        {
            "action": "export_json",
            "_selected_action": ["chat-1", "empty-2"],
        },
    )
    data = json.loads(b"".join(response.streaming_content))
    assert [d["session_id"] for d in data] == ["chat-1", "empty-2"]
    assert len(data[0]["messages"]) == 7
    assert data[1]["messages"] == []


def test_fork_at_a_message(admin_client, chat):
    response = admin_client.post(f"{BASE}/sessionrecord/chat-1/fork/", {"at": "a2b"})
    fork = SessionRecord.objects.get(parent_session_id="chat-1")
    assert response.status_code == 302
    assert response["Location"] == f"{BASE}/sessionrecord/{fork.pk}/change/"
    assert fork.name == "Weather chat (fork at a2b)"
    assert fork.model == "gpt-test"
    texts = [m["parts"][0]["text"] for m in Session.create().for_session(fork.pk).get_history()]
    assert texts[-2:] == ["Please include tomorrow too.", "Alternative answer: sunny everywhere."]
    assert Message.objects.filter(session_id=fork.pk).count() == 4
    html = page(admin_client.get(response["Location"]))
    assert "Forked" in html
    assert "Alternative answer" in html


def test_fork_of_unknown_message_reports_error(admin_client, chat):
    response = admin_client.post(f"{BASE}/sessionrecord/chat-1/fork/", {"at": "nope"}, follow=True)
    assert "Fork failed" in page(response)
    assert not SessionRecord.objects.filter(parent_session_id="chat-1").exists()
    assert admin_client.get(f"{BASE}/sessionrecord/chat-1/fork/").status_code == 405


# ── the other admins ────────────────────────────────────────────────────
def test_message_changelist_and_full_text_search(admin_client, chat):
    html = page(admin_client.get(f"{BASE}/message/"))
    assert "Yes, take an umbrella today." in html
    assert 'href="/admin/agent_sessions/sessionrecord/chat-1/tree/' in html
    html = page(admin_client.get(f"{BASE}/message/", {"q": "umbrella forecast"}))  # words are ANDed
    assert 'id="result_list"' not in html
    html = page(admin_client.get(f"{BASE}/message/", {"q": "umbrella"}))
    results = html.split('id="result_list"', 1)[1]
    assert "Yes, take an umbrella today." in results
    assert "Thanks! Umbrella then?" in results
    assert "Kyoto" not in results
    html = page(admin_client.get(f"{BASE}/message/", {"q": "a2b"}))  # exact id
    assert "Alternative answer" in html.split('id="result_list"', 1)[1]


def test_message_links_open_the_tree_at_that_message(admin_client, db):
    Session.create().for_session("odd_id/1").append_message(text("q_1 x", "user", "odd ids"))
    html = page(admin_client.get(f"{BASE}/message/"))
    link = re.search(r'href="([^"]*?/tree/\?leaf=[^"]*)"', html).group(1).replace("&amp;", "&")
    assert link == f"{BASE}/sessionrecord/odd_5Fid_2F1/tree/?leaf=q_1+x#msg-q_1%20x"
    tree = page(admin_client.get(link.split("#")[0]))
    assert 'class="as-msg as-role-user as-active as-selected as-focus" id="msg-q_1 x"' in tree


def test_message_filter_by_role(admin_client, chat):
    results = page(admin_client.get(f"{BASE}/message/", {"role": "user"})).split('id="result_list"', 1)[1]
    assert "Thanks! Umbrella then?" in results
    assert "Yes, take an umbrella today." not in results


def test_message_change_page_is_read_only_and_rendered(admin_client, chat):
    row = Message.objects.get(session_id="chat-1", message_id="a1")
    html = page(admin_client.get(f"{BASE}/message/{row.pk}/change/"))
    assert '<details class="as-tool" data-tool="get_weather">' in html
    assert 'name="content"' not in html  # no editable raw JSON
    assert admin_client.get(f"{BASE}/message/add/").status_code == 403


def test_deleting_a_message_in_admin_repairs_children(admin_client, chat):
    row = Message.objects.get(session_id="chat-1", message_id="u3")
    response = admin_client.post(f"{BASE}/message/{row.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    a3 = Message.objects.get(session_id="chat-1", message_id="a3")
    assert a3.parent_id == "u3"
    assert a3.depth == 1
    assert a3.path_tokens == a3.tokens


def test_compaction_admin(admin_client, chat):
    overlay = Compaction.objects.get(session_id="chat-1")
    html = page(admin_client.get(f"{BASE}/compaction/"))
    assert "User asked about Kyoto weather" in html
    assert overlay.compaction_id in html
    html = page(admin_client.get(f"{BASE}/compaction/{overlay.pk}/change/"))
    assert 'name="summary"' in html
    assert 'name="from_message_id"' not in html


def test_context_block_and_search_entry_admins(admin_client, db):
    ContextBlockRecord.objects.create(label="memory_chat-1", content="Likes umbrellas.")
    SearchEntry.objects.create(label="notes", key="kyoto", content="Kyoto is rainy in June.")
    html = page(admin_client.get(f"{BASE}/contextblockrecord/", {"q": "umbrellas"}))
    assert "memory_chat-1" in html
    assert "Likes umbrellas." in html
    assert "memory_chat-1" in page(admin_client.get(f"{BASE}/contextblockrecord/memory_chat-1/change/"))
    html = page(admin_client.get(f"{BASE}/searchentry/", {"label": "notes"}))
    assert "kyoto" in html
    assert "Kyoto is rainy in June." in html
    entry = SearchEntry.objects.get()
    assert "Kyoto is rainy" in page(admin_client.get(f"{BASE}/searchentry/{entry.pk}/change/"))


# ── compact now and the compaction status ───────────────────────────────
class FakeTasks:
    """Stands in for ``tasks.enqueue_compaction``: records the call and a failed job, like a worker would."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def enqueue_compaction(self, config: str, session_id: str, leaf_id=None, *, force: bool = True):
        self.calls.append((config, session_id, leaf_id, force))
        job, _ = CompactionJob.objects.update_or_create(
            session_id=session_id,
            defaults={
                "config_name": config,
                "status": CompactionJob.Status.FAILED,
                "attempts": 2,
                "last_error": "RuntimeError: summarizer exploded",
                "finished_at": timezone.now(),
            },
        )
        return job


@pytest.fixture
def configs(monkeypatch):
    """An isolated configuration registry (other tests' named managers stay out)."""
    monkeypatch.setattr(registry, "_REGISTRY", {})
    monkeypatch.setattr(registry, "_discovered", True)

    def register(*names: str) -> None:
        for name in names:
            registry.register(name, lambda sid: Session.create().for_session(sid))

    return register


@pytest.fixture
def fake_tasks(monkeypatch):
    fake = FakeTasks()
    module = types.ModuleType("agent_sessions.tasks")
    module.enqueue_compaction = fake.enqueue_compaction
    monkeypatch.setitem(sys.modules, "agent_sessions.tasks", module)
    return fake


def test_compact_now_enqueues_and_shows_failure_status(admin_client, chat, configs, fake_tasks):
    configs("support")
    response = admin_client.post(
        f"{BASE}/sessionrecord/chat-1/compact/",
        {"next": f"{BASE}/sessionrecord/chat-1/change/", "leaf": "a2b"},
        follow=True,
    )
    html = page(response)
    assert fake_tasks.calls == [("support", "chat-1", "a2b", True)]  # the selected branch, forced
    assert "Compaction of &#x27;chat-1&#x27; enqueued with configuration &#x27;support&#x27;; job failed." in html
    assert "failed: RuntimeError: summarizer exploded" in html  # the admin message
    status = html.split('class="as-status errornote" data-compaction-state="failed"', 1)[1].split("</p>", 1)[0]
    assert "<strong>failed</strong>" in status
    assert "2 attempts" in status
    assert "summarizer exploded" in status
    listing = page(admin_client.get(f"{BASE}/sessionrecord/", {"compaction": "failed"}))
    assert '<span class="as-failed">failed</span>' in listing
    assert "Weather chat" in listing
    assert "Weather chat" not in page(admin_client.get(f"{BASE}/sessionrecord/", {"compaction": "none"}))
    jobs = page(admin_client.get(f"{BASE}/compactionjob/", {"status": "failed"}))
    assert "RuntimeError: summarizer exploded" in jobs
    assert "chat-1" in jobs


def test_compact_now_needs_a_configuration(admin_client, chat, configs, fake_tasks):
    html = page(admin_client.post(f"{BASE}/sessionrecord/chat-1/compact/", follow=True))
    assert "No compaction configuration chosen" in html
    assert fake_tasks.calls == []
    configs("alpha", "beta")  # two: the page offers a choice, and the POST must name one
    html = page(admin_client.get(f"{BASE}/sessionrecord/chat-1/change/"))
    assert '<select name="config"><option>alpha</option><option>beta</option></select>' in html
    page(admin_client.post(f"{BASE}/sessionrecord/chat-1/compact/", {"config": "beta"}, follow=True))
    assert fake_tasks.calls == [("beta", "chat-1", None, True)]
    assert admin_client.get(f"{BASE}/sessionrecord/chat-1/compact/").status_code == 405


def test_compact_now_without_the_tasks_module(admin_client, chat, configs, monkeypatch):
    configs("support")
    monkeypatch.setitem(sys.modules, "agent_sessions.tasks", types.ModuleType("agent_sessions.tasks"))
    html = page(admin_client.post(f"{BASE}/sessionrecord/chat-1/compact/", follow=True))
    assert "The compaction task (agent_sessions.tasks) is not available." in html


def test_compact_now_changelist_action(admin_client, chat, configs, fake_tasks):
    configs("support")
    SessionRecord.objects.create(id="second", name="Second")
    response = admin_client.post(
        f"{BASE}/sessionrecord/",
        {
            "action": "compact_now",
            "_selected_action": ["chat-1", "second"],
        },
        follow=True,
    )
    page(response)
    assert sorted(fake_tasks.calls) == [("support", "chat-1", None, True), ("support", "second", None, True)]


def test_compact_now_runs_the_real_task(admin_client, chat, configs):
    """Eager Celery: the manager's compaction function runs, an overlay is stored, the job succeeds."""
    from agent_sessions.manager import SessionManager
    from agent_sessions.types import CompactResult

    def compact(messages, context=None):
        return CompactResult(from_message_id="u2", to_message_id="a2", summary="They settled on cloudy.")

    SessionManager(name="admin-real").on_compaction(compact)
    html = page(admin_client.post(f"{BASE}/sessionrecord/chat-1/compact/", {"leaf": "a3"}, follow=True))
    assert "job succeeded" in html
    assert 'data-compaction-state="succeeded"' in html
    assert Compaction.objects.filter(session_id="chat-1", summary="They settled on cloudy.").exists()
    html = page(admin_client.get(f"{BASE}/sessionrecord/chat-1/change/"))
    assert "They settled on cloudy." in html
    assert path_ids(html) == [m["id"] for m in Session.create().for_session("chat-1").get_history()]


def test_compact_now_records_a_real_failure(admin_client, chat, configs):
    from agent_sessions.manager import SessionManager

    def broken(messages, context=None):
        raise RuntimeError("summarizer is down")

    SessionManager(name="admin-broken").on_compaction(broken)
    html = page(admin_client.post(f"{BASE}/sessionrecord/chat-1/compact/", follow=True))
    assert 'class="as-status errornote" data-compaction-state="failed"' in html
    assert "summarizer is down" in html


# ── API keys ────────────────────────────────────────────────────────────
def test_api_key_issue_shows_token_once_and_stores_digest(admin_client, admin_user):
    from agent_sessions.credentials import digests_match
    from agent_sessions.models import ApiKey

    response = admin_client.post(f"{BASE}/apikey/add/", {"owner": admin_user.pk, "name": "ci bot"}, follow=True)
    html = page(response)
    token = re.search(r"will not be shown again: (\S+?)</li>", html).group(1)
    key = ApiKey.objects.get()
    assert key.name == "ci bot"
    assert key.owner == admin_user
    assert token.startswith(key.prefix)
    assert digests_match(token, key.hashed_secret)
    assert token not in key.hashed_secret
    assert token not in page(admin_client.get(f"{BASE}/apikey/{key.pk}/change/"))
    admin_client.post(f"{BASE}/apikey/", {"action": "revoke", "_selected_action": [key.pk]})
    key.refresh_from_db()
    assert key.revoked


def test_add_session_page(admin_client, db):
    html = page(admin_client.get(f"{BASE}/sessionrecord/add/"))
    assert 'name="id"' in html
    assert 'id="as-tree"' not in html
    response = admin_client.post(f"{BASE}/sessionrecord/add/", {"id": "new-1", "name": "New", "model": "m"})
    assert response.status_code == 302
    assert SessionRecord.objects.get(pk="new-1").name == "New"
