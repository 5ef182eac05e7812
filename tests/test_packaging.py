"""What ships and how the suite is laid out: declared dependencies, the version, py.typed, test hygiene.

The full install check (wheel → clean venv → startproject → SQLite and Postgres) is
``scripts/wheel_check.py``, run by ``make wheel-check`` in CI; these are its cheap invariants.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import agent_sessions
from scripts import wheel_check

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_psycopg_is_a_base_dependency_because_pgtrigger_imports_it_on_sqlite_too():
    dependencies = PYPROJECT["project"]["dependencies"]
    assert any(re.fullmatch(r"psycopg\[binary\]>=3\.\d+", d) for d in dependencies), dependencies


def test_the_version_is_written_once_in_the_package():
    assert "version" not in PYPROJECT["project"]
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "agent_sessions.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", agent_sessions.__version__)


def test_py_typed_templates_and_static_files_are_package_data():
    package_data = PYPROJECT["tool"]["setuptools"]["package-data"]["agent_sessions"]
    assert package_data == ["py.typed", "templates/**/*", "static/**/*"]
    assert (ROOT / "agent_sessions" / "py.typed").is_file()


def test_the_wheel_check_reads_the_readme_settings_and_quick_start():
    blocks = wheel_check.readme_quick_start()
    files = wheel_check.readme_project_files()
    assert wheel_check.readme_apps(files) == ["ninja", "pgtrigger", "agent_sessions"]
    assert {"mysite/settings.py", "mysite/urls.py", "mysite/__init__.py"} <= set(files)
    assert any("build_session(" in block for block in blocks)
    assert not any(block.startswith("# mysite/") for block in blocks)
    assert "celery -A mysite worker" in wheel_check.readme_shell("celery -A")
    assert '{"message": {' in wheel_check.readme_shell("curl")
    assert wheel_check.readme_install_extras() == "[redis]"


def _defines_a_test(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id.startswith("test_") for t in node.targets
        ):
            return True  # e.g. a schemathesis- or hypothesis-built test bound to a name
    return False


def test_modules_named_test_hold_tests_and_helpers_live_in_support():
    helpers = [str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py") if not _defines_a_test(p)]
    assert helpers == [], "move helper modules to tests/support/"


def test_no_file_wide_noqa():
    pattern = re.compile(r"^#\s*(ruff|flake8)\s*:\s*noqa", re.M | re.I)
    offenders = [
        str(p.relative_to(ROOT))
        for folder in ("agent_sessions", "tests")
        for p in (ROOT / folder).rglob("*.py")
        if "migrations" not in p.parts and pattern.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []
