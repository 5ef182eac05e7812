"""Imports run one way: each layer of docs/architecture.md imports only its own layer and those below.

Every ``import`` in ``agent_sessions/`` counts, at module level or inside a function
(a lazy import is still a dependency); only ``if TYPE_CHECKING:`` imports are exempt.  Imports by
name count too: ``importlib.import_module("…")``, ``import_string("…")``, ``__import__("…")``, and
any other string in the code (not a docstring) that is a dotted path into the package, such as a
setting's default naming a class, which some other module imports by name.  The few such names
that point up on purpose are the :data:`DECLARED_SEAMS`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import agent_sessions

PACKAGE = Path(agent_sessions.__file__).parent

# Lowest first; a module belongs to the layer of the longest prefix listed.  Keep in step
# with the diagram in docs/architecture.md.
LAYERS: list[tuple[str, list[str]]] = [
    (
        "foundation",
        [
            "exceptions",
            "conf",
            "types",
            "ui_message",
            "tokens",
            "overlays",
            "asyncutils",
            "dbthreads",
            "registry",
            "credentials",
            "text",
            "signals",
            "events",
        ],
    ),
    (
        "sql",
        [
            "search",
            "triggers",
            "reconnect",
            "storage.backends",
            "storage.sqlite",
            "storage.postgres",
            "storage.walks",
            "storage.range_reads",
            "storage.bare_reads",
            "storage.appends",
            "storage.pops",
            "storage.postgres_append",
            "storage.postgres_plans",
            "storage.postgres_reads",
            "storage.decode",
        ],
    ),
    ("orm", ["models", "querysets", "migrations"]),
    ("storage", ["storage"]),
    ("domain", ["context", "compaction", "summarizers", "tools", "leases", "session.context", "session.compaction"]),
    ("session", ["session"]),
    ("orchestration", ["manager", "convert"]),
    ("surfaces", ["api", "chat", "admin", "management", "integrations", "tasks", "celery", "urls", "apps", "checks"]),
]
# Names of upper modules that a lower one holds as a string, on purpose: (module, target) → why.
DECLARED_SEAMS: dict[tuple[str, str], str] = {
    ("conf", "tasks"): "AGENT_SESSIONS_COMPACTION_RUNNER defaults to the Celery runner, a setting naming a class",
}
PACKAGE_INIT = len(LAYERS) - 1  # agent_sessions/__init__.py re-exports everything (lazily)
RANK = {prefix: rank for rank, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> int:
    """Rank of the longest listed prefix of ``module`` (relative to the package)."""
    if not module:
        return PACKAGE_INIT
    parts = module.split(".")
    for size in range(len(parts), 0, -1):
        prefix = ".".join(parts[:size])
        if prefix in RANK:
            return RANK[prefix]
    raise AssertionError(f"module {module!r} is in no layer: add it to LAYERS and docs/architecture.md")


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def imports_of(
    path: Path, module: str | None = None, *, seams: bool = False, mentions: bool = True
) -> list[tuple[int, str]]:
    """(line, imported module relative to the package) for every import of agent_sessions code.

    Imports by name included; the :data:`DECLARED_SEAMS` only with ``seams=True``; a dotted path
    in any other string (a setting's default, a name that reads like a module) unless ``mentions=False``.
    """
    module = module_name(path) if module is None else module
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    exempt = _type_checking_lines(tree)
    found = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in exempt:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif (node.module or "").startswith("agent_sessions"):
                target = node.module.removeprefix("agent_sessions").lstrip(".")
            else:
                continue
            for alias in node.names:  # ``from . import tasks`` imports the module ``tasks``
                candidate = f"{target}.{alias.name}".lstrip(".")
                is_module = (PACKAGE / candidate.replace(".", "/")).with_suffix(".py").exists() or (
                    PACKAGE / candidate.replace(".", "/")
                ).is_dir()
                found.append((node.lineno, candidate if is_module else target))
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names if alias.name.startswith("agent_sessions")]
            found.extend((node.lineno, name.removeprefix("agent_sessions").lstrip(".")) for name in names)
    found.extend(named_imports(tree, package, exempt, mentions=mentions))
    if not seams:
        found = [(line, target) for line, target in found if (module, target) not in DECLARED_SEAMS]
    return found


DYNAMIC_IMPORTERS = {"import_module", "import_string", "__import__"}
DOTTED_PATH = re.compile(r"agent_sessions(\.[A-Za-z_]\w*)+")


def _module_at(dotted: str) -> str | None:
    """The longest prefix of ``dotted`` (relative to the package) that is a module of it, or None."""
    parts = dotted.split(".")
    for size in range(len(parts), 0, -1):
        path = PACKAGE.joinpath(*parts[:size])
        if path.with_suffix(".py").exists() or (path / "__init__.py").exists():
            return ".".join(parts[:size])
    return None


def named_imports(tree: ast.AST, package: str, exempt: set[int], *, mentions: bool = True) -> list[tuple[int, str]]:
    """Modules of the package named by a string: the argument of a dynamic import, or (``mentions``) any dotted path."""
    prose = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}  # docstrings
    found = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in exempt:
            continue
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            name = node.args[0].value
            if callee in DYNAMIC_IMPORTERS and isinstance(name, str) and name.startswith("."):
                level = len(name) - len(name.lstrip("."))
                base = package.split(".") if package else []
                base = base[: len(base) - (level - 1)] if level > 1 else base
                target = _module_at(".".join([*base, name.lstrip(".")]).strip("."))
                if target:
                    found.append((node.lineno, target))
            elif callee in DYNAMIC_IMPORTERS and isinstance(name, str) and DOTTED_PATH.fullmatch(name):
                target = _module_at(name.removeprefix("agent_sessions."))
                if target:
                    found.append((node.lineno, target))
        is_text = mentions and isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
        if is_text and DOTTED_PATH.fullmatch(node.value):
            target = _module_at(node.value.removeprefix("agent_sessions."))
            if target:
                found.append((node.lineno, target))
    return found


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts)


def test_every_module_is_in_a_layer():
    for path in _sources():
        layer_of(module_name(path))


def test_imports_point_down_the_layers():
    upward = []
    for path in _sources():
        module = module_name(path)
        for line, target in imports_of(path):
            if layer_of(target) > layer_of(module):
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module or '.'} imports {target}")
    assert not upward, "imports against the layer order (docs/architecture.md):\n" + "\n".join(upward)


def test_session_parts_do_not_import_the_facade():
    for name in ("context", "compaction", "tool_results"):
        path = PACKAGE / "session" / f"{name}.py"
        assert all(target != "session.facade" for _, target in imports_of(path)), name


def unit_of(module: str) -> str:
    """The longest listed prefix of ``module``: the unit the layer table places."""
    parts = module.split(".")
    return next((".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in RANK), module)


def test_units_have_no_import_cycles():
    """Within a layer too: no two units (the table's entries) import each other, directly or not."""
    edges: dict[str, set[str]] = {}
    for path in _sources():
        source = unit_of(module_name(path))
        for _, target in imports_of(path):
            if target and unit_of(target) != source:
                edges.setdefault(source, set()).add(unit_of(target))

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(nxt == goal or nxt not in seen and reaches(nxt, goal, seen | {nxt}) for nxt in edges.get(start, ()))

    cycles = sorted(f"{a} ⇄ {b}" for a in edges for b in edges[a] if a < b and reaches(b, a, {b}))
    assert not cycles, cycles


def test_the_check_sees_an_upward_import_and_an_unlisted_module(tmp_path):
    """The walk itself works: a lazy upward import is reported, an unlisted module has no layer."""
    probe = tmp_path / "probe.py"
    probe.write_text("def later():\n    from ..manager import SessionManager\n")
    targets = [t for _, t in imports_of(probe, module="search.probe")]
    assert targets == ["manager"]
    assert layer_of("manager") > layer_of("search.probe")
    with pytest.raises(AssertionError, match="is in no layer"):
        layer_of("brand_new_module")


def test_the_check_sees_imports_by_name(tmp_path):
    """import_module / import_string / __import__ and dotted paths in strings count; docstrings do not."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""Mentions agent_sessions.manager in prose."""\n'
        "from importlib import import_module\n"
        "from django.utils.module_loading import import_string\n"
        "RUNNER = 'agent_sessions.tasks.CeleryCompactionRunner'\n"
        "def later():\n"
        "    import_module('agent_sessions.api.config')\n"
        "    import_module('..convert', __package__)\n"
        "    import_string('agent_sessions.admin.hooks.compact_now')\n"
        "    __import__('agent_sessions.management')\n"
        "    return 'agent_sessions.W001', 'not agent_sessions.manager'\n"
    )
    targets = sorted({t for _, t in imports_of(probe, module="search.probe")})
    assert targets == ["admin.hooks", "api.config", "convert", "management", "tasks"]
    imported = sorted({t for _, t in imports_of(probe, module="search.probe", mentions=False)})
    assert imported == ["admin.hooks", "api.config", "convert", "management"]  # the RUNNER string is no import


def test_declared_seams_exist_and_point_up():
    """Each seam is still named where it says, against the layer order (else it is no seam: drop it)."""
    named = {(module_name(path), target) for path in _sources() for _, target in imports_of(path, seams=True)}
    for (module, target), reason in DECLARED_SEAMS.items():
        assert (module, target) in named, f"{module} no longer names {target}: remove the seam ({reason})"
        assert layer_of(target) > layer_of(module), (module, target)


# ── SQL lives behind the storage backends ────────────────────────────────────

# Where SQL may be written: the storage and search backends, the trigger definitions, the migrations.
SQL_HOMES = ("storage/", "search/", "migrations/", "triggers.py")
# Modules outside those that may hold SQL anyway, each with the reason (none today).
SQL_ALLOWED: set[str] = set()
_SQL_STATEMENTS = [
    re.compile(pattern, re.IGNORECASE | re.DOTALL)
    for pattern in (
        r"\bSELECT\b.+\bFROM\b",
        r"\bINSERT\s+(OR\s+\w+\s+)?INTO\b",
        r"\bUPDATE\s+\S+\s+SET\b",
        r"\bDELETE\s+FROM\b",
        r"\b(CREATE|DROP|ALTER)\s+(OR\s+REPLACE\s+|UNIQUE\s+|TEMP\w*\s+|VIRTUAL\s+)*"
        r"(TABLE|INDEX|TRIGGER|VIEW|FUNCTION|EXTENSION|SCHEMA|SEQUENCE|TYPE|PROCEDURE)\b",
        r"\bWITH\s+RECURSIVE\b",
        r"^\s*(PRAGMA|SAVEPOINT|LOCK\s+TABLE|VACUUM|TRUNCATE|COPY)\b",
    )
]
# Calls that run SQL text: ``Model.objects.raw(...)``, ``RawSQL(...)``, ``.extra(...)`` and a cursor's execute.
_RAW_CALLS = {"raw", "extra", "RawSQL"}
_CURSOR_CALLS = {"execute", "executemany", "executescript"}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _cursor_names(tree: ast.AST) -> set[str]:
    """Names bound to ``<something>.cursor()``: ``with c.cursor() as cur`` and ``cur = c.cursor()``."""

    def is_cursor(value: ast.AST | None) -> bool:
        return isinstance(value, ast.Call) and getattr(value.func, "attr", "") == "cursor"

    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.withitem) and is_cursor(node.context_expr) and node.optional_vars is not None:
            names.add(ast.unparse(node.optional_vars))
        elif isinstance(node, ast.Assign) and is_cursor(node.value):
            names.update(ast.unparse(target) for target in node.targets)
    return names


