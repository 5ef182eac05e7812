"""docker-compose.yml is valid and every command in it is a real command of this repository.

The static tests parse the file with PyYAML (and run ``docker compose config``, or
``docker-compose config``, when one is installed).  The live test runs the migrate service's
command, then the web service's (gunicorn, static files by WhiteNoise), its health check, the
worker's celery command and beat with the compose file's environment, against the local
PostgreSQL and Redis instead of the compose services.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from importlib import import_module
from pathlib import Path

import pytest
import yaml
from django.core.management import get_commands
from django.urls import resolve

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
APP_SERVICES = ("migrate", "web", "chat", "worker", "beat")
SECRET = "compose-test-secret-0123456789abcdefghijklmnopqrstuvwxyz"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def _argv(command) -> list[str]:
    """The command as argv; an ``sh -c`` script is split into its ``&&`` steps' words."""
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if argv[:2] == ["sh", "-c"]:
        return shlex.split(argv[2].replace("&&", " && "))
    return argv


def _steps(command) -> list[list[str]]:
    steps, current = [], []
    for word in _argv(command):
        if word == "&&":
            steps.append(current)
            current = []
        elif word != "exec":
            current.append(word)
    return [*steps, current]


def _interpolate(value: str, env: dict[str, str] | None = None) -> str:
    """Compose's ``${VAR:-default}`` / ``${VAR:?error}`` / ``${VAR}`` substitution (the secret key is set)."""
    env = {"DJANGO_SECRET_KEY": SECRET, **(env or {})}

    def substitute(match: re.Match) -> str:
        name, kind, rest = match.group(1), match.group(2), match.group(3) or ""
        if kind == ":?" and not env.get(name):
            raise ValueError(rest)
        return env.get(name) or (rest if kind == ":-" else "")

    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", substitute, value)


def test_services_healthchecks_and_volumes(compose):
    services = compose["services"]
    assert set(services) == {"postgres", "redis", *APP_SERVICES}
    for name, service in services.items():
        assert service["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL"), name
    assert services["beat"]["profiles"] == ["beat"]  # optional
    assert services["migrate"]["restart"] == "no"  # one-shot
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("web", "chat", "worker", "beat"):  # they start on a migrated database
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy", name
    assert "pgdata:/var/lib/postgresql/data" in services["postgres"]["volumes"]
    assert set(compose["volumes"]) >= {"pgdata", "redisdata"}


