"""The chat's resume and stop routes (SPEC §10) before resumable generations exist: 204, with the POST's checks."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from agent_sessions import Session
from agent_sessions.models import ApiKey
from tests.conftest import msg
from tests.support.api import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.support.chat_urls")]


@pytest.fixture
def owner_and_other(django_user_model):
    owner = make_user(django_user_model, f"owner-{uuid.uuid4().hex[:6]}")
    other = make_user(django_user_model, f"other-{uuid.uuid4().hex[:6]}")
    return (owner, ApiKey.issue(owner, "k")[1]), (other, ApiKey.issue(other, "k")[1])


def test_resume_and_stop_answer_204_when_nothing_is_active(owner_and_other):
    (owner, token), _ = owner_and_other
    chat_id = f"chat-{uuid.uuid4().hex}"
    Session.create(owner=owner).for_session(chat_id).append_message(msg("u1"))
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    client = Client()
    assert client.get(f"/api/chat/{chat_id}/stream", **auth).status_code == 204
    assert client.delete(f"/api/chat/{chat_id}/stream", **auth).status_code == 204
    assert client.post(f"/api/chat/{chat_id}/stop", **auth).status_code == 204
    # a chat not created yet: a client resumes on page load, before its first message
    assert client.get(f"/api/chat/new-{uuid.uuid4().hex}/stream", **auth).status_code == 204
    assert client.get(f"/api/chat/{chat_id}/stop", **auth).status_code == 405


def test_another_owners_chat_is_a_404_and_no_credential_a_401(owner_and_other):
    (owner, _), (_, other_token) = owner_and_other
    chat_id = f"chat-{uuid.uuid4().hex}"
    Session.create(owner=owner).for_session(chat_id).append_message(msg("u1"))
    client = Client()
    response = client.get(f"/api/chat/{chat_id}/stream", HTTP_AUTHORIZATION=f"Bearer {other_token}")
    assert response.status_code == 404
    assert response.json() == {"detail": "No such session.", "code": "session_not_found"}
    assert client.post(f"/api/chat/{chat_id}/stop", HTTP_AUTHORIZATION=f"Bearer {other_token}").status_code == 404
    assert client.get(f"/api/chat/{chat_id}/stream").status_code == 401
