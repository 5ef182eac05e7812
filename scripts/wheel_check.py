"""Install the package as a user does and run a fresh Django project on it, on SQLite and PostgreSQL.

Builds the sdist and the wheel (``python -m build``) from a clean copy of the sources and checks
their metadata (``twine check``); installs the wheel into a new venv with its declared
dependencies only (nothing from requirements.txt) and, there, without extras: the framework
adapters fail with an ImportError naming their extra. Each extra is then installed on top of that
venv (a venv of its own that sees the base one) and its modules import. Then the README's path:
its install line's extras, ``django-admin startproject mysite`` plus the quick start's project
files verbatim (settings, urls, the Celery app), and once per database (a fresh one each):
``manage.py check``, ``migrate``, every shipped command's ``--help``, the quick start's code
blocks twice, the admin login page, the shipped static files and ``/api/docs`` (no asset from
outside the site) over ``runserver``, the README's curl requests twice, a session's admin tree
page through Django's test client, and (once) the README's Celery worker command.

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
import tomllib
import urllib.error
import urllib.request
import uuid
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PACKAGE = "agent_sessions"
PG_DSN = os.environ.get("AGENT_SESSIONS_WHEEL_PG", "host=127.0.0.1 port=5432 user=postgres dbname=postgres")
PROJECT = "mysite"  # the README's project name, so its file blocks apply as written
PROJECT_FILE = re.compile(r"# ([\w/]+\.py)\n")
REDIS_URL = os.environ.get("AGENT_SESSIONS_WHEEL_REDIS", "redis://127.0.0.1:6379/13")
# What each extra makes importable (a module of the package, or the extra's own package).
EXTRA_MODULES = {
    "redis": ["redis", "kombu.transport.redis"],  # the Celery broker transport, not only the client
    "fast": ["orjson"],
    "openai-agents": ["agent_sessions.integrations.openai_agents", "agent_sessions.integrations.openai_agents_calls"],
    "langchain": ["agent_sessions.integrations.langchain", "agent_sessions.integrations.langchain_calls"],
    "pydantic-ai": ["agent_sessions.integrations.pydantic_ai", "agent_sessions.integrations.pydantic_ai_calls"],
    "asgi": ["uvicorn", "uvicorn_worker"],  # the servers ChatView streams under (compose's chat service)
}
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
    run([sys.executable, "-m", "build", "--outdir", str(dist), str(src)])
    wheels, sdists = list(dist.glob("*.whl")), list(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise CheckFailed(f"expected one wheel and one sdist in {dist}, found {sorted(dist.iterdir())}")
    report = run([sys.executable, "-m", "twine", "check", "--strict", *map(str, wheels + sdists)])
    print("   twine check: " + " ".join(report.split()))
    return wheels[0]


def check_wheel_contents(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        requires = [line for line in archive.read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")]
    missing = sorted(source_files() - names)
    if missing:
        raise CheckFailed(f"the wheel lacks {len(missing)} file(s) of the package: {missing[:20]}")
    if f"{PACKAGE}/py.typed" not in names:
        raise CheckFailed(f"the wheel lacks {PACKAGE}/py.typed")
    if not any(re.fullmatch(rf"{PACKAGE}/migrations/0001_\w+\.py", name) for name in names):
        raise CheckFailed(f"the wheel lacks the initial migration {PACKAGE}/migrations/0001_*.py")
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


def import_probe(python: Path, module: str) -> tuple[bool, str]:
    """Import ``module`` with Django set up on empty settings; (imported, the error's last line)."""
    code = (
        "import django; from django.conf import settings; "
        "settings.configure(INSTALLED_APPS=['django.contrib.contenttypes', 'django.contrib.auth', 'agent_sessions']); "
        f"django.setup(); import {module}"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300, check=False)
    return done.returncode == 0, (done.stderr.strip().splitlines() or [""])[-1]


def site_packages(venv: Path) -> Path:
    (found,) = venv.glob("lib/python*/site-packages")
    return found


def check_extras(work: Path, venv: Path, wheel: Path) -> None:
    """Without extras each adapter's ImportError names its extra; with an extra (alone) its modules import."""
    python = venv / "bin" / "python"
    for extra, modules in EXTRA_MODULES.items():
        for module in modules:
            if not module.startswith(PACKAGE):
                continue
            imported, error = import_probe(python, module)
            if imported or f"[{extra}]" not in error:
                raise CheckFailed(f"without the [{extra}] extra, import {module} should name it; got: {error!r}")
    print(f"   without extras: each adapter's ImportError names its extra ({', '.join(EXTRA_MODULES)})")
    declared = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    )
    unchecked = declared - set(EXTRA_MODULES) - {"all", "postgres", "examples"}
    if unchecked:
        raise CheckFailed(f"extras with no import check in EXTRA_MODULES: {sorted(unchecked)}")
    for extra, modules in EXTRA_MODULES.items():
        began = time.monotonic()
        overlay = work / f"venv-{extra}"
        run([sys.executable, "-m", "venv", str(overlay)])
        # The overlay sees the base venv's packages, so pip installs only what the extra adds.
        (site_packages(overlay) / "base-venv.pth").write_text(str(site_packages(venv)) + "\n", encoding="utf-8")
        python = overlay / "bin" / "python"
        run([str(python), "-m", "pip", "install", "--quiet", f"{wheel}[{extra}]"], timeout=900)
        for module in modules:
            imported, error = import_probe(python, module)
            if not imported:
                raise CheckFailed(f"with the [{extra}] extra, import {module} fails: {error}")
        print(f"   [{extra}]: {', '.join(modules)} import ({time.monotonic() - began:.0f} s)")
        shutil.rmtree(overlay, ignore_errors=True)