def test_app_services_share_the_production_environment(compose):
    for name in APP_SERVICES:
        env = compose["services"][name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://")
        assert "@postgres:5432/" in env["DATABASE_URL"]
        assert env["CELERY_BROKER_URL"] == "redis://redis:6379/0"
        assert env["DJANGO_DEBUG"] == "false"
        assert env["DJANGO_SECRET_KEY"].startswith("${DJANGO_SECRET_KEY:?")  # no default: compose refuses to start
    assert "WEB_CONCURRENCY" in compose["services"]["web"]["environment"]


def test_load_and_fault_scripts_run_with_the_compose_connection_settings(compose):
    from scripts import load

    env = compose["services"]["web"]["environment"]
    assert {name: env[name] for name in load.COMPOSE_DATABASE_ENV} == load.COMPOSE_DATABASE_ENV
    assert {name: load.production_env("db")[name] for name in load.COMPOSE_DATABASE_ENV} == load.COMPOSE_DATABASE_ENV


@pytest.mark.django_db  # the suite's session teardown needs the test database (see tests/conftest.py)
def test_commands_exist_in_this_repository(compose):
    services = compose["services"]
    known = get_commands()
    (migrate,) = _steps(services["migrate"]["command"])
    assert migrate[:3] == ["python", "manage.py", "migrate"]
    assert migrate[2] in known
    (gunicorn,) = _steps(services["web"]["command"])
    assert gunicorn[0] == "gunicorn"
    assert "migrate" not in gunicorn
    module, _, attribute = gunicorn[1].partition(":")
    assert callable(getattr(import_module(module), attribute))
    # The chat service: gunicorn running the ASGI application with uvicorn's worker class.
    chat = services["chat"]["command"]
    assert chat[:2] == ["gunicorn", "project.asgi:application"]
    module, _, attribute = chat[1].partition(":")
    assert callable(getattr(import_module(module), attribute))
    worker_module, _, worker_class = chat[chat.index("--worker-class") + 1].rpartition(".")
    assert isinstance(getattr(import_module(worker_module), worker_class), type)
    for name, role in (("worker", "worker"), ("beat", "beat")):
        (argv,) = _steps(services[name]["command"])
        assert argv[:4] == ["celery", "-A", "project", role]
    celery_app = import_module("project.celery").app
    celery_app.loader.import_default_modules()
    assert "agent_sessions.tasks.sweep_pending_compactions" in celery_app.tasks
    # The web health check asks for a page that exists.
    url = re.search(r"http://127\.0\.0\.1:8000(/[^'\"]*)", " ".join(services["web"]["healthcheck"]["test"])).group(1)
    assert resolve(url).url_name == "login"


def test_dockerfile_commands_exist():
    known = get_commands()
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    used = re.findall(r"manage\.py (\w+)", text)
    assert used
    assert all(name in known for name in used)


def test_beat_schedule_runs_the_sweeper():
    from django.conf import settings

    entries = settings.CELERY_BEAT_SCHEDULE.values()
    assert any(e["task"] == "agent_sessions.tasks.sweep_pending_compactions" for e in entries)


def _compose_cli() -> list[str]:
    """``docker compose`` (the v2 plugin) or ``docker-compose``; a skip (a failure under CI) without either."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    message = "neither `docker compose` nor docker-compose is installed (.ci/run installs Debian's docker-compose)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def test_docker_compose_config_accepts_the_file_and_demands_a_secret_key():
    cli = _compose_cli()
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    for args in ([], ["--profile", "beat"]):
        result = subprocess.run(
            [*cli, "-f", str(COMPOSE), *args, "config", "--services"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            env={**env, "DJANGO_SECRET_KEY": SECRET},
        )
        assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) == {"postgres", "redis", *APP_SERVICES}
    refused = subprocess.run(
        [*cli, "-f", str(COMPOSE), "config"], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env
    )
    assert refused.returncode != 0
    assert "set DJANGO_SECRET_KEY" in refused.stderr


TEST_TOOLS = {"pytest", "pytest-django", "hypothesis", "ruff", "mypy", "playwright", "schemathesis", "build", "twine"}


def _pins(path: Path) -> dict[str, str]:
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    pins = [re.match(r"([\w.\-]+)(?:\[[\w,]+\])?==(\S+)$", line) for line in lines if line and line[0] not in "#-"]
    return dict(pin.groups() for pin in pins)


def test_the_image_installs_run_time_packages_only():
    deploy = _pins(ROOT / "requirements-deploy.txt")
    assert {"Django", "gunicorn", "whitenoise", "celery", "redis"} <= set(deploy)
    assert not TEST_TOOLS & set(deploy)
    assert set(_pins(ROOT / "requirements.txt")) >= TEST_TOOLS  # development and CI get them on top
    assert "-r requirements-deploy.txt" in (ROOT / "requirements.txt").read_text(encoding="utf-8")
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert re.findall(r"pip install .*", dockerfile) == ["pip install --no-cache-dir -r requirements-deploy.txt"]
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    assert {"tests", "bench", "examples", "scripts", "requirements.txt"} <= set(ignored)


@pytest.mark.parametrize(
    ("key", "refused"),
    [
        (None, True),
        ("", True),
        ("dev-only-insecure-key-change-me", True),
        ("django-insecure-0123456789abcdefghijklmnopqrstuvwxyz", True),
        ("change-me-in-production", True),
        (SECRET, False),
    ],
)
def test_the_settings_refuse_a_placeholder_secret_key_outside_debug(key, refused):
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SECRET_KEY", "DJANGO_SETTINGS_MODULE")}
    env.update(DJANGO_DEBUG="false", PYTHONPATH=str(ROOT))
    if key is not None:
        env["DJANGO_SECRET_KEY"] = key
    done = subprocess.run(
        [sys.executable, "-c", "import project.settings"], env=env, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode != 0) is refused, done.stderr[-2000:]
    if refused:
        assert "DJANGO_SECRET_KEY must be set to a secret of your own" in done.stderr
    debug = subprocess.run(
        [sys.executable, "-c", "import project.settings"],
        env={**env, "DJANGO_DEBUG": "true"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert debug.returncode == 0, debug.stderr[-2000:]  # a local trial runs with the development key


# ── live: the same commands against the local services ───────────────────────

PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
REDIS_DB = 14


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _local_services():

    import psycopg
    import redis

    try:
        psycopg.connect(dbname="postgres", connect_timeout=3, **PG).close()
        redis.Redis(host="127.0.0.1", port=6379, db=REDIS_DB, socket_connect_timeout=2).ping()
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("CI"):
            pytest.fail(f"local PostgreSQL/Redis unavailable: {exc}")
        pytest.skip(f"local PostgreSQL/Redis unavailable: {exc}")


@pytest.fixture
def stack_env(compose, tmp_path):
    """The app services' environment with the compose hosts pointed at local services and a fresh database."""
    _local_services()
    import psycopg

    name = f"compose_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dbname="postgres", autocommit=True, **PG) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    env = {k: _interpolate(str(v)) for k, v in compose["services"]["web"]["environment"].items()}
    env["DATABASE_URL"] = f"postgres://{PG['user']}@{PG['host']}:{PG['port']}/{name}"
    env["DJANGO_STATIC_ROOT"] = str(tmp_path / "staticfiles")
    env["CELERY_BROKER_URL"] = env["CELERY_BROKER_URL"].replace(
        "redis://redis:6379/0", f"redis://127.0.0.1:6379/{REDIS_DB}"
    )
    env.update(
        PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        HOME=os.environ.get("HOME", "/tmp"),
        PYTHONPATH=str(ROOT),
        AGENT_SESSIONS_SWEEP_SECONDS="1",
    )
    yield env
    with psycopg.connect(dbname="postgres", autocommit=True, **PG) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Processes:
    """Processes this test starts, each in its own session, stopped by process-group id."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[tuple[subprocess.Popen, object]] = []

    def start(self, name: str, argv: list[str], env: dict) -> Path:
        log = self.tmp_path / f"{name}.log"
        handle = log.open("w")
        proc = subprocess.Popen(
            argv, env=env, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.started.append((proc, handle))
        return log

    def stop(self) -> None:
        for proc, _ in self.started:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, handle in self.started:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            handle.close()


@pytest.fixture
def processes(tmp_path):
    running = Processes(tmp_path)
    yield running
    running.stop()


def _wait(predicate, what: str, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what}\n--- {log.name} ---\n{log.read_text(errors='replace')[-4000:]}")


def _healthy(argv: list[str], env: dict) -> bool:
    return subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, timeout=30).returncode == 0


@pytest.mark.e2e
@pytest.mark.postgres_only  # the compose file uses PostgreSQL
@pytest.mark.timeout(240)
def test_compose_commands_run_against_local_services(compose, stack_env, processes):
    services = compose["services"]
    migrate = subprocess.run(
        [_interpolate(w) for w in services["migrate"]["command"]],
        env=stack_env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    assert "Applying agent_sessions.0001_squashed_0028_context_owner... OK" in migrate.stdout
    # The image's build step, into a temporary STATIC_ROOT: WhiteNoise serves what it collected.
    collect = ["python", "manage.py", "collectstatic", "--noinput", "-v", "0"]
    assert _healthy(collect, {**stack_env, "DJANGO_DEBUG": "true"})
    port = _free_port()
    web = [_interpolate(w) for w in services["web"]["command"]]
    web[web.index("0.0.0.0:8000")] = f"127.0.0.1:{port}"
    log = processes.start("web", web, {**stack_env, "WEB_CONCURRENCY": "2"})
    probe = [
        _interpolate(w).replace("127.0.0.1:8000", f"127.0.0.1:{port}") for w in services["web"]["healthcheck"]["test"]
    ]
    assert probe[0] == "CMD"
    _wait(lambda: _healthy(probe[1:], stack_env), "the web health check", log, timeout=120)
    for asset in ("admin/css/base.css", "agent_sessions/tree.css", "ninja/swagger-ui-bundle.js"):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/static/{asset}", timeout=10) as response:
            assert response.status == 200, asset
            assert response.read(), asset

    queue = f"compose-{uuid.uuid4().hex[:8]}"
    node = f"{queue}@{socket.gethostname()}"
    worker = [_interpolate(w) for w in services["worker"]["command"]] + ["-Q", queue, "-n", node]
    worker_log = processes.start("worker", worker, stack_env)
    ping = _interpolate(services["worker"]["healthcheck"]["test"][1]).replace("celery@$$HOSTNAME", node)
    _wait(lambda: _healthy(["sh", "-c", ping], stack_env), "the worker health check", worker_log)

    call = ["celery", "-A", "project", "call", "agent_sessions.tasks.sweep_pending_compactions", "--queue", queue]
    assert _healthy(call, stack_env)
    _wait(
        lambda: re.search(r"sweep_pending_compactions\[[^\]]+\] succeeded", worker_log.read_text()),
        "the worker to run the sweeper",
        worker_log,
    )

    beat_log = processes.start("beat", [_interpolate(w) for w in services["beat"]["command"]], stack_env)
    _wait(lambda: "Sending due task agent-sessions-sweep-compactions" in beat_log.read_text(), "beat", beat_log)
    import redis

    redis.Redis(host="127.0.0.1", port=6379, db=REDIS_DB).delete("celery")  # beat's messages: nobody consumes them


@pytest.mark.parametrize(
    ("url", "flag", "options"),
    [
        ("postgres://u@db:5432/x", "true", {"server_side_binding": True, "prepare_threshold": 5}),
        ("postgres://u@db:5432/x", "false", {}),
        ("sqlite:////tmp/x.sqlite3", "true", {"timeout": 30}),  # SQLite: the flag means nothing
    ],
)
def test_prepared_statements_setting_reaches_the_connection_options(url, flag, options):
    """``DATABASE_PREPARED_STATEMENTS`` (on in docker-compose.yml) sets Django's psycopg options, only on Postgres."""
    env = {**os.environ, "DATABASE_URL": url, "DATABASE_PREPARED_STATEMENTS": flag, "PYTHONPATH": str(ROOT)}
    script = "import json, project.settings as s; print(json.dumps(s.DATABASES['default'].get('OPTIONS', {})))"
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert {k: got[k] for k in options if k in got} == options
    assert ("server_side_binding" in got) == bool(options.get("server_side_binding"))