def sql_in(source: str) -> list[tuple[int, str]]:
    """(line, excerpt) of each SQL statement in a module's string literals and f-strings, and of each call
    that runs SQL text (docstrings are prose and are skipped)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    in_fstring = {id(value) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for value in node.values}
    cursors = _cursor_names(tree)
    found = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs | in_fstring:
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "?" for v in node.values)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            receiver = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
            if name in _RAW_CALLS or (name in _CURSOR_CALLS and ("cursor" in receiver.lower() or receiver in cursors)):
                found.append((node.lineno, ast.unparse(node)[:80]))
        if text is not None and any(pattern.search(text) for pattern in _SQL_STATEMENTS):
            found.append((node.lineno, text[:80]))
    return found


def test_sql_stays_in_the_storage_backends():
    """The facade, API, admin, manager, checks and querysets call the storage layer; none writes SQL."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(SQL_HOMES) or relative in SQL_ALLOWED:
            continue
        found.extend(f"agent_sessions/{relative}:{line}: {text!r}" for line, text in sql_in(path.read_text()))
    assert not found, "SQL outside storage/, search/, triggers.py, migrations/:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        'SQL = "SELECT end_reason FROM assistant_sessions WHERE id = %s"',
        'def f(t):\n    return f"DELETE FROM {t} WHERE id = %s"',
        'X = ("UPDATE assistant_sessions "\n     "SET updated_at = %s")',
        'X = "CREATE EXTENSION IF NOT EXISTS pg_trgm"',
        'X = "WITH RECURSIVE path(seq) AS (SELECT 1) SELECT seq FROM path"',
        "def f(cursor, q):\n    cursor.execute(q)",
        "def f(c, q):\n    with c.cursor() as cur:\n        cur.execute(q)",
        "def f(q):\n    return Message.objects.raw(q)",
    ],
)
def test_the_sql_check_sees_sql(source):
    assert sql_in(source)


