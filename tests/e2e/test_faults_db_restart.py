"""A PostgreSQL restart under four looping non-request clients (workers, scripts, agent loops).

The test starts a private cluster (``initdb`` + ``pg_ctl`` from the PostgreSQL binaries,
in a temporary directory, on a free port: the shared server is never touched), migrates
it with the production settings and the compose environment (``DATABASE_CONN_MAX_AGE=60``,
``DATABASE_CONN_HEALTH_CHECKS=true``, ``DATABASE_PREPARED_STATEMENTS=true``), runs four
``scripts/fault_db_loop.py`` clients and restarts the cluster (``pg_ctl restart -m fast``)
while they run.  Calls during the outage may fail; after the server is back no call fails,
and every acknowledged append is stored exactly once.

Without the PostgreSQL binaries the test skips, except under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from scripts.load import COMPOSE_DATABASE_ENV
from tests.e2e.support import ROOT, unavailable

pytestmark = [pytest.mark.e2e, pytest.mark.postgres_only, pytest.mark.timeout(300)]

CLIENTS = 4
RUN_SECONDS = 30.0
RESTART_AT = 8.0
COMPOSE_ENV = COMPOSE_DATABASE_ENV  # what docker-compose.yml gives the app (tests/test_compose.py)


def _bin(name: str) -> str:
    found = sorted(str(p) for p in Path("/usr/lib/postgresql").glob(f"*/bin/{name}")) or (
        [shutil.which(name)] if shutil.which(name) else []
    )
    if not found:
        unavailable(f"PostgreSQL's {name} is not installed")
    return found[-1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    """A throw-away PostgreSQL cluster owned by the ``postgres`` user when run as root."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="agent-sessions-pg-"))
        self.port = _free_port()
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.dir, "postgres", "postgres")
        self.data = self.dir / "data"
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/agent_sessions_restart"

    def _run(self, *args: str) -> None:
        subprocess.run([*self.as_user, *args], check=True, capture_output=True, text=True, timeout=120)

    def init_and_start(self) -> None:
        self._run(_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        self._pg_ctl("start")
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True) as c:
            c.execute("CREATE DATABASE agent_sessions_restart")

    def _pg_ctl(self, action: str) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.dir / "log"), "-w",
                  "-m", "fast", action)  # fmt: skip

    def restart(self) -> None:
        self._pg_ctl("restart")

    def ready(self) -> bool:
        try:
            psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", connect_timeout=1).close()
            return True
        except psycopg.OperationalError:
            return False

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)

    def stored(self, session_id: str) -> list[str]:
        with psycopg.connect(self.url.replace("postgres://", "postgresql://")) as conn:
            rows = conn.execute("SELECT id FROM assistant_messages WHERE session_id = %s", [session_id]).fetchall()
        return [r[0] for r in rows]


@pytest.fixture
def cluster():
    _bin("initdb")
    made = Cluster()
    try:
        made.init_and_start()
        yield made
    finally:
        made.destroy()


def _env(cluster: Cluster) -> dict:
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", "DATABASE_URL": cluster.url,
            "PYTHONPATH": str(ROOT), "CELERY_TASK_ALWAYS_EAGER": "true", **COMPOSE_ENV}  # fmt: skip


def test_compose_ships_the_connection_settings_this_drill_uses():
    text = (ROOT / "docker-compose.yml").read_text()
    for key, value in COMPOSE_ENV.items():
        assert f'{key}: "{value}"' in text


def test_database_restart_under_four_looping_clients_no_failure_once_back(cluster, tmp_path):
    env = _env(cluster)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True,
                   timeout=180)  # fmt: skip
    outs = [tmp_path / f"client{i}.jsonl" for i in range(CLIENTS)]
    clients = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scripts.fault_db_loop",
                "--name",
                f"c{i}",
                "--seconds",
                str(RUN_SECONDS),
                "--out",
                str(out),
            ],
            cwd=ROOT,
            env=env,
        )  # fmt: skip
        for i, out in enumerate(outs)
    ]
    try:
        time.sleep(RESTART_AT)
        cluster.restart()
        while not cluster.ready():
            time.sleep(0.05)
        back = time.time()
        for client in clients:
            assert client.wait(timeout=RUN_SECONDS + 60) == 0
    finally:
        for client in clients:
            if client.poll() is None:
                client.kill()
    for out in outs:
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        session_id = lines[0]["session"]
        calls = lines[1:]
        failed_after = [c for c in calls if c["call"] == "failed" and c["start"] > back]
        assert failed_after == [], failed_after[:3]
        assert sum(1 for c in calls if c["call"] == "append" and c["start"] > back) > 10  # it kept working
        acked = [c["id"] for c in calls if c["call"] == "append"]
        stored = cluster.stored(session_id)
        assert sorted(stored) == sorted(set(stored))
        assert set(acked) <= set(stored)
