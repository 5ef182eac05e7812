"""Access control: the admin is staff-only, tools run only on owned sessions and
see only owned data, API keys are stored hashed.  (Per-route API ownership is covered
route by route in tests/test_api_auth.py, including a check that the route table is complete.)"""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse

from agent_sessions.manager import SessionManager
from agent_sessions.models import ApiKey, Message, SessionRecord
from tests.support.api import Api, make_user

pytestmark = pytest.mark.django_db


def _admin_urls(session_id: str) -> list[str]:
    urls = []
    for model in admin.site._registry:
        if model._meta.app_label != "agent_sessions":
            continue
        prefix = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        urls.append(reverse(f"{prefix}_changelist"))
        urls.append(reverse(f"{prefix}_add"))
    urls.append(reverse("admin:app_list", args=["agent_sessions"]))
    prefix = f"admin:agent_sessions_{SessionRecord._meta.model_name}"
    urls.extend(
        reverse(f"{prefix}_{suffix}", args=[session_id])
        for suffix in ("change", "tree", "tree_fragment", "export", "compact", "fork")
    )
    return urls


@pytest.fixture
def chat():
    manager = SessionManager()
    info = manager.create("private")
    manager.append(info.id, {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "secret plan"}]})
    return info.id


def test_admin_is_staff_only(django_user_model, chat):
    urls = _admin_urls(chat)
    assert len(urls) >= 15
    anonymous = Client()
    member = Client()
    member.force_login(make_user(django_user_model, "member"))
    for url in urls:
        for client in (anonymous, member):
            for method in ("get", "post"):
                response = getattr(client, method)(url)
                assert response.status_code == 302, (method, url)
                assert "/admin/login/" in response["Location"], (method, url)
    assert Message.objects.filter(session_id=chat).count() == 1  # posts changed nothing
    assert SessionRecord.objects.count() == 1
    staff = Client()
    staff.force_login(make_user(django_user_model, "boss", is_staff=True, is_superuser=True))
    assert staff.get(reverse("admin:agent_sessions_sessionrecord_tree", args=[chat])).status_code == 200


def test_tools_run_only_on_owned_sessions_and_search_only_owned_data(api, bob_api):
    alice_sid = api.new_session("alice")
    api.append(alice_sid, "a1", "shared keyword alice secret")
    bob_sid = bob_api.new_session("bob")
    bob_api.append(bob_sid, "b1", "shared keyword bob secret")
    # Bob cannot list or run tools of Alice's session.
    assert bob_api.get(f"/sessions/{alice_sid}/tools").status_code == 404
    response = bob_api.post(f"/sessions/{alice_sid}/tools/session_search", {"arguments": {"query": "shared"}})
    assert response.status_code == 404
    # On his own session, session_search sees only his sessions.
    result = bob_api.post(f"/sessions/{bob_sid}/tools/session_search", {"arguments": {"query": "shared keyword"}})
    assert result.status_code == 200
    assert "bob secret" in result.json()["result"]
    assert "alice" not in result.json()["result"]
    # A context write through a tool lands in his own session's block only.
    bob_api.post(f"/sessions/{bob_sid}/tools/set_context", {"arguments": {"label": "memory", "content": "bob fact"}})
    assert "bob fact" not in api.get(f"/sessions/{alice_sid}/context/memory").json()["content"]


def test_api_keys_are_stored_hashed(alice):
    key, token = ApiKey.issue(alice, "ci")
    row = ApiKey.objects.filter(pk=key.pk).values().get()
    assert all(token not in str(value) for value in row.values())
    assert token[12:] not in str(row)
    assert Api(token).get("/sessions").status_code == 200
    assert Api(token[:-1] + ("A" if token[-1] != "A" else "B")).get("/sessions").status_code == 401
