"""Load driver for the JSON API (asyncio + httpx) with a final consistency check.

N concurrent clients each own a session and loop over a realistic mix for a fixed time:
append 60 %, history 25 %, search 10 % (half per-session, half across sessions),
fork / compact 5 %.  An append that fails on the network or with a 5xx is retried with
the same message id until the server answers (an append is idempotent by id: 201 stores
it, 200 ``inserted: false`` means an earlier try already did), so a server or database
restart shows up as latency, not loss.  At the end every acknowledged append must be
stored exactly once in its session: the stored ids are read straight from the database
(Django ORM, same settings as the server) and compared with the acknowledged ones.

Against a running server::

    DJANGO_SETTINGS_MODULE=project.settings DATABASE_URL=postgres://... \\
        python -m scripts.load --base-url http://127.0.0.1:8000/api --token ask_...

Self-contained (creates a Postgres database, migrates, starts gunicorn on 127.0.0.1)::

    python -m scripts.load --start --database agent_sessions_load --clients 20 --duration 60

Prints requests/s, p50/p99 per route, errors, and the consistency verdict; ``--json`` writes
the report.  Exit status 1 when there were errors or the check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
WORDS = (
    "deploy database migration index query latency cache redis worker queue retry backoff token budget summary "
    "context memory branch fork compaction search ranking vector embedding prompt tool call result error trace "
    "customer invoice refund shipping order account password reset billing plan upgrade schedule meeting"
).split()
MIX = (("append", 60), ("history", 25), ("search", 10), ("fork_compact", 5))
RETRY_FOR = 120.0  # seconds an append keeps retrying before it is given up (and reported unacknowledged)


@dataclass
class Report:
    duration: float = 0.0
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    error_samples: list[str] = field(default_factory=list)
    error_times: list[float] = field(default_factory=list)  # time.monotonic() of each error
    retries: int = 0
    acked: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # session → ids
    unacked: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    forks: list[str] = field(default_factory=list)
    consistency: dict = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return sum(len(v) for v in self.latencies.values())

    def error_count(self) -> int:
        return sum(self.errors.values())

    def summary(self) -> dict:
        routes = {}
        for route, values in sorted(self.latencies.items()):
            ordered = sorted(values)
            routes[route] = {
                "count": len(ordered),
                "p50_ms": round(_pct(ordered, 50) * 1000, 1),
                "p99_ms": round(_pct(ordered, 99) * 1000, 1),
                "max_ms": round(ordered[-1] * 1000, 1) if ordered else 0.0,
            }
        return {
            "duration_s": round(self.duration, 2),
            "requests": self.requests,
            "requests_per_s": round(self.requests / self.duration, 1) if self.duration else 0.0,
            "routes": routes,
            "errors": dict(self.errors),
            "error_samples": self.error_samples[:10],
            "append_retries": self.retries,
            "acknowledged_appends": sum(len(v) for v in self.acked.values()),
            "unacknowledged_appends": sum(len(v) for v in self.unacked.values()),
            "forks": len(self.forks),
            "consistency": self.consistency,
        }


def _pct(ordered: list[float], pct: float) -> float:
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _message(rng: random.Random, mid: str, turn: int) -> dict:
    role = "user" if turn % 2 == 0 else "assistant"
    parts: list[dict] = [{"type": "text", "text": _text(rng, rng.randint(8, 120))}]
    if role == "assistant" and rng.random() < 0.2:
        parts.append(
            {
                "type": "tool-lookup",
                "toolCallId": f"call-{mid}",
                "state": "output-available",
                "input": {"query": _text(rng, 3)},
                "output": {"rows": rng.randint(0, 50), "note": _text(rng, 10)},
            }
        )
    return {"id": mid, "role": role, "parts": parts, "createdAt": time.strftime("%Y-%m-%dT%H:%M:%SZ")}


class Client:
    def __init__(self, http: httpx.AsyncClient, report: Report, index: int, seed: int) -> None:
        self.http = http
        self.report = report
        self.index = index
        self.rng = random.Random(seed * 1000 + index)
        self.session_id = ""
        self.turn = 0

    async def _call(self, route: str, method: str, url: str, **kwargs) -> httpx.Response | None:
        started = time.perf_counter()
        try:
            response = await self.http.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            self.report.errors[f"{route}: {type(exc).__name__}"] += 1
            self._sample(f"{route} {method} {url}: {exc!r}")
            return None
        self.report.latencies[route].append(time.perf_counter() - started)
        if response.status_code >= 400:
            self.report.errors[f"{route}: HTTP {response.status_code}"] += 1
            self._sample(f"{route} {method} {url}: {response.status_code} {response.text[:200]}")
        return response

    def _sample(self, text: str) -> None:
        self.report.error_times.append(time.monotonic())
        if len(self.report.error_samples) < 50:
            self.report.error_samples.append(text)

    async def setup(self) -> None:
        while True:
            response = await self._call("create", "POST", "/sessions", json={"name": f"load client {self.index}"})
            if response is not None and response.status_code == 201:
                self.session_id = response.json()["id"]
                return
            await asyncio.sleep(0.5)

    async def append(self) -> None:
        mid = f"c{self.index}-{self.turn}-{uuid.uuid4().hex[:8]}"
        message = _message(self.rng, mid, self.turn)
        self.turn += 1
        give_up = time.monotonic() + RETRY_FOR
        delay = 0.1
        while True:
            response = await self._call(
                "append", "POST", f"/sessions/{self.session_id}/messages", json={"message": message}
            )
            if response is not None and response.status_code in (200, 201):
                self.report.acked[self.session_id].append(mid)
                return
            if response is not None and response.status_code < 500:
                self.report.unacked[self.session_id].append(mid)  # a 4xx: the server refused it
                return
            if time.monotonic() > give_up:
                self.report.unacked[self.session_id].append(mid)
                return
            self.report.retries += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def history(self) -> None:
        await self._call("history", "GET", f"/sessions/{self.session_id}/history")

    async def search(self) -> None:
        query = " ".join(self.rng.sample(WORDS, self.rng.choice((1, 1, 2))))
        if self.rng.random() < 0.5:
            await self._call("search", "GET", f"/sessions/{self.session_id}/search", params={"q": query, "limit": 10})
        else:
            await self._call("search_all", "GET", "/search", params={"q": query, "limit": 10})

    async def fork_or_compact(self) -> None:
        if self.rng.random() < 0.5:
            leaf = await self._call("leaf", "GET", f"/sessions/{self.session_id}/leaf")
            body = leaf.json() if leaf is not None and leaf.status_code == 200 else {}
            leaf_id = (body.get("message") or {}).get("id") if isinstance(body, dict) else None
            if leaf_id:
                response = await self._call(
                    "fork",
                    "POST",
                    f"/sessions/{self.session_id}/fork",
                    json={"at_message_id": leaf_id, "name": f"fork of {self.index}"},
                )
                if response is not None and response.status_code == 201:
                    self.report.forks.append(response.json()["id"])
        else:
            await self._call("compact", "POST", f"/sessions/{self.session_id}/compact", json={})

    async def run(self, deadline: float) -> None:
        actions = [name for name, weight in MIX for _ in range(weight)]
        await self.append()
        while time.monotonic() < deadline:
            action = self.rng.choice(actions)
            await getattr(self, "fork_or_compact" if action == "fork_compact" else action)()


async def run_load(base_url: str, token: str, *, clients: int = 20, duration: float = 60.0, seed: int = 1) -> Report:
    """Drive the API; returns the report (consistency not checked yet: see :func:`check_consistency`)."""
    report = Report()
    limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(
        base_url=base_url.rstrip("/"), headers=headers, limits=limits, timeout=httpx.Timeout(60.0)
    ) as http:
        workers = [Client(http, report, i, seed) for i in range(clients)]
        await asyncio.gather(*(w.setup() for w in workers))
        report.latencies.pop("create", None)
        started = time.monotonic()
        await asyncio.gather(*(w.run(started + duration) for w in workers))
        report.duration = time.monotonic() - started
    return report


def is_one_chain(rows: list[tuple[str, str | None]]) -> bool:
    """Whether (id, parent id) rows form a single root→leaf chain: one root, every other row the only
    child of a stored row (each client appends to its own latest leaf, so nothing may branch)."""
    ids = {mid for mid, _ in rows}
    roots = [mid for mid, parent in rows if parent is None or parent not in ids]
    parents = [parent for _, parent in rows if parent is not None and parent in ids]
    return len(roots) == 1 and len(parents) == len(set(parents)) and len(ids) == len(rows)


def check_consistency(report: Report) -> dict:
    """Compare acknowledged appends with the stored rows (needs Django set up on the server's database)."""
    import django

    django.setup()
    from agent_sessions.models import Message

    missing, duplicated, extra_unacked_stored, broken_chains = [], [], 0, []
    for session_id, acked in report.acked.items():
        rows = list(Message.objects.filter(session_id=session_id).values_list("message_id", "parent_id"))
        stored = [mid for mid, _ in rows]
        if not is_one_chain(rows):
            broken_chains.append(session_id)
        counts: dict[str, int] = defaultdict(int)
        for mid in stored:
            counts[mid] += 1
        missing += [mid for mid in acked if counts.get(mid, 0) == 0]
        duplicated += [mid for mid in acked if counts.get(mid, 0) > 1]
        unacked = set(report.unacked.get(session_id, []))
        extra_unacked_stored += sum(1 for mid in stored if mid in unacked)
        unknown = set(stored) - set(acked) - unacked
        if unknown:
            duplicated += sorted(unknown)[:5]  # rows nobody sent: never expected
    result = {
        "sessions": len(report.acked),
        "acknowledged": sum(len(v) for v in report.acked.values()),
        "missing": len(missing),
        "duplicated_or_unknown": len(duplicated),
        "unacknowledged_but_stored": extra_unacked_stored,
        "not_one_chain": len(broken_chains),
        "ok": not missing and not duplicated and not broken_chains,
        "examples": (missing + duplicated + broken_chains)[:5],
    }
    report.consistency = result
    return result


# ── a self-contained run: database, migrations, gunicorn ─────────────────────


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(
    env: dict, port: int, *, workers: int = 4, log: Path | None = None, startup_timeout: float = 60.0
) -> subprocess.Popen:
    """gunicorn ``project.wsgi`` on 127.0.0.1:port; returns once it answers HTTP."""
    command = [
        str(Path(sys.executable).with_name("gunicorn")),
        "project.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--timeout",
        "120",
        "--graceful-timeout",
        "5",
    ]
    out = log.open("w") if log else subprocess.DEVNULL
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + startup_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {process.returncode}: {log.read_text() if log else ''}")
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/openapi.json", timeout=2)
            return process
        except httpx.HTTPError:
            time.sleep(0.3)
    stop(process)
    raise RuntimeError(f"gunicorn did not answer within {startup_timeout:.0f} s: {log.read_text() if log else ''}")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def issue_token(username: str = "load") -> str:
    """A user and an API key in the configured database (Django must be set up)."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from agent_sessions.models import ApiKey

    user, _ = get_user_model().objects.get_or_create(username=username)
    return ApiKey.issue(user, "load test")[1]


#: The database connection settings docker-compose.yml gives the app (tests/test_compose.py checks they
#: match): load, fault and fuzz runs measure the shipped configuration, persistent connections included.
COMPOSE_DATABASE_ENV = {
    "DATABASE_CONN_MAX_AGE": "60",
    "DATABASE_CONN_HEALTH_CHECKS": "true",
    "DATABASE_PREPARED_STATEMENTS": "true",
}


def production_env(database: str) -> dict:
    """Environment of a production-like server on a Postgres database (HTTP on localhost), with the
    compose file's connection settings unless the caller's environment sets them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))}
    for name, value in COMPOSE_DATABASE_ENV.items():
        env.setdefault(name, value)
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        DATABASE_URL=f"postgres://{os.environ.get('PGUSER', 'postgres')}@127.0.0.1:5432/{database}",
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        DJANGO_SECURE_SSL_REDIRECT="false",
        AGENT_SESSIONS_LOG_LEVEL="WARNING",
        # One key sends thousands of requests a minute here (load, fuzzing): the rate limits would answer 429.
        AGENT_SESSIONS_API_KEY_RATE_LIMIT="off",
        AGENT_SESSIONS_API_USER_RATE_LIMIT="off",
        PYTHONPATH=str(ROOT),
    )
    return env