def readme_install_extras() -> str:
    """The extras of the README's install line (``pip install "/path/to/django-agent-sessions[redis]"``)."""
    found = re.search(r'pip install "/path/to/django-agent-sessions(\[[\w,-]+\])?"', README.read_text(encoding="utf-8"))
    if not found:
        raise CheckFailed('README.md shows no `pip install "/path/to/django-agent-sessions[...]"` line')
    return found.group(1) or ""


# ── the project ──────────────────────────────────────────────────────────────


def quick_start_section() -> str:
    text = README.read_text(encoding="utf-8")
    section = re.search(r"^## Quick start\n(.*?)(?=^## )", text, re.S | re.M)
    if not section:
        raise CheckFailed("README.md has no '## Quick start' section")
    return section.group(1)


def readme_python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", quick_start_section(), re.S | re.M)


def readme_quick_start() -> list[str]:
    """The quick start's ```python code blocks, in order (as tests/test_readme.py reads them)."""
    return [block for block in readme_python_blocks() if not PROJECT_FILE.match(block)]


def readme_project_files() -> dict[str, str]:
    """``{path: block}``: the quick start's blocks headed ``# <path>.py``, files of the reader's project."""
    return {m.group(1): block for block in readme_python_blocks() if (m := PROJECT_FILE.match(block))}


def readme_shell(word: str) -> str:
    """The quick start's ```sh block that contains ``word``."""
    for block in re.findall(r"^```sh\n(.*?)^```", quick_start_section(), re.S | re.M):
        if word in block:
            return block
    raise CheckFailed(f"README.md's quick start has no ```sh block with {word!r}")


def readme_apps(files: dict[str, str]) -> list[str]:
    """The apps the README adds to INSTALLED_APPS (the quoted entries of its settings block)."""
    found = re.search(r"^INSTALLED_APPS \+= \[\n(.*?)^\]", files.get(f"{PROJECT}/settings.py", ""), re.S | re.M)
    apps = re.findall(r'^\s*"([\w.]+)",', found.group(1), re.M) if found else []
    if not apps:
        raise CheckFailed("README.md's quick start shows no INSTALLED_APPS += [...] in mysite/settings.py")
    return apps


def start_project(work: Path, venv: Path, files: dict[str, str]) -> Path:
    """``django-admin startproject`` plus the README's project files (appended as written), and a
    settings module per database. A file the fresh project lacks (an app's ``sessions.py``) is left out."""
    project = work / "project"
    project.mkdir()
    run([str(venv / "bin" / "django-admin"), "startproject", PROJECT, str(project)])
    for name, block in files.items():
        target = project / name
        if target.exists():
            target.write_text(target.read_text(encoding="utf-8") + "\n\n" + block, encoding="utf-8")
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
user = get_user_model().objects.filter(username="admin").first() or get_user_model().objects.create_superuser(
    "admin", "admin@example.com", "wheel-check-password"
)
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
        check_docs_page(base)
        curl = readme_shell("curl").replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        curl = "\n".join(line for line in curl.splitlines() if "manage.py runserver" not in line)
        for attempt in (1, 2):
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", curl], cwd=project, env=env, capture_output=True, text=True
            )
            if done.returncode != 0:
                raise CheckFailed(f"README curl run {attempt} exited {done.returncode}: {done.stderr[-2000:]}")
            listed = json_values(done.stdout)[-1]  # curl prints its bodies with no newline between them
            names = [item["name"] for item in listed["items"]]
            if names.count("From curl") != attempt:
                raise CheckFailed(f"README curl run {attempt}: GET /api/sessions lists {names}")
        print("   README curl requests ran twice: two 'From curl' sessions listed")
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()


