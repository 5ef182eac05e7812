"""An ASGI server process (the compose stack's: gunicorn + uvicorn workers) serving the scripted chat
endpoint on the live test database, and the Node test project.

Used by ``tests/e2e/test_chat_client.py`` (the real ``ai`` client).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from scripts.load import free_port

ROOT = Path(__file__).resolve().parents[2]
JS_PROJECT = ROOT / "tests" / "js" / "chat"
SETTINGS = "tests.support.chat_server_settings"


def missing(reason: str) -> None:
    """Fail under CI (``CI`` set), else skip."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def node_project() -> Path:
    """``tests/js/chat`` with its pinned ``node_modules`` (``npm ci`` when they are missing)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        missing("node and npm are needed for the ai client tests")
    # make test runs three suites side by side: one npm ci at a time, the others wait and find it done.
    with (JS_PROJECT / "package.json").open("rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (JS_PROJECT / "node_modules" / "ai" / "package.json").exists():
            done = subprocess.run(
                [npm, "ci", "--prefix", str(JS_PROJECT), "--no-audit", "--no-fund"],
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            if done.returncode != 0:
                missing(f"npm ci in {JS_PROJECT} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return JS_PROJECT


@contextmanager
def asgi_server(database: str, db_name: str, *, settings: str = "tests.support.chat_server_settings") -> Iterator[str]:
    """``http://127.0.0.1:<port>`` of the compose stack's ASGI server (gunicorn with uvicorn's worker class)
    running ``project.asgi`` with ``settings`` on the given database."""
    with asgi_process(database, db_name, settings=settings) as (base, _):
        yield base


@contextmanager
def asgi_process(
    database: str, db_name: str, *, settings: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen]]:
    """:func:`asgi_server`'s base URL and its gunicorn process, the leader of a process group of its own (a test
    may kill the whole server, worker included, with ``os.killpg``)."""
    port = free_port()
    environ = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings,
        "AGENT_SESSIONS_TEST_DB": database,
        "AGENT_SESSIONS_DB_NAME": db_name,
        **(env or {}),
    }
    gunicorn = Path(sys.executable).parent / "gunicorn"
    command = [str(gunicorn), "project.asgi:application", "--worker-class", "uvicorn_worker.UvicornWorker"]
    command += ["--workers", "1", "--bind", f"127.0.0.1:{port}", "--log-level", "warning"]
    process = subprocess.Popen(
        command, cwd=ROOT, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    with serving(process, f"http://127.0.0.1:{port}", "the ASGI server") as base:
        yield base, process


@contextmanager
def serving(process: subprocess.Popen, base: str, what: str) -> Iterator[str]:
    """``base`` once the server ``process`` (its output piped) answers ``/api/openapi.json`` with a 200
    (within 60 s); the process is stopped when the block ends."""
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{what} exited early:\n{process.stdout.read().decode(errors='replace')}")
            try:
                if httpx.get(f"{base}/api/openapi.json", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not answer within 60 s")
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
