"""What the docs say about the code exists: paths, modules, names and settings they mention.

From README.md, docs/*.md, bench/README.md and tests/README.md this reads every inline code span
outside fenced blocks (fenced blocks are examples of a project's own code, tested elsewhere or
not at all) and checks the claims in it:

* a relative link's target, and a path written without backticks (``docs/x.md``, ``storage/y.py``);
* a file path (``storage/orm.py``, ``tests/test_x.py``, ``bench/…``): the file exists, in the
  repository or relative to the package;
* a dotted name rooted in our code (``walks.LATEST_LEAF``, ``Session.append_message``,
  ``agent_sessions.api.config``): the module imports and has each attribute in turn; a chain on
  an instance (``session.compaction.over_threshold()``) or past a call needs each later name to
  be an attribute somewhere in the package;
* a bare ``name()`` or ``CamelCase`` name: defined somewhere in the package (or one of
  :data:`OTHER_LIBRARIES`' names, which the docs mention for comparison);
* a migration (``0028_context_owner``, "migrations 0018-0024"): its file is in ``agent_sessions/migrations/``;
* an ``AGENT_SESSIONS_*`` name anywhere in a doc: a setting declared in ``conf.DEFAULTS``, or an
  environment variable the tests, bench or scripts read.

A failure names the doc, the line and the missing thing.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import importlib
import inspect
import pkgutil
import re
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import agent_sessions
from agent_sessions import conf

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(agent_sessions.__file__).parent
DOCS = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "bench" / "README.md", ROOT / "tests" / "README.md"]
)

# Paths the docs mention that are a project's own files or made by a run, not files of this repository.
NOT_OURS = {
    "project/settings.py": "a Django project's settings (the demo project's is checked in as project/)",
    "sessions.py": "the module an installed app registers its configurations in",
    "gunicorn.conf.py": "the deployer's gunicorn configuration",
    "bench/results/latest.json": "written by a bench run",
    "bench/results/latest.goals.json": "written by a bench run",
    "latest.goals.json": "written by a bench run",
    "bench/charts/*.png": "drawn by a bench run",
}
# Names of other libraries, databases and the standard library that the docs mention by name.
OTHER_LIBRARIES = set(
    """
    AgentsSession BaseChatMessageHistory BinaryContent BinaryImage BitmapAnd ChatMessage CommandError
    CompositePrimaryKey DocumentUrl ForeignKey HumanMessage ImageUrl ImportError ImproperlyConfigured
    IntegrityError ModelMessagesTypeAdapter ModelRequest ModelResponse NaN NinjaAPI PostgresChatMessageHistory
    RetryPromptPart SQLAlchemySession SQLiteSession SystemMessage SystemPromptPart TextPart ThinkingPart
    ToolCallPart ToolMessage ToolReturnPart UserPromptPart JSONField BigAutoField
    args_as_dict clock_timestamp random snippet json_extract to_tsvector websearch_to_tsquery
    """.split()
)
# First names of a chain that are instances in the docs' prose (``session.compaction…``), not modules.
INSTANCES = {"session", "manager", "runner", "context", "record", "message"}

CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
FENCE = re.compile(r"^\s*(```|~~~)")
SETTING = re.compile(r"\bAGENT_SESSIONS_[A-Z0-9_]*[A-Z0-9]\b")
PATH = re.compile(r"^[\w.*{},/-]+\.(py|md|toml|txt|yml|yaml|json|sql|sh|cfg|ini|png)$|^[\w.-]+/[\w./*{},-]*$")
MIGRATION_NUMBERS = re.compile(r"\bmigrations? `?(\d{4})\b(?:`?\s*(?:-|–|to|and)\s*`?(\d{4})\b)?")
LINK = re.compile(r"\]\(([^)\s]+)\)")
BARE_PATH = re.compile(
    r"(?<![\w/.-])((?:agent_sessions|tests|bench|docs|examples|scripts|storage|session|api)/[\w/.-]*\w\.(?:py|md))\b"
)
FILE = re.compile(r"\.(py|md|toml|txt|yml|yaml|json|sql|sh|cfg|ini|png)$")
DOTTED = re.compile(r"^\.?[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(\(.*\))?$")


def doc_lines(doc: Path) -> list[tuple[int, str, bool]]:
    """(line number, text, inside a fenced block) for each line of ``doc``."""
    lines, fenced = [], False
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        lines.append((number, line, fenced))
    return lines


def _expand(path: str) -> list[str]:
    """``storage/{decode,walks}.py`` → both paths."""
    match = re.search(r"\{([^}]*)\}", path)
    if not match:
        return [path]
    return [
        p
        for part in match.group(1).split(",")
        for p in _expand(path[: match.start()] + part.strip() + path[match.end() :])
    ]


@cache
def _repo_files() -> dict[str, list[Path]]:
    """Basename → files of the repository that git would see (sources, docs, examples)."""
    found: dict[str, list[Path]] = {}
    for top in ("agent_sessions", "tests", "bench", "examples", "scripts", "docs", "project"):
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                found.setdefault(path.name, []).append(path)
    for path in ROOT.iterdir():
        found.setdefault(path.name, []).append(path)
    return found


def path_problem(claim: str, doc: Path = ROOT / "README.md") -> str | None:
    if claim in NOT_OURS:
        return None
    for path in _expand(claim.rstrip("/")):
        bases = (ROOT, PACKAGE, doc.parent)
        candidates = [base / name for base in bases for name in (path, f"{path}.py")]
        if "/" not in path:  # a module or file named alone: anywhere in the repository
            candidates += _repo_files().get(path, [])
        if not any(c.exists() or (("*" in path) and list(c.parent.glob(c.name))) for c in candidates):
            return f"no file {path} (looked in the repository root and in agent_sessions/)"
    return None


@cache
def _modules() -> dict[str, ModuleType]:
    """Every module of the package, by dotted name relative to it ('' is the package)."""
    modules = {"": agent_sessions}
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="agent_sessions."):
        try:
            modules[info.name.removeprefix("agent_sessions.")] = importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed
            continue
    return modules


def _fields(obj: Any) -> set[str]:
    names = set(dir(obj))
    if isinstance(obj, type):
        names |= set(getattr(obj, "__annotations__", {}))
        names |= {f.name for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else set()
        for klass in obj.__mro__:
            names |= set(getattr(klass, "__annotations__", {}))
    return names


@cache
def _strings() -> set[str]:
    """Every string literal in the package's code: names it uses as text (Postgres settings, schema names)."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        found |= {
            n.value
            for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
    return found


