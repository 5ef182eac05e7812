"""Least privilege: a staff user sees of a session what its permissions name, on every admin page linked from it.

A marker with a suffix per place stands in messages (``-msg``), tool calls (``-tool``), summaries
(``-sum``), context blocks and hence the frozen prompt (``-block``) and the model inputs
(``-input``); each user opens the session page, every admin URL linked from it and the app's
changelists, and posts the export action.
"""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.contrib.auth.models import Permission

from tests.support.admin_data import recorded_session

pytestmark = pytest.mark.django_db

MARK = "PQZ7"
BASE = "/admin/agent_sessions"
APP_CHANGELISTS = [
    f"{BASE}/{m}/"
    for m in ("sessionrecord", "message", "compaction", "contextblockrecord", "searchentry", "compactionjob", "apikey")
]
CONTENT = {"msg", "tool", "sum"}

PERMISSION_SETS = {
    # name: (codenames beyond view_sessionrecord, marker suffixes the user may see)
    "metadata only": ([], set()),
    "messages": (["view_message"], CONTENT),
    "messages+blocks": (["view_message", "view_contextblockrecord"], CONTENT | {"block"}),
    "calls only": (["view_modelcallrecord"], set()),
    "messages+calls": (["view_message", "view_modelcallrecord"], CONTENT | {"input"}),
    "export without messages": (["export_sessionrecord"], set()),
    "compact only": (["compact_sessionrecord"], set()),
}


@pytest.fixture
def rec():
    return recorded_session("rec", MARK)


def login(client, django_user_model, codenames: list[str]):
    user = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_sessionrecord", *codenames]))
    client.force_login(user)
    return user


def admin_links(html: str) -> set[str]:
    """Every admin URL of this app the page links to (hrefs and lazily loaded fragments)."""
    found = re.findall(r'(?:href|data-fragment-url|action)="(/admin/agent_sessions/[^"#]*)', html)
    return {unescape(u) for u in found}


def seen_markers(text: str) -> set[str]:
    return set(re.findall(rf"{MARK}-(\w+)", text))


def crawl(client) -> dict[str, tuple[int, set[str]]]:
    """Status and markers of the session page, each admin URL it links to, and the app's changelists."""
    out = {}
    first = client.get(f"{BASE}/sessionrecord/rec/change/")
    out["session page"] = (first.status_code, seen_markers(first.content.decode()))
    for url in sorted(admin_links(first.content.decode()) | set(APP_CHANGELISTS)):
        response = client.get(url)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        out[url] = (response.status_code, seen_markers(body.decode()))
    return out


@pytest.mark.parametrize("name", list(PERMISSION_SETS))
def test_each_permission_set_sees_only_its_part(client, django_user_model, rec, name):
    codenames, allowed = PERMISSION_SETS[name]
    login(client, django_user_model, codenames)
    pages = crawl(client)
    assert pages["session page"][0] == 200
    seen: set[str] = set()
    for url, (status, markers) in pages.items():
        assert status in (200, 403, 404), (url, status)
        assert markers <= allowed, (name, url, markers - allowed)
        seen |= markers
    assert seen == allowed, (name, seen)  # and what it may see is reachable from the session page
    response = client.post(f"{BASE}/sessionrecord/", {"action": "export_json", "_selected_action": ["rec"]})
    assert response.status_code == 403
    assert client.get(f"{BASE}/sessionrecord/rec/export/").status_code == 403


def test_metadata_only_user_gets_403_on_every_content_url(client, django_user_model, rec):
    login(client, django_user_model, [])
    html = client.get(f"{BASE}/sessionrecord/rec/change/").content.decode()
    assert "Weather chat" in html  # the metadata: title, model, counts
    assert "gpt-test" in html
    assert "The conversation needs the view message permission." in html
    for url in (
        f"{BASE}/sessionrecord/rec/tree/",
        f"{BASE}/sessionrecord/rec/tree/fragment/?node=a4",
        f"{BASE}/sessionrecord/rec/tree/text/?node=a4&part=0&field=text",
        f"{BASE}/sessionrecord/rec/model-calls/",
        f"{BASE}/sessionrecord/rec/model-calls/input/?message=a4",
        f"{BASE}/sessionrecord/rec/model-calls/compare/?a=a4&b=a4b",
        f"{BASE}/sessionrecord/rec/export/",
        f"{BASE}/sessionrecord/rec/export/?leaf=a4",
    ):
        assert client.get(url).status_code == 403, url
    assert client.post(f"{BASE}/sessionrecord/rec/compact/").status_code == 403
    assert client.post(f"{BASE}/sessionrecord/rec/fork/", {"at": "u2"}).status_code == 403


def test_session_search_does_not_answer_for_message_words_without_the_permission(client, django_user_model, rec):
    login(client, django_user_model, [])
    html = client.get(f"{BASE}/sessionrecord/", {"q": f"{MARK}-msg"}).content.decode()
    assert "Weather chat" not in html  # which sessions hold a word would tell what they say
    assert "Weather chat" in client.get(f"{BASE}/sessionrecord/", {"q": "Weather"}).content.decode()


def test_export_and_compact_need_their_own_permissions(client, django_user_model, rec):
    login(client, django_user_model, ["view_message", "export_sessionrecord"])
    response = client.post(f"{BASE}/sessionrecord/", {"action": "export_json", "_selected_action": ["rec"]})
    assert response.status_code == 200
    assert f"{MARK}-msg" in b"".join(response.streaming_content).decode()
    assert client.get(f"{BASE}/sessionrecord/rec/export/").status_code == 200
    # compact now: not offered, and 403 when posted, without its own permission
    posted = client.post(f"{BASE}/sessionrecord/", {"action": "compact_now", "_selected_action": ["rec"]})
    assert posted.status_code == 403
    assert client.post(f"{BASE}/sessionrecord/rec/compact/").status_code == 403
    html = client.get(f"{BASE}/sessionrecord/rec/change/").content.decode()
    assert "Compact now" not in html


def test_superuser_sees_every_marker(admin_client, rec):
    seen = set().union(*(markers for _, markers in crawl(admin_client).values()))
    assert seen == {"msg", "tool", "sum", "block", "input"}