def prepare_postgres(database: str, env: dict, *, recreate: bool = True) -> None:
    import psycopg

    with psycopg.connect(
        host="127.0.0.1", user=os.environ.get("PGUSER", "postgres"), dbname="postgres", autocommit=True
    ) as conn:
        if recreate:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone():
            conn.execute(f'CREATE DATABASE "{database}"')
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)


def print_report(summary: dict) -> None:
    print(f"\n{summary['requests']} requests in {summary['duration_s']} s: {summary['requests_per_s']} req/s")
    print(f"{'route':<12} {'count':>7} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
    for route, row in summary["routes"].items():
        print(f"{route:<12} {row['count']:>7} {row['p50_ms']:>9} {row['p99_ms']:>9} {row['max_ms']:>9}")
    print(f"errors: {sum(summary['errors'].values())} {summary['errors'] or ''}")
    for sample in summary["error_samples"][:5]:
        print("  ", sample)
    print(
        f"append retries: {summary['append_retries']}; acknowledged appends: {summary['acknowledged_appends']}; "
        f"unacknowledged: {summary['unacknowledged_appends']}; forks: {summary['forks']}"
    )
    print(f"consistency: {summary['consistency']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="API root of a running server, e.g. http://127.0.0.1:8000/api")
    parser.add_argument("--token", help="API key (default: issue one in the configured database)")
    parser.add_argument("--start", action="store_true", help="create a Postgres database and start gunicorn")
    parser.add_argument("--database", default="agent_sessions_load", help="Postgres database for --start")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers for --start")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--keep-db", action="store_true", help="keep the --start database afterwards")
    args = parser.parse_args(argv)

    server = None
    if args.start:
        env = production_env(args.database)
        prepare_postgres(args.database, env)
        os.environ.update(
            {
                k: env[k]
                for k in (
                    "DJANGO_SETTINGS_MODULE",
                    "DATABASE_URL",
                    "DJANGO_DEBUG",
                    "DJANGO_SECRET_KEY",
                    "DJANGO_ALLOWED_HOSTS",
                    "DJANGO_SECURE_SSL_REDIRECT",
                )
            }
        )
        port = free_port()
        log = Path(tempfile.gettempdir()) / "agent-sessions-load.log"
        server = start_gunicorn(env, port, workers=args.workers, log=log, startup_timeout=300)
        base_url = f"http://127.0.0.1:{port}/api"
    else:
        if not args.base_url:
            parser.error("--base-url or --start is required")
        base_url = args.base_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    try:
        token = args.token or issue_token()
        print(f"load: {args.clients} clients for {args.duration:.0f} s against {base_url}", flush=True)
        report = asyncio.run(run_load(base_url, token, clients=args.clients, duration=args.duration, seed=args.seed))
    finally:
        if server is not None:
            stop(server)
    check_consistency(report)
    summary = report.summary()
    print_report(summary)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    if args.start and not args.keep_db:
        from django.db import connections

        connections.close_all()
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", user=os.environ.get("PGUSER", "postgres"), dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
    return 0 if report.error_count() == 0 and summary["consistency"].get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
