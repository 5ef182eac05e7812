"""JSON API authentication (API keys, login sessions with CSRF) and ownership on every route."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.contrib.admin import AdminSite
from django.contrib.messages.storage.fallback import FallbackStorage
from django.core.management import CommandError, call_command
from django.test import Client, RequestFactory
from django.utils import timezone

from agent_sessions.admin.api_keys import ApiKeyAdmin
from agent_sessions.credentials import hash_token
from agent_sessions.models import ApiKey, Message, SessionRecord
from tests.support.api import Api, ui

pytestmark = pytest.mark.django_db

# Every route under a session: (method, path after /sessions/{sid}, body).
SESSION_ROUTES = [
    ("get", "", None),
    ("patch", "", {"name": "x"}),
    ("delete", "", None),
    ("post", "/fork", {"at_message_id": "m1", "name": "f"}),
    ("post", "/forks", {"at_message_id": "m1", "name": "f"}),
    ("get", "/fork-mapping", None),
    ("get", "/children", None),
    ("post", "/end", {"reason": "done"}),
    ("get", "/usage", None),
    ("post", "/usage/increments", {"input_tokens": 1}),
    ("get", "/messages", None),
    ("delete", "/messages", None),
    ("delete", "/messages/m1", None),
    ("post", "/message-deletions", {"ids": ["m1"]}),
    ("get", "/message-count", None),
    ("get", "/recent-history?max_content_bytes=1000", None),
    ("post", "/compaction-requests", {}),
    ("get", "/compaction-status", None),
    ("get", "/compactions/c1", None),
    ("delete", "/compactions/c1", None),
    ("get", "/system-prompt", None),
    ("post", "/split", {"summary": "s"}),
    ("post", "/usage", {"input_tokens": 1}),
    ("post", "/messages", {"message": ui("m9")}),
    ("put", "/messages", {"message": ui("m9")}),
    ("post", "/delete-messages", {"ids": ["m1"]}),
    ("get", "/messages/m1", None),
    ("get", "/messages/m1/model-input", None),
    ("get", "/model-calls", None),
    ("put", "/messages/m1", ui("m1", "changed")),
    ("get", "/history", None),
    ("get", "/branches?message_id=m1", None),
    ("get", "/leaf", None),
    ("get", "/path-length", None),
    ("get", "/search?q=hello", None),
    ("post", "/compact", {}),
    ("get", "/compact", None),
    ("get", "/compactions", None),
    ("post", "/compactions", {"summary": "s", "from_message_id": "m1", "to_message_id": "m1"}),
    ("get", "/context", None),
    ("get", "/context/memory", None),
    ("put", "/context/memory", {"content": "x"}),
    ("post", "/context/memory/append", {"content": "x"}),
    ("post", "/system-prompt/freeze", None),
    ("post", "/system-prompt/refresh", None),
    ("get", "/tools", None),
    ("post", "/tools/set_context", {"arguments": {"label": "memory", "content": "x"}}),
]


def call(client: Api, method: str, path: str, body):
    if "?" in path:
        path, query = path.split("?")
        params = dict(p.split("=") for p in query.split("&"))
    else:
        params = {}
    if method == "get":
        return client.get(path, **params)
    if method == "delete":
        return client.delete(path)
    return getattr(client, method)(path, body)


@pytest.fixture
def alices_session(api):
    sid = api.new_session("Alice's")
    api.append(sid, "m1", "hello there")
    api.put(f"/sessions/{sid}/context/memory", {"content": "alice's fact"})
    return sid


def test_route_table_covers_every_session_operation():
    from agent_sessions.api.main import api as ninja_api

    schema = ninja_api.get_openapi_schema()
    documented = {
        (method, path.removeprefix("/api/sessions/{session_id}"))
        for path, operations in schema["paths"].items()
        if path.startswith("/api/sessions/{session_id}")
        for method in operations
    }
    covered = {
        (
            m,
            p.split("?")[0]
            .replace("/m1", "/{message_id}")
            .replace("/memory", "/{label}")
            .replace("/set_context", "/{name}")
            .replace("/c1", "/{compaction_id}"),
        )
        for m, p, _ in SESSION_ROUTES
    }
    assert documented == covered


@pytest.mark.parametrize(
    ("method", "path", "body"), SESSION_ROUTES, ids=[f"{m} {p or '/'}" for m, p, _ in SESSION_ROUTES]
)
def test_another_owner_gets_404_and_changes_nothing(bob_api, alices_session, method, path, body):
    before = (
        list(Message.objects.filter(session_id=alices_session).values_list("message_id", "content")),
        SessionRecord.objects.get(id=alices_session).name,
        SessionRecord.objects.count(),
    )
    response = call(bob_api, method, f"/sessions/{alices_session}{path}", body)
    assert response.status_code == 404, response.content
    assert response.json() == {"detail": "No such session.", "code": "session_not_found"}
    after = (
        list(Message.objects.filter(session_id=alices_session).values_list("message_id", "content")),
        SessionRecord.objects.get(id=alices_session).name,
        SessionRecord.objects.count(),
    )
    assert after == before


@pytest.mark.parametrize(
    ("method", "path", "body"), SESSION_ROUTES, ids=[f"{m} {p or '/'}" for m, p, _ in SESSION_ROUTES]
)
def test_unauthenticated_gets_401_on_every_route(anon, alices_session, method, path, body):
    response = call(anon, method, f"/sessions/{alices_session}{path}", body)
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    assert response["WWW-Authenticate"] == "Bearer"


def test_unknown_session_is_the_same_404(api):
    response = api.get("/sessions/does-not-exist")
    assert response.status_code == 404
    assert response.json() == {"detail": "No such session.", "code": "session_not_found"}


def test_lists_and_search_are_scoped_by_owner(api, bob_api, alices_session):
    assert bob_api.get("/sessions").json()["count"] == 0
    assert bob_api.get("/search", q="hello").json()["results"] == []
    assert [r["id"] for r in api.get("/search", q="hello").json()["results"]] == ["m1"]


def test_staff_see_and_change_every_session(staff_api, alices_session):
    assert staff_api.get(f"/sessions/{alices_session}").status_code == 200
    assert staff_api.get("/sessions").json()["count"] == 1
    assert staff_api.patch(f"/sessions/{alices_session}", {"name": "moderated"}).json()["name"] == "moderated"
    assert staff_api.get(f"/sessions/{alices_session}/context/memory").json()["content"] == "alice's fact"


def test_sessions_without_owner_are_staff_only(api, staff_api):
    SessionRecord.objects.create(id="orphan", name="from python")
    assert api.get("/sessions/orphan").status_code == 404
    assert staff_api.get("/sessions/orphan").status_code == 200


# ── API keys ────────────────────────────────────────────────────────
@pytest.mark.parametrize(
    "header",
    ["Bearer", "Bearer ", "Bearer wrong", "Bearer ask_" + "x" * 43, "Basic dXNlcjpwdw==", "Token abc", "Bearer \x7f"],
)
def test_bad_credentials_are_401(header):
    response = Client().get("/api/sessions", headers={"Authorization": header})
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_key_storage_and_revocation(alice):
    key, token = ApiKey.issue(alice, "ci")
    assert token.startswith("ask_")
    assert len(token) >= 40
    assert key.prefix == token[:12]
    assert key.hashed_secret == hash_token(token)
    assert token not in key.hashed_secret
    client = Api(token)
    assert client.get("/sessions").status_code == 200
    key.refresh_from_db()
    assert key.last_used_at is not None
    ApiKey.objects.filter(pk=key.pk).update(revoked=True)
    assert client.get("/sessions").status_code == 401


def test_last_used_is_written_at_most_once_a_minute(alice):
    key, token = ApiKey.issue(alice)
    client = Api(token)
    client.get("/sessions")
    key.refresh_from_db()
    first = key.last_used_at
    client.get("/sessions")
    key.refresh_from_db()
    assert key.last_used_at == first
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now() - timedelta(minutes=5))
    client.get("/sessions")
    key.refresh_from_db()
    assert key.last_used_at > first


def test_the_compiled_key_lookup_loads_what_the_orm_loads(alice, staff_user):
    """The lookup compiled once per database returns the ORM's keys and owners, field for field
    (SQLite's text datetimes and integer booleans converted), and only unrevoked keys of that prefix."""
    from agent_sessions.api.auth import _candidates

    key, token = ApiKey.issue(alice, "one")
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now() - timedelta(minutes=5))
    ApiKey.issue(staff_user, "other")
    revoked, revoked_token = ApiKey.issue(alice, "revoked")
    ApiKey.objects.filter(pk=revoked.pk).update(revoked=True)

    (found,) = _candidates(token[:12])
    expected = ApiKey.objects.select_related("owner").get(pk=key.pk)
    for model_field in ApiKey._meta.concrete_fields:
        assert getattr(found, model_field.attname) == getattr(expected, model_field.attname), model_field.name
    for user_field in type(alice)._meta.concrete_fields:
        assert getattr(found.owner, user_field.attname) == getattr(expected.owner, user_field.attname), user_field.name
    assert isinstance(found.last_used_at, type(expected.last_used_at))
    assert found.owner.is_active is True
    assert not found._state.adding
    assert found._state.db == expected._state.db
    assert _candidates(revoked_token[:12]) == []


