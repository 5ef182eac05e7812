"""The JSON API conventions against a real gunicorn (3 workers × 4 threads, the shipped ``gunicorn.conf.py``):
racing upserts, chunked bodies, URL lengths and the JSON shape of errors gunicorn's WSGI path produces.

Each test's docstring gives the curl equivalent (``$B`` = the API root, ``$H`` = the Bearer header).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from django.conf import settings
from django.db import connection

from agent_sessions.models import ApiKey, Message

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = Path(sys.executable).parent / "gunicorn"
RACERS = 20


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    """``http://127.0.0.1:<port>`` of gunicorn (cwd = the repository, so its gunicorn.conf.py applies); one per
    module, on the test database (each test's rows are flushed, the server stays)."""
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "AGENT_SESSIONS_TEST_DB": settings.DB,
        "AGENT_SESSIONS_DB_NAME": str(connection.settings_dict["NAME"]),
    }
    command = [str(GUNICORN), "project.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "3", "--threads", "4"]
    # Its output goes to a file: a pipe nobody reads fills up and blocks the server's logging.
    log = tmp_path_factory.mktemp("gunicorn") / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                pytest.fail(f"gunicorn exited early:\n{log.read_text(errors='replace')}")
            try:
                if httpx.get(f"{base}/api/openapi.json", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("gunicorn did not answer within 300 s")
            time.sleep(0.3)
        yield base
    finally:
        print("gunicorn's log (shown when a test of this module fails):")
        print("\n".join(log.read_text(errors="replace").splitlines()[-40:]))
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def client(server, django_user_model):
    user = django_user_model.objects.create_user("conventions", "conventions@example.com", "pw")
    _, token = ApiKey.issue(user, "e2e")
    # gunicorn closes a keep-alive connection after 2 idle seconds (its default keepalive); httpx keeps one
    # for 5.  A request sent on a connection the server is closing at that moment is reset, so the client
    # lets idle connections go first.
    limits = httpx.Limits(keepalive_expiry=1.0)
    with httpx.Client(
        base_url=f"{server}/api", headers={"Authorization": f"Bearer {token}"}, timeout=60, limits=limits
    ) as c:
        yield c


def ui(mid: str, text: str = "hello") -> dict:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


def assert_json_error(response: httpx.Response, status: int, code: str | None = None) -> None:
    assert response.status_code == status, response.text[:300]
    assert response.headers["content-type"].startswith("application/json"), response.text[:300]
    body = response.json()
    assert body["detail"]
    assert body["code"]
    if code:
        assert body["code"] == code


@pytest.mark.parametrize("route", ["collection", "item"])
def test_racing_upserts_report_one_insert(client, route):
    """20 × in parallel: curl -X PUT -H "$H" -d '{"message":{"id":"race",…}}' $B/sessions/$S/messages
    (and PUT $B/sessions/$S/messages/race)  → exactly one 201 ``inserted: true``, one row."""
    sid = client.post("/sessions", json={"name": "race"}).json()["id"]
    client.post(f"/sessions/{sid}/messages", json={"message": ui("root")})

    def put(i: int) -> httpx.Response:
        if route == "collection":
            return client.put(f"/sessions/{sid}/messages", json={"message": ui("race", f"writer {i}")})
        return client.put(f"/sessions/{sid}/messages/race", json=ui("race", f"writer {i}"))

    for attempt in range(3):  # three rounds, each with a fresh id
        if attempt:
            client.delete(f"/sessions/{sid}/messages/race")
        with ThreadPoolExecutor(RACERS) as pool:
            responses = list(pool.map(put, range(RACERS)))
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [200] * (RACERS - 1) + [201], [r.text[:200] for r in responses if r.status_code >= 300]
        if route == "collection":
            assert sum(r.json()["inserted"] for r in responses) == 1
        assert Message.objects.filter(session_id=sid, message_id="race").count() == 1


def test_chunked_body_is_read(client):
    """curl -H "$H" -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' -d '{"name":"chunked"}'
    $B/sessions  → 201 with that name."""

    def chunks():
        yield b'{"name": '
        yield b'"chunked"}'

    response = client.post("/sessions", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 201, response.text
    assert response.json()["name"] == "chunked"
    sid = response.json()["id"]

    def message():
        yield b'{"message": {"id": "c1", "role": "user", '
        yield b'"parts": [{"type": "text", "text": "' + b"y" * 70_000 + b'"}]}}'

    appended = client.post(f"/sessions/{sid}/messages", content=message(), headers={"Content-Type": "application/json"})
    assert appended.status_code == 201, appended.text
    assert len(client.get(f"/sessions/{sid}/messages/c1").json()["parts"][0]["text"]) == 70_000


def test_longest_ids_are_fetchable_and_longer_urls_are_json_414(client):
    """curl -H "$H" $B/sessions/$S/messages/<512 bytes, percent-encoded to 1,536>  → 200;
    curl -H "$H" "$B/sessions/<6,000 characters>"  → 414 JSON from the app (gunicorn's limit is 8,190)."""
    sid = client.post("/sessions", json={"name": "ids"}).json()["id"]
    long_id = "é/ ?" * 101 + "ééé" + "x"  # 512 UTF-8 bytes, every character needs escaping in a URL
    assert len(long_id.encode()) == 512
    assert client.post(f"/sessions/{sid}/messages", json={"message": ui(long_id)}).status_code == 201
    fetched = client.get(f"/sessions/{sid}/messages/{quote(long_id, safe='')}")
    assert fetched.status_code == 200
    assert fetched.json()["id"] == long_id
    assert_json_error(client.get("/sessions/" + "x" * 6000), 414, "uri_too_long")


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("DELETE", "/sessions", 405),
        ("PATCH", "/sessions/{sid}/messages/m1", 405),
        ("GET", "/sessions/", 404),
        ("GET", "/sessions/%2E%2E%2Fadmin%2F", 404),
        ("GET", "/sessions/{sid}/messages/%0A", 404),
        ("GET", "/nope", 404),
    ],
)
def test_errors_are_json_through_gunicorn(client, method, path, status):
    """curl -X DELETE -H "$H" $B/sessions  → 405 JSON; curl -H "$H" $B/sessions/  → 404 JSON."""
    sid = client.post("/sessions", json={"name": "errors"}).json()["id"]
    client.post(f"/sessions/{sid}/messages", json={"message": ui("m1")})
    assert_json_error(client.request(method, path.format(sid=sid), json={}), status)


def test_text_plain_is_415_through_gunicorn(client):
    """curl -H "$H" -H 'Content-Type: text/plain' -d '{"name":"x"}' $B/sessions  → 415 JSON."""
    response = client.post("/sessions", content=b'{"name": "x"}', headers={"Content-Type": "text/plain"})
    assert_json_error(response, 415, "unsupported_media_type")
