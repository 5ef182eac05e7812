"""Property-based test of the JSON API against its own OpenAPI schema (schemathesis, live server).

The schema is served by ``live_server`` (127.0.0.1) and loaded from there.
Each operation is its own test: schemathesis generates valid and invalid
requests (authenticated with a Bearer key), and every response must not be a
5xx and must match the documented schema.  Half of the examples address a
real session (with messages, a memory block and tools), so generated bodies
reach the code behind the ownership check.

The operations are listed from the in-process schema at collection time; the
hypothesis loop runs inside each test (schemathesis' lazy pytest fixture loader
does not work with this pytest version).

``test_every_check_and_the_stateful_phase`` runs the schemathesis CLI with
``--checks all`` and every phase (stateful included, following the OpenAPI
links) against gunicorn on a fresh database of the current kind, at a small
example count; ``make api-fuzz`` runs the same with 300 examples per operation.
"""

from __future__ import annotations

import itertools

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from agent_sessions.api.main import api as ninja_api
from agent_sessions.manager import SessionManager
from agent_sessions.models import ApiKey, SessionRecord

pytestmark = pytest.mark.django_db(transaction=True)

CI_EXAMPLES = 5
"""Examples per operation of the all-checks CLI run in the normal suite (``make api-fuzz``: 300)."""

MAX_EXAMPLES = 15
"""Examples per operation (29 operations: about a minute in all)."""

OPERATIONS = [
    (method.upper(), path) for path, methods in ninja_api.get_openapi_schema()["paths"].items() for method in methods
]


@pytest.fixture
def fuzzer(django_user_model):
    user = django_user_model.objects.create_user("fuzzer", "fuzzer@example.com", "pw")
    return user, ApiKey.issue(user, "schemathesis")[1]


def _real_session(owner) -> str:
    """A fresh session of the fuzzer's with two messages (a DELETE in one example cannot starve the next)."""
    manager = SessionManager()
    sid = manager.create("fuzz").id
    SessionRecord.objects.filter(id=sid).update(owner=owner)
    manager.append(sid, {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hello world"}]})
    manager.append(sid, {"id": "m2", "role": "assistant", "parts": [{"type": "text", "text": "hi there"}]})
    return sid


def _point_at_real_messages(case) -> None:
    """Message ids in the query or a JSON body name ``m1`` (generated ones would almost never exist)."""
    for container, keys in ((case.query, ("message_id", "leaf_id")), (case.body, MESSAGE_ID_FIELDS)):
        if isinstance(container, dict):
            for key in keys:
                if isinstance(container.get(key), str):
                    container[key] = "m1"


MESSAGE_ID_FIELDS = ("at_message_id", "from_message_id", "to_message_id", "leaf_id", "parent_id")


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_operation_conforms_to_schema(live_server, fuzzer, method, path):
    user, token = fuzzer
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/openapi.json")
    operation = schema[path][method]
    strategy = st.one_of(
        operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
        operation.as_strategy(generation_mode=GenerationMode.NEGATIVE),
    )
    counter = itertools.count()
    statuses: set[int] = set()

    @given(case=strategy)
    @settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    def check(case):
        if "session_id" in (case.path_parameters or {}) and next(counter) % 2 == 0:
            case.path_parameters["session_id"] = _real_session(user)
            for name, value in (("message_id", "m1"), ("label", "memory"), ("name", "session_search")):
                if name in case.path_parameters:
                    case.path_parameters[name] = value
            _point_at_real_messages(case)
        response = case.call_and_validate(
            headers={"Authorization": f"Bearer {token}"},
            checks=[not_a_server_error, response_schema_conformance],
        )
        statuses.add(response.status_code)

    check()
    assert statuses
    assert max(statuses) < 500


@pytest.mark.e2e
def test_every_check_and_the_stateful_phase(settings):
    """schemathesis run $B/openapi.json --checks all --phases examples,coverage,fuzzing,stateful: zero failures."""
    from scripts import api_fuzz

    assert api_fuzz.run(settings.DB, CI_EXAMPLES) == 0