@cache
def _names() -> set[str]:
    """Every attribute name defined anywhere in the package: module globals, class attributes and fields."""
    names: set[str] = set()
    for module in _modules().values():
        for name, value in vars(module).items():
            names.add(name)
            if inspect.isclass(value) and value.__module__.startswith("agent_sessions"):
                names |= _fields(value)
    return names


@cache
def _roots() -> dict[str, list[Any]]:
    """First names a dotted claim may start with → the objects they are: modules by any suffix, classes, functions."""
    roots: dict[str, list[Any]] = {}
    for dotted, module in _modules().items():
        parts = dotted.split(".") if dotted else []
        for start in range(len(parts)):
            roots.setdefault(".".join(parts[start:]), []).append(module)
        for name, value in vars(module).items():
            if getattr(value, "__module__", "").startswith("agent_sessions") and not name.startswith("__"):
                roots.setdefault(name, []).append(value)
    roots["agent_sessions"] = [agent_sessions]
    return roots


def _walk(obj: Any, names: list[str]) -> str | None:
    """None when each name is an attribute of the one before, else what is missing."""
    for index, name in enumerate(names):
        if name not in _fields(obj) and not hasattr(obj, name):
            if callable(obj) and not inspect.isclass(obj) and not inspect.ismodule(obj):
                return _loose(names[index:])  # past a call: the value is not at hand
            return f"{getattr(obj, '__name__', obj)!s} has no attribute {name!r}"
        value = getattr(obj, name, None)
        if value is None:  # a field without a class-level value: its type is not at hand
            return _loose(names[index + 1 :])
        obj = value
    return None


def _loose(names: list[str]) -> str | None:
    missing = [name for name in names if name not in _names()]
    return f"no attribute named {missing[0]!r} anywhere in the package" if missing else None