def json_values(text: str) -> list:
    """The JSON values written one after another in ``text``."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while at < len(text := text.strip()):
        value, at = decoder.raw_decode(text, at)
        values.append(value)
        while at < len(text) and text[at].isspace():
            at += 1
    return values


def check_docs_page(base: str) -> None:
    """``/api/docs`` refers to no asset outside the site, and each of its assets answers 200."""
    status, body = fetch(f"{base}/api/docs")
    page = body.decode()
    if status != 200:
        raise CheckFailed(f"GET /api/docs answered {status}")
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page)
    outside = [url for url in assets if not url.startswith("/")]
    if outside or not any(url.endswith("swagger-ui-bundle.js") for url in assets):
        raise CheckFailed(f"/api/docs loads assets from outside the site: {outside or assets}")
    for url in assets:
        status, content = fetch(base + url)
        if status != 200 or not content:
            raise CheckFailed(f"GET {url} (an asset of /api/docs) answered {status}")
    print(f"   /api/docs: {len(assets)} assets, all from the site, all 200")


def check_worker(python: Path, project: Path, env: dict[str, str]) -> None:
    """The README's worker command starts, answers a ping and lists the compaction tasks and configurations."""
    command = readme_shell("celery -A").strip().split()
    if command[:3] != ["celery", "-A", PROJECT]:
        raise CheckFailed(f"README's worker command is {command}")
    env = {**env, "CELERY_BROKER_URL": REDIS_URL}
    node = f"wheel-{uuid.uuid4().hex[:8]}@%h"
    log_path = project / "worker.log"
    log = log_path.open("w")
    worker = subprocess.Popen(
        [str(python.parent / command[0]), *command[1:], "--pool", "solo", "-n", node, "-Q", node.split("@")[0]],
        cwd=project,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        while "session configurations in this worker" not in log_path.read_text():
            if worker.poll() is not None or time.monotonic() > deadline:
                raise CheckFailed("the README's worker did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(0.5)
        text = log_path.read_text()
        if "agent_sessions.tasks.compact_session" not in text:
            raise CheckFailed("the worker does not list agent_sessions.tasks.compact_session:\n" + text[-3000:])
        line = next(x for x in text.splitlines() if "session configurations in this worker" in x)
        print("   worker up: " + line.split("agent_sessions: ")[-1])
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()


def package_commands() -> list[str]:
    """The management commands the package ships (``management/commands/*.py``, helpers start with ``_``)."""
    folder = ROOT / PACKAGE / "management" / "commands"
    return sorted(path.stem for path in folder.glob("*.py") if not path.stem.startswith("_"))


def check_commands(python: Path, project: Path, env: dict[str, str]) -> None:
    """``manage.py <command> --help`` of every shipped command: each imports only declared dependencies."""
    commands = package_commands()
    if not commands:
        raise CheckFailed("the package ships no management commands (expected several)")
    for command in commands:
        run([str(python), "manage.py", command, "--help"], cwd=project, env=env)
    print(f"   {len(commands)} commands answer --help: {', '.join(commands)}")


def create_database(name: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(name: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def check_plain(venv: Path, work: Path) -> None:
    """The venv without extras: check, migrate and every command's --help on a bare startproject."""
    python = venv / "bin" / "python"
    project = work / "plain"
    project.mkdir()
    run([str(venv / "bin" / "django-admin"), "startproject", "plainsite", str(project)])
    settings = project / "plainsite" / "settings.py"
    settings.write_text(
        settings.read_text(encoding="utf-8") + '\nINSTALLED_APPS += ["pgtrigger", "agent_sessions"]\n', encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", DJANGO_SETTINGS_MODULE="plainsite.settings")
    run([str(python), "manage.py", "check"], cwd=project, env=env)
    run([str(python), "manage.py", "migrate", "--noinput"], cwd=project, env=env)
    check_commands(python, project, env)


def check_database(db: str, venv: Path, project: Path, blocks_file: Path, *, worker: bool) -> None:
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", DJANGO_SETTINGS_MODULE=f"{PROJECT}.settings")
    env["CELERY_BROKER_URL"] = REDIS_URL  # the README's settings read it (their default is Redis database 0)
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
        step(f"{db}: every management command's --help")
        check_commands(python, project, env)
        step(f"{db}: README quick start twice, admin tree page")
        for _ in range(2):
            print("   " + run([str(python), "quick_start.py", str(blocks_file)], cwd=project, env=env).strip())
        step(f"{db}: runserver: admin login page, static files, /api/docs, README curl requests twice")
        serve_and_fetch(python, project, env)
        if worker:
            step(f"{db}: README's Celery worker ({REDIS_URL})")
            check_worker(python, project, env)
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
        step("python -m build (sdist and wheel), twine check")
        wheel = build_wheel(work)
        check_wheel_contents(wheel)
        step("a clean venv with the wheel and its declared dependencies, no extras")
        venv = make_venv(work, wheel)
        step("no extras: a bare startproject's check, migrate, every command's --help")
        check_plain(venv, work)
        step("each extra on top of the plain venv")
        check_extras(work, venv, wheel)
        extras = readme_install_extras()
        step(f"the README's install line: the wheel{extras}")
        run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", f"{wheel}{extras}"], timeout=900)
        files = readme_project_files()
        step(f"django-admin startproject {PROJECT} + README's {', '.join(sorted(files))} (apps {readme_apps(files)})")
        project = start_project(work, venv, files)
        blocks_file = work / "quick_start_blocks.json"
        blocks_file.write_text(json.dumps(readme_quick_start()), encoding="utf-8")
        for db in databases:
            check_database(db, venv, project, blocks_file, worker=db == databases[0])
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
