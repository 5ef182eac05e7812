"""Write ``agent_sessions/migrations/_frozen_sql.py``: the schema a fresh ``migrate`` builds, as literal SQL.

First run at the last commit of the old migration chain (0001-0028), whose fresh ``migrate`` it
read, to write the SQL of the squashed migration.  Run from the repository root::

    python scripts/freeze_migrations.py            # needs pg_dump and the local Postgres server

It migrates an empty Postgres database and an empty SQLite file with the project's settings,
reads the app's objects back (``pg_dump --schema-only``; ``sqlite_master``) and writes them in
an order that runs on an empty database.  Run again later, it reads the squashed migration's own
output and must write the file unchanged (``git diff`` shows nothing): a check, not a way to
change the schema.  A schema change is a new migration, with its own SQL.

What differs between installations is written as placeholders the migration fills in: the text
search configuration (``AGENT_SESSIONS_PG_TEXT_SEARCH_CONFIG``) and the user model's table,
primary key column and key type (``AUTH_USER_MODEL``).
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "agent_sessions" / "migrations" / "_frozen_sql.py"
PG = dict(host=os.environ.get("PGHOST", "127.0.0.1"), port=os.environ.get("PGPORT", "5432"))
PG_USER = os.environ.get("PGUSER", "postgres")

TABLES = (
    "cf_agents_context_blocks",
    "assistant_compactions",
    "assistant_messages",
    "cf_agents_search_entries",
    "assistant_sessions",
    "agent_sessions_compaction_jobs",
    "agent_sessions_api_keys",
)
FUNCTION = re.compile(r"^(_pgtrigger_should_ignore|agent_sessions_\w+|pgtrigger_\w+)\(")
# The TOC comment pg_dump writes before each object.
HEADER = re.compile(r"^--\n-- Name: (?P<name>.*); Type: (?P<type>.*); Schema: (?P<schema>.*); Owner: .*\n--\n", re.M)
# Placeholders (see the module docstring); the migration replaces them before running a statement.
TS_CONFIG, USER_TABLE, USER_PK, USER_PK_TYPE = "__TS_CONFIG__", "__USER_TABLE__", "__USER_PK__", "__USER_PK_TYPE__"


def migrate(url: str) -> None:
    env = dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="project.settings", PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)


def pg_objects(dump: str) -> list[tuple[str, str, str]]:
    """``(type, name, statement)`` of each object in a plain pg_dump, in its order."""
    heads = list(HEADER.finditer(dump))
    objects = []
    for head, following in zip(heads, [*heads[1:], None], strict=True):
        end = following.start() if following else len(dump)
        body = dump[head.end() : end].strip()
        body = "\n".join(line for line in body.splitlines() if not line.startswith("\\")).strip()
        objects.append((head["type"], head["name"], body.rstrip(";").strip()))
    return objects


def _table_of(kind: str, name: str, statement: str) -> str | None:
    if kind in {"TABLE", "SEQUENCE"}:
        match = re.search(r"(?:CREATE TABLE|ALTER TABLE) public\.(\w+)", statement)
        return match[1] if match else None
    if kind in {"CONSTRAINT", "FK CONSTRAINT", "TRIGGER"}:
        return name.split()[0]
    if kind == "INDEX":
        return re.search(r" ON public\.(\w+) ", statement)[1]
    if kind == "COMMENT" and name.startswith("TRIGGER "):
        return name.split(" ON ")[1]
    return None


def _unqualified(statement: str) -> str:
    """Objects are made in the connection's schema, as the migrations always made them."""
    return statement.replace(" WITH SCHEMA public", "").replace("public.", "")


