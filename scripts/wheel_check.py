"""Install the package as a user does and run a fresh Django project on it, on SQLite and PostgreSQL.

Builds the wheel from a clean copy of the sources, installs it into a new venv with its declared
dependencies only (nothing from requirements.txt), runs ``django-admin startproject`` and adds
exactly the README's settings (its ``INSTALLED_APPS`` lines). Then, once per database (a fresh
one each): ``manage.py check``, ``migrate``, the README's quick start blocks verbatim, the admin
login page and the shipped static files over ``runserver``, and a session's admin tree page
(the shipped templates) through Django's test client.

    python scripts/wheel_check.py [--db sqlite] [--db postgres] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PACKAGE = "agent_sessions"
PG_DSN = os.environ.get("AGENT_SESSIONS_WHEEL_PG", "host=127.0.0.1 port=5432 user=postgres dbname=postgres")
PROJECT = "wheelsite"
STATIC_FILES = ("agent_sessions/tree.css", "agent_sessions/tree.js", "admin/css/base.css")


class CheckFailed(RuntimeError):
    """A step of the check failed; the message says which and why."""


def step(title: str) -> float:
    print(f"-- {title}", flush=True)
    return time.monotonic()


def run(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: int = 600) -> str:
    """Run ``cmd`` and return its stdout and stderr; on failure raise CheckFailed with them."""
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()[-4000:]
        raise CheckFailed(f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{output}")
    return done.stdout + done.stderr


# ── the wheel ────────────────────────────────────────────────────────────────


def source_files() -> set[str]:
    """Every file of the package in the source tree (what the wheel must hold)."""
    base = ROOT / PACKAGE
    return {
        str(Path(PACKAGE) / path.relative_to(base))
        for path in base.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def build_wheel(work: Path) -> Path:
    """A wheel built from a copy of pyproject.toml, README.md and the package (no stale build/ dir)."""
    src = work / "src"
    src.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", src)
    shutil.copy2(README, src)
    shutil.copytree(ROOT / PACKAGE, src / PACKAGE, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = work / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(dist), str(src)])
    wheels = list(dist.glob("*.whl"))
    if len(wheels) != 1:
        raise CheckFailed(f"expected one wheel in {dist}, found {wheels}")
    return wheels[0]


def check_wheel_contents(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        requires = [line for line in archive.read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")]
    missing = sorted(source_files() - names)
    if missing:
        raise CheckFailed(f"the wheel lacks {len(missing)} file(s) of the package: {missing[:20]}")
    for needed in (f"{PACKAGE}/py.typed", f"{PACKAGE}/migrations/0001_squashed_0028_context_owner.py"):
        if needed not in names:
            raise CheckFailed(f"the wheel lacks {needed}")
    if not any(re.match(r"Requires-Dist: psycopg\[binary\]", line) for line in requires):
        raise CheckFailed(f"psycopg[binary] is not a base dependency: {requires}")
    print(f"   {wheel.name}: {len(names)} files, every package file present; {len(requires)} Requires-Dist")


def make_venv(work: Path, wheel: Path) -> Path:
    """A new venv holding the wheel and what it declares, nothing else."""
    venv = work / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], timeout=900)
    return venv


# ── the project ──────────────────────────────────────────────────────────────


def readme_quick_start() -> list[str]:
    """The ```python blocks of README's "## Quick start" section, in order (as tests/test_readme.py reads them)."""
    text = README.read_text(encoding="utf-8")
    section = re.search(r"^## Quick start\n(.*?)(?=^## )", text, re.S | re.M)
    if not section:
        raise CheckFailed("README.md has no '## Quick start' section")
    return re.findall(r"^```python\n(.*?)^```", section.group(1), re.S | re.M)


def readme_apps(blocks: list[str]) -> list[str]:
    """The apps the README adds to INSTALLED_APPS (the quoted entries of its INSTALLED_APPS block)."""
    for block in blocks:
        found = re.search(r"^INSTALLED_APPS = \[\n(.*?)^\]", block, re.S | re.M)
        if found:
            apps = re.findall(r'^\s*"([\w.]+)",', found.group(1), re.M)
            if apps:
                return apps
    raise CheckFailed("README.md's quick start shows no INSTALLED_APPS")


def start_project(work: Path, venv: Path, apps: list[str]) -> Path:
    """``django-admin startproject`` plus the README's apps, and a settings module per database."""
    project = work / "project"
    project.mkdir()
    run([str(venv / "bin" / "django-admin"), "startproject", PROJECT, str(project)])
    settings = project / PROJECT / "settings.py"
    text = settings.read_text(encoding="utf-8")
    text += "\n# The README's quick start settings.\nINSTALLED_APPS += " + json.dumps(apps) + "\n"
    settings.write_text(text, encoding="utf-8")
    (project / PROJECT / "settings_postgres.py").write_text(
        "from .settings import *  # noqa: F403\n\n"
        "import os\n\n"
        "DATABASES = {'default': {\n"
        "    'ENGINE': 'django.db.backends.postgresql', 'NAME': os.environ['WHEEL_CHECK_PG_NAME'],\n"
        "    'HOST': '127.0.0.1', 'PORT': '5432', 'USER': 'postgres',\n"
        "}}\n",
        encoding="utf-8",
    )
    (project / "quick_start.py").write_text(QUICK_START, encoding="utf-8")
    return project


# Runs inside the project's venv: the README's blocks verbatim, then the admin tree page of the
# session they built, rendered from the installed templates.
QUICK_START = """
import json
import sys

import django

django.setup()

from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import setup_test_environment

blocks = json.load(open(sys.argv[1], encoding="utf-8"))
namespace = {"__name__": "readme_quick_start"}
for block in blocks:
    exec(compile(block, "README.md (quick start)", "exec"), namespace)

session = namespace["session"]
ids = [m["id"] for m in session.get_history("a1")]
assert ids == ["u1", "a1"], ids
assert "The user's name is Ada." in session.freeze_system_prompt()

setup_test_environment()
user = get_user_model().objects.create_superuser("wheel", "wheel@example.com", "wheel-check-password")
client = Client()
client.force_login(user)
response = client.get("/admin/agent_sessions/sessionrecord/chat-42/tree/")
assert response.status_code == 200, (response.status_code, response.content[:500])
page = response.content.decode()
assert "agent_sessions/tree.css" in page and "Hello Ada!" in page, page[:500]
print("quick start ran; tree page", len(page), "bytes")
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def serve_and_fetch(python: Path, project: Path, env: dict[str, str]) -> None:
    """``runserver`` on loopback: the admin login page and the shipped static files answer 200."""
    port = free_port()
    log = (project / "runserver.log").open("w")
    server = subprocess.Popen(
        [str(python), "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=project,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                status, body = fetch(f"{base}/admin/login/")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    raise CheckFailed("runserver did not answer:\n" + (project / "runserver.log").read_text()) from None
                time.sleep(0.3)
        if status != 200 or b'name="username"' not in body:
            raise CheckFailed(f"GET /admin/login/ answered {status}: {body[:300]!r}")
        for name in STATIC_FILES:
            status, body = fetch(f"{base}/static/{name}")
            if status != 200 or not body:
                raise CheckFailed(f"GET /static/{name} answered {status} ({len(body)} bytes)")
        print(f"   /admin/login/ 200; static {', '.join(STATIC_FILES)} 200")
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()


def create_database(name: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(name: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def check_database(db: str, venv: Path, project: Path, blocks_file: Path) -> None:
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", DJANGO_SETTINGS_MODULE=f"{PROJECT}.settings")
    pg_name = ""
    if db == "postgres":
        pg_name = f"agent_sessions_wheel_{uuid.uuid4().hex[:8]}"
        create_database(pg_name)
        env.update(DJANGO_SETTINGS_MODULE=f"{PROJECT}.settings_postgres", WHEEL_CHECK_PG_NAME=pg_name)
    else:
        (project / "db.sqlite3").unlink(missing_ok=True)
    try:
        began = step(f"{db}: manage.py check")
        report = run([str(python), "manage.py", "check"], cwd=project, env=env).strip()
        print("   " + report.replace("\n", "\n   "))
        step(f"{db}: manage.py migrate")
        run([str(python), "manage.py", "migrate", "--noinput"], cwd=project, env=env)
        step(f"{db}: README quick start, admin tree page")
        print("   " + run([str(python), "quick_start.py", str(blocks_file)], cwd=project, env=env).strip())
        step(f"{db}: runserver: admin login page, static files")
        serve_and_fetch(python, project, env)
        print(f"   {db} passed in {time.monotonic() - began:.1f} s")
    finally:
        if pg_name:
            drop_database(pg_name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", action="append", choices=["sqlite", "postgres"], help="default: both")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    databases = args.db or ["sqlite", "postgres"]
    work = Path(tempfile.mkdtemp(prefix="agent-sessions-wheel-"))
    began = time.monotonic()
    try:
        step("build the wheel")
        wheel = build_wheel(work)
        check_wheel_contents(wheel)
        step("a clean venv with the wheel and its declared dependencies")
        venv = make_venv(work, wheel)
        blocks = readme_quick_start()
        apps = readme_apps(blocks)
        step(f"django-admin startproject, INSTALLED_APPS += {apps}")
        project = start_project(work, venv, apps)
        blocks_file = work / "quick_start_blocks.json"
        blocks_file.write_text(json.dumps(blocks), encoding="utf-8")
        for db in databases:
            check_database(db, venv, project, blocks_file)
    except CheckFailed as exc:
        print(f"\nwheel check FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"wheel check passed ({', '.join(databases)}) in {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