@pytest.mark.parametrize(
    "source",
    [
        '"""Select the rows from the session and update the set of leaves."""',
        'X = "Delete messages from a session"',
        "def f(tool, a):\n    return tool.execute(**a)",
        'X = "the selected block, from its provider"',
    ],
)
def test_the_sql_check_leaves_prose_alone(source):
    assert not sql_in(source)


# ── no import cycles, module by module ───────────────────────────────────────


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (each group holds a cycle), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(groups)


def test_modules_have_no_import_cycles():
    """No two modules of agent_sessions import each other, directly or through others (imports inside
    functions count; ``if TYPE_CHECKING:`` ones do not).  A part that needs its owner gets it, or a
    protocol of it, through its constructor."""
    edges: dict[str, set[str]] = {}
    for path in _sources():
        module = module_name(path)
        # A dotted string is not an import here (the API's configuration is *named* "agent_sessions.api").
        edges.setdefault(module, set()).update(t for _, t in imports_of(path, mentions=False) if t != module)
    assert not import_cycles(edges), import_cycles(edges)


def test_the_cycle_check_sees_a_lazy_cycle(tmp_path):
    (tmp_path / "a.py").write_text("from .b import later\n")
    (tmp_path / "b.py").write_text("def later():\n    from .a import thing\n")
    (tmp_path / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import thing\n")
    edges = {
        name: {t for _, t in imports_of(tmp_path / f"{name.rpartition('.')[2]}.py", module=name)}
        for name in ("pkg.a", "pkg.b", "pkg.c")
    }
    assert import_cycles(edges) == [["pkg.a", "pkg.b"]]


# ── the session facade does not tell storages apart ─────────────────────────

STORAGE_CLASSES = {"DjangoSessionProvider", "ProviderBackend", "SessionProvider", "SessionBackend"}


def test_nothing_above_storage_branches_on_the_storage_class():
    """The facade and everything above it call the SessionBackend; only ``backend_for`` (storage/) picks one."""
    found = []
    for path in _sources():
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("storage/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in {"isinstance", "issubclass"}:
                named = {getattr(n, "id", getattr(n, "attr", "")) for n in ast.walk(node.args[1])}
                if named & STORAGE_CLASSES:
                    found.append(f"agent_sessions/{relative}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "\n".join(found)
