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
        ["exceptions", "conf", "types", "tokens", "overlays", "asyncutils", "registry", "credentials", "text"],
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
    ("surfaces", ["api", "admin", "management", "integrations", "tasks", "urls", "apps", "checks"]),
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


def imports_of(path: Path, module: str | None = None, *, seams: bool = False) -> list[tuple[int, str]]:
    """(line, imported module relative to the package) for every import of agent_sessions code.

    Imports by name included; the :data:`DECLARED_SEAMS` only with ``seams=True``.
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
    found.extend(named_imports(tree, package, exempt))
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


def named_imports(tree: ast.AST, package: str, exempt: set[int]) -> list[tuple[int, str]]:
    """Modules of the package named by a string: the argument of a dynamic import, or any dotted path."""
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
        is_text = isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
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
    targets = sorted(t for _, t in imports_of(probe, module="search.probe"))
    assert targets == ["admin.hooks", "api.config", "convert", "management", "tasks"]


def test_declared_seams_exist_and_point_up():
    """Each seam is still named where it says, against the layer order (else it is no seam: drop it)."""
    named = {(module_name(path), target) for path in _sources() for _, target in imports_of(path, seams=True)}
    for (module, target), reason in DECLARED_SEAMS.items():
        assert (module, target) in named, f"{module} no longer names {target}: remove the seam ({reason})"
        assert layer_of(target) > layer_of(module), (module, target)
