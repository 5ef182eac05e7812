"""Numbers JSON cannot carry: usage counters stay finite and non-negative, API bodies are strict JSON.

``add_usage`` refuses negative, non-finite and out-of-range increments, and an add whose
running total would pass the columns' range, with :class:`InvalidUsage` and nothing changed
(the check sits in the UPDATE's WHERE, so it stays one atomic statement).  A non-finite
cost written by a foreign writer comes out of the JSON API as ``null``.  Both databases.
"""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
from django.db import connection

from agent_sessions import InvalidUsage
from agent_sessions.manager import SessionManager
from agent_sessions.models import SessionRecord

pytestmark = pytest.mark.django_db

MAX_TOKENS = 2**63 - 1


def strict_json(body: bytes) -> object:
    """``json.loads`` that refuses NaN and ±Infinity, as ``JSON.parse`` does."""

    def refuse(constant: str) -> object:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(body, parse_constant=refuse)


def usage(session_id: str) -> tuple:
    row = SessionRecord.objects.get(id=session_id)
    return (row.input_tokens, row.output_tokens, row.estimated_cost)


@pytest.fixture
def manager():
    return SessionManager()


@pytest.fixture
def sid(manager):
    return manager.create("usage").id


@pytest.mark.parametrize(
    "bad",
    [
        (-1, 0, 0.0),
        (0, -5, 0.0),
        (0, 0, -0.01),
        (0, 0, float("inf")),
        (0, 0, float("-inf")),
        (0, 0, float("nan")),
        (MAX_TOKENS + 1, 0, 0.0),
        (0, 2**70, 0.0),
    ],
)
def test_negative_non_finite_or_out_of_range_increments_are_invalid_usage(manager, sid, bad):
    manager.add_usage(sid, 3, 4, 0.5)
    with pytest.raises(InvalidUsage):
        manager.add_usage(sid, *bad)
    assert usage(sid) == (3, 4, 0.5)


def test_the_async_twin_refuses_the_same(manager, sid):
    with pytest.raises(InvalidUsage):
        asyncio.run(manager.aadd_usage(sid, -1, 0, 0.0))
    assert usage(sid) == (0, 0, 0.0)


def test_a_cost_total_that_would_overflow_is_refused_and_the_stored_one_stays_finite(manager, sid):
    manager.add_usage(sid, 0, 0, 1.7e308)  # the largest finite doubles are fine on their own
    with pytest.raises(InvalidUsage, match="past its range"):
        manager.add_usage(sid, 0, 0, 1.7e308)  # on SQLite the sum was infinity; Postgres raised
    assert usage(sid) == (0, 0, 1.7e308)
    manager.add_usage(sid, 0, 0, 5e306)
    assert usage(sid)[2] == 1.7e308 + 5e306
    with pytest.raises(InvalidUsage):
        manager.add_usage(sid, 0, 0, sys.float_info.max)
    manager.add_usage(sid, 1, 1, 0.0)  # the tokens still count
    assert usage(sid) == (1, 1, 1.7e308 + 5e306)


def test_a_token_total_past_the_bigint_range_is_refused(manager, sid):
    manager.add_usage(sid, MAX_TOKENS, 0, 0.0)
    with pytest.raises(InvalidUsage):
        manager.add_usage(sid, 1, 0, 0.0)  # SQLite turned the column into a float; Postgres raised
    manager.add_usage(sid, 0, MAX_TOKENS - 1, 0.0)
    with pytest.raises(InvalidUsage):
        manager.add_usage(sid, 0, 2, 0.0)
    manager.add_usage(sid, 0, 1, 0.0)
    assert usage(sid) == (MAX_TOKENS, MAX_TOKENS, 0.0)
    assert isinstance(usage(sid)[0], int)
    manager.add_usage("no-such-session", 1, 1, 1.0)  # unknown sessions stay silent, as before
    manager.add_usage("bad\x00id", 1, 1, 1.0)


def store_cost(session_id: str, value: str) -> None:
    """A foreign writer's non-finite cost: ``'Infinity'`` / ``'NaN'`` on Postgres, ``9e999`` on SQLite
    (SQLite has no NaN: ``9e999 - 9e999`` is stored as NULL, which the column refuses; the nearest is 0)."""
    literal = {"inf": "9e999", "-inf": "-9e999"}.get(value, "0") if connection.vendor == "sqlite" else "%s"
    params = [] if connection.vendor == "sqlite" else [{"inf": "Infinity", "-inf": "-Infinity"}.get(value, "NaN")]
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE assistant_sessions SET estimated_cost = {literal} WHERE id = %s", [*params, session_id])


def test_adding_to_a_stored_infinity_is_refused(manager, sid):
    store_cost(sid, "inf")
    with pytest.raises(InvalidUsage, match="not finite"):
        manager.add_usage(sid, 1, 0, 0.5)
    assert usage(sid)[0] == 0


def test_api_bodies_are_strict_json_with_a_foreign_non_finite_cost(api):
    for value in ("inf", "-inf", "nan"):
        sid = api.new_session(f"foreign {value}")
        store_cost(sid, value)
        check_strict_bodies(api, sid, value)


def check_strict_bodies(api, sid: str, value: str) -> None:
    listing = strict_json(api.get("/sessions").content)  # every session so far, each with a non-finite cost
    expected = 0.0 if value == "nan" and connection.vendor == "sqlite" else None
    assert {s["id"]: s["estimated_cost"] for s in listing["items"]}[sid] == expected
    one = api.get(f"/sessions/{sid}")
    assert one.status_code == 200
    assert strict_json(one.content)["estimated_cost"] == expected
    assert strict_json(api.get(f"/sessions/{sid}/usage").content) == {
        "input_tokens": 0,
        "output_tokens": 0,
        "estimated_cost": expected,
    }
    ended = api.post(f"/sessions/{sid}/end")
    assert ended.status_code == 200
    assert strict_json(ended.content)["estimated_cost"] == expected


def test_api_usage_route_refuses_an_overflowing_total_with_invalid_usage(api):
    sid = api.new_session("near the top")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE assistant_sessions SET input_tokens = %s WHERE id = %s", [MAX_TOKENS - 10, sid])
    response = api.post(f"/sessions/{sid}/usage/increments", {"input_tokens": 100, "output_tokens": 1, "cost": 0.1})
    assert response.status_code == 422, response.content
    assert strict_json(response.content)["code"] == "invalid_usage"
    assert usage(sid) == (MAX_TOKENS - 10, 0, 0.0)
    store_cost(sid, "inf")
    response = api.post(f"/sessions/{sid}/usage/increments", {"input_tokens": 1, "output_tokens": 0, "cost": 0.1})
    assert (response.status_code, strict_json(response.content)["code"]) == (422, "invalid_usage")
    ok = api.post(f"/sessions/{sid}/usage", {"input_tokens": 0})  # the deprecated route: the whole session
    assert ok.status_code == 422  # a zero add to a stored infinity is refused too
    sid = api.new_session("usage")
    for body in ({"input_tokens": -1}, {"cost": -0.5}):
        response = api.post(f"/sessions/{sid}/usage/increments", body)
        assert response.status_code == 422
    for raw in ('{"cost": NaN}', '{"cost": Infinity}', '{"cost": 1e999}'):
        response = api.post(f"/sessions/{sid}/usage/increments", raw=raw)
        assert 400 <= response.status_code < 500, raw
    assert strict_json(api.get(f"/sessions/{sid}/usage").content) == {
        "input_tokens": 0,
        "output_tokens": 0,
        "estimated_cost": 0.0,
    }