def name_problem(claim: str) -> str | None:
    """Check a dotted or bare name; None when it is true or not a claim about our code."""
    is_call = claim.endswith(")")
    claim = re.sub(r"\(.*\)$", "", claim.lstrip(".").replace("…", ""))
    if claim in _strings():
        return None  # a name the code uses as text: a Postgres setting, a logger, a schema name
    parts = [p for p in claim.split(".") if p]
    if not parts:
        return None
    if len(parts) == 1:
        name = parts[0]
        if name in OTHER_LIBRARIES or name in _names() or name in _roots() or hasattr(builtins, name):
            return None
        looks_like_code = is_call or re.fullmatch(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+", name)
        return f"{name!r} is defined nowhere in the package" if looks_like_code else None
    if parts[0] in INSTANCES and ".".join(parts) not in _roots():
        return _loose(parts[1:])
    # The longest prefix that names a module of ours (``agent_sessions.storage.orm``, ``range_reads``).
    for size in range(len(parts), 0, -1):
        prefix = ".".join(parts[:size]).removeprefix("agent_sessions.")
        if prefix in _roots():
            problems = [_walk(root, parts[size:]) for root in _roots()[prefix]]
            return None if None in problems else problems[0]
    return None  # not rooted in our code: another library, a JSON field, a table column


def setting_problem(name: str) -> str | None:
    if name.removeprefix("AGENT_SESSIONS_") in conf.DEFAULTS:
        return None
    sources = [p for p in ROOT.glob("tests/**/*.py") if p.name != Path(__file__).name]
    sources += [*ROOT.glob("bench/*.py"), *ROOT.glob("scripts/*"), ROOT / "Makefile"]
    sources += [ROOT / "docker-compose.yml", ROOT / "project" / "settings.py"]
    if any(p.is_file() and name in p.read_text(encoding="utf-8") for p in sources):
        return None  # an environment variable the tests, bench or scripts read
    return f"{name} is not declared in conf.DEFAULTS (nor read from the environment by tests/bench/scripts)"


def claims_in(doc: Path) -> list[tuple[int, str, str | None]]:
    """(line, claim, problem or None) for every claim in ``doc``."""
    found = []
    for number, line, fenced in doc_lines(doc):
        found.extend((number, setting, setting_problem(setting)) for setting in SETTING.findall(line))
        if fenced:
            continue
        for numbers in MIGRATION_NUMBERS.findall(line):
            for number_ in filter(None, numbers):
                missing = not list((PACKAGE / "migrations").glob(f"{number_}_*.py"))
                found.append((number, f"migration {number_}", "no such migration file" if missing else None))
        for target in LINK.findall(line):
            if "://" not in target and not target.startswith(("#", "mailto:")):
                missing = not (doc.parent / target.split("#")[0]).exists()
                found.append((number, target, f"the link's target {target} does not exist" if missing else None))
        prose = CODE_SPAN.sub("", LINK.sub("", line))
        found.extend((number, path, path_problem(path, doc)) for path in BARE_PATH.findall(prose))
        for span in CODE_SPAN.findall(line):
            span = span.strip()
            if "://" in span or span.startswith("/") or " " in span.split("(")[0] or SETTING.search(span):
                continue  # a URL or URL path, a command line, a settings assignment (checked above)
            if re.fullmatch(r"agent_sessions\.[EW]\d{3}", span):
                continue  # a system check's id
            if re.fullmatch(r"\d{4}_\w+", span):  # a migration
                missing = not (PACKAGE / "migrations" / f"{span}.py").exists()
                found.append((number, span, f"no migration {span} in agent_sessions/migrations/" if missing else None))
                continue
            top = span.split("/")[0]
            a_directory = "/" in span and any((base / top).is_dir() for base in (ROOT, PACKAGE, doc.parent))
            an_attribute = a_directory and "." in span.rpartition("/")[2] and not FILE.search(span)
            if an_attribute and DOTTED.match(span.replace("/", ".")):  # storage/appends.STAMP
                problem = path_problem(span.rpartition(".")[0], doc) or name_problem(span.replace("/", "."))
                found.append((number, span, problem))
            elif PATH.match(span) and (FILE.search(span) or a_directory) and not DOTTED.match(span):
                found.append((number, span, path_problem(span, doc)))
            elif DOTTED.match(span) and not FILE.search(span):
                found.append((number, span, name_problem(span)))
    return found


@pytest.mark.no_database
@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: str(doc.relative_to(ROOT)))
def test_every_claim_about_the_code_holds(doc):
    claims = claims_in(doc)
    false = [f"{doc.relative_to(ROOT)}:{line}: `{claim}`: {problem}" for line, claim, problem in claims if problem]
    assert not false, "docs name code that does not exist:\n" + "\n".join(false)


@pytest.mark.no_database
def test_the_check_catches_renamed_modules_functions_and_settings(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(
        "Reads go through `storage/range_reads.py` and `storage/gone.py`; `walks.LATEST_LEAF` and\n"
        "`walks.LATEST_LEAVES`, `Session.append_message` and `Session.append_messge`, `get_history()` and\n"
        "`get_histories()`, `session.compaction.over_threshold()` and `session.compaction.over_limit()`,\n"
        "`AGENT_SESSIONS_COMPACTION_RUNNER` and `AGENT_SESSIONS_COMPACTION_RUNER`, `json.loads`, `usage.tokens`.\n"
        "```python\nfrom myapp import `not.checked`\n```\n"
    )
    problems = {claim: problem for _, claim, problem in claims_in(doc)}
    assert {claim for claim, problem in problems.items() if problem} == {
        "storage/gone.py",
        "walks.LATEST_LEAVES",
        "Session.append_messge",
        "get_histories()",
        "session.compaction.over_limit()",
        "AGENT_SESSIONS_COMPACTION_RUNER",
    }
    assert problems["json.loads"] is None  # another library's name, not checked
    assert problems["usage.tokens"] is None