def postgres() -> dict[str, object]:
    import psycopg

    name = f"agent_sessions_freeze_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dbname="postgres", user=PG_USER, autocommit=True, **PG) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        migrate(f"postgres://{PG_USER}@{PG['host']}:{PG['port']}/{name}")
        dump = subprocess.run(
            ["pg_dump", "--schema-only", "--no-owner", "--no-privileges", "-h", PG["host"], "-p", PG["port"]]
            + ["-U", PG_USER, "-d", name],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    finally:
        with psycopg.connect(dbname="postgres", user=PG_USER, autocommit=True, **PG) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    extensions, functions, triggers, foreign_keys = [], [], [], []
    tables: dict[str, list[str]] = {t: [] for t in TABLES}
    indexes: dict[str, list[str]] = {t: [] for t in TABLES}
    for kind, obj, statement in pg_objects(dump):
        if kind == "EXTENSION":
            extensions.append(_unqualified(statement))
            continue
        if kind == "FUNCTION":
            if FUNCTION.match(obj):
                if "public." in statement.split("\n", 1)[1]:
                    raise SystemExit(f"a schema-qualified name in the body of {obj}: cannot unqualify it")
                functions.append(statement.replace("CREATE FUNCTION public.", "CREATE OR REPLACE FUNCTION ", 1))
            continue
        table = _table_of(kind, obj, statement)
        if table not in TABLES:
            continue
        statement = _unqualified(statement)
        if kind in {"TABLE", "SEQUENCE", "CONSTRAINT"}:
            tables[table].append(statement)
        elif kind == "INDEX":
            indexes[table].append(statement)
        elif kind in {"TRIGGER", "COMMENT"}:
            triggers.append(statement)
        elif kind == "FK CONSTRAINT":
            foreign_keys.append(statement)
        else:
            raise SystemExit(f"unexpected object of {table}: {kind} {obj}")
    for found in (tables, indexes):
        for table, statements in found.items():
            found[table] = [_placeholders(s) for s in statements]
    return {
        "POSTGRES_EXTENSIONS": extensions,
        "POSTGRES_TABLES": tables,
        "POSTGRES_INDEXES": indexes,
        "POSTGRES_FUNCTIONS": functions,
        "POSTGRES_TRIGGERS": triggers,
        "POSTGRES_FOREIGN_KEYS": [_placeholders(s) for s in foreign_keys],
    }


def _placeholders(statement: str) -> str:
    statement = statement.replace("'english'::regconfig", f"'{TS_CONFIG}'::regconfig")
    statement = statement.replace("owner_id integer", f"owner_id {USER_PK_TYPE}")
    statement = re.sub(r"ADD CONSTRAINT \w+_fk_auth_user_id ", "ADD CONSTRAINT __FK_NAME__ ", statement)
    return statement.replace("REFERENCES auth_user(id)", f"REFERENCES {USER_TABLE}({USER_PK})")


def sqlite() -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fresh.sqlite3"
        migrate(f"sqlite:///{path}")
        with sqlite3.connect(path) as conn:
            rows = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY rowid").fetchall()
    virtual = {name for kind, name, sql in rows if kind == "table" and sql.startswith("CREATE VIRTUAL TABLE")}
    shadow = {f"{v}_{suffix}" for v in virtual for suffix in ("data", "idx", "docsize", "config", "content")}
    order = {"table": 0, "view": 1, "index": 2, "trigger": 3}
    ours = [
        (kind, name, sql)
        for kind, name, sql in rows
        if sql is not None and not name.startswith(("auth_", "django_", "sqlite_")) and name not in shadow
    ]
    ours.sort(key=lambda row: (order[row[0]], row[2].startswith("CREATE VIRTUAL TABLE")))  # stable: rowid order
    statements = []
    for _, _, sql in ours:
        sql = sql.replace('"owner_id" integer ', f'"owner_id" {USER_PK_TYPE} ')
        statements.append(sql.replace('REFERENCES "auth_user" ("id")', f'REFERENCES "{USER_TABLE}" ("{USER_PK}")'))
    return {"SQLITE": statements}


def render(values: dict[str, object]) -> str:
    lines = [
        '"""The schema of the squashed migration, as literal SQL per vendor (see ``_frozen.py``).',
        "",
        "Written by scripts/freeze_migrations.py from a fresh database migrated by the old chain",
        "(0001-0028); never edit it by hand, and never change it: a schema change is a new migration.",
        f"Placeholders: {TS_CONFIG} (text search configuration), {USER_TABLE}, {USER_PK} and",
        f"{USER_PK_TYPE} (the user model's table, key column and key type), __FK_NAME__ (a foreign",
        "key's name, as Django names it).",
        '"""',
        "",
        "# fmt: off",
        "# ruff: noqa: E501",
    ]
    for name, value in values.items():
        lines.append("")
        if isinstance(value, dict):
            lines.append(f"{name} = {{")
            for key, statements in value.items():
                lines.append(f"    {key!r}: [")
                lines.extend(f"        {s!r}," for s in statements)
                lines.append("    ],")
            lines.append("}")
        else:
            lines.append(f"{name} = [")
            lines.extend(f"    {s!r}," for s in value)
            lines.append("]")
    return "\n".join(lines) + "\n"


def main() -> None:
    TARGET.write_text(render({**postgres(), **sqlite()}), encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