def test_inactive_owner_is_401(alice):
    _, token = ApiKey.issue(alice)
    alice.is_active = False
    alice.save()
    assert Api(token).get("/sessions").status_code == 401


def test_create_api_key_command(alice):
    out, err = io.StringIO(), io.StringIO()
    call_command("create_api_key", "alice", "--name", "laptop", stdout=out, stderr=err)
    token = out.getvalue().strip()
    key = ApiKey.objects.get(owner=alice)
    assert key.name == "laptop"
    assert key.hashed_secret == hash_token(token)
    assert key.prefix in err.getvalue()
    assert Api(token).get("/sessions").status_code == 200
    with pytest.raises(CommandError, match="No user named"):
        call_command("create_api_key", "nobody", stdout=io.StringIO(), stderr=io.StringIO())


def test_key_issued_in_the_admin_authenticates_the_api(alice, staff_user):
    request = RequestFactory().post("/admin/")
    request.user = staff_user
    request.session = {}
    request._messages = FallbackStorage(request)
    key = ApiKey(owner=alice, name="from admin")
    ApiKeyAdmin(ApiKey, AdminSite()).save_model(request, key, form=None, change=False)
    [message] = list(request._messages)
    token = str(message).rsplit(" ", 1)[-1]
    assert ApiKey.objects.get(pk=key.pk).hashed_secret == hash_token(token)
    assert Api(token).get("/sessions").status_code == 200


# ── Django login sessions ───────────────────────────────────────────
def test_login_session_reads_without_csrf(alice):
    client = Client()
    client.force_login(alice)
    assert client.get("/api/sessions").status_code == 200


def test_login_session_needs_csrf_for_writes(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    refused = client.post("/api/sessions", data='{"name": "x"}', content_type="application/json")
    assert refused.status_code == 403
    assert refused.json()["code"] == "csrf_failed"
    client.get("/admin/login/")  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    created = client.post(
        "/api/sessions", data='{"name": "x"}', content_type="application/json", headers={"X-CSRFToken": token}
    )
    assert created.status_code == 201
    assert SessionRecord.objects.get(id=created.json()["id"]).owner == alice


def test_anonymous_write_is_401_not_403():
    client = Client(enforce_csrf_checks=True)
    response = client.post("/api/sessions", data='{"name": "x"}', content_type="application/json")
    assert response.status_code == 401
