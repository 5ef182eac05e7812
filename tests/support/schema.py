"""A database's schema as comparable data: ``pg_dump --schema-only`` text, a catalog snapshot
(Postgres), ``sqlite_master`` (SQLite), and every row of every table."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess

# Everything a migration can build, from the catalog (any pg_dump version, or none installed).
_CATALOG = {
    "columns": """
        SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               a.attidentity, a.attgenerated, pg_get_expr(d.adbin, d.adrelid)
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relkind IN ('r', 'p', 'v') AND a.attnum > 0 AND NOT a.attisdropped""",
    "indexes": """
        SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i
        JOIN pg_class c ON c.oid = i.indexrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()""",
    "constraints": """
        SELECT t.relname, o.conname, pg_get_constraintdef(o.oid) FROM pg_constraint o
        JOIN pg_class t ON t.oid = o.conrelid
        JOIN pg_namespace n ON n.oid = t.relnamespace AND n.nspname = current_schema()""",
    "triggers": """
        SELECT g.tgname, pg_get_triggerdef(g.oid), obj_description(g.oid, 'pg_trigger') FROM pg_trigger g
        JOIN pg_class t ON t.oid = g.tgrelid
        JOIN pg_namespace n ON n.oid = t.relnamespace AND n.nspname = current_schema()
        WHERE NOT g.tgisinternal""",
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_function_result(p.oid),
               p.prosrc, p.provolatile, p.proconfig::text FROM pg_proc p
        JOIN pg_namespace n ON n.oid = p.pronamespace AND n.nspname = current_schema()
        WHERE NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')""",
    "sequences": """
        SELECT c.relname, s.seqtypid::regtype::text, s.seqincrement FROM pg_sequence s
        JOIN pg_class c ON c.oid = s.seqrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()""",
    "extensions": "SELECT extname FROM pg_extension",
}


def catalog(conn) -> dict[str, list]:
    """The current schema's tables, columns (types, defaults, identity, generated), indexes with their
    definitions, constraints, triggers with their definitions and comments, functions with their
    bodies, sequences and extensions (a psycopg connection)."""
    return {
        key: sorted([str(v) for v in row] for row in conn.execute(query).fetchall()) for key, query in _CATALOG.items()
    }


def by_position(snapshot: dict[str, list]) -> dict[str, list]:
    """``snapshot`` with each column's number replaced by its position among the table's live columns:
    a column dropped once (Django's own ``django_content_type.name``) leaves a gap in the numbers of a
    database migrated step by step, none in one restored from a dump."""
    columns, position, table = [], 0, None
    for row in sorted(snapshot["columns"], key=lambda r: (r[0], int(r[1]))):
        position = position + 1 if row[0] == table else 1
        table = row[0]
        columns.append([row[0], str(position), *row[2:]])
    return {**snapshot, "columns": sorted(columns)}


def _major(text: str) -> str | None:
    match = re.search(r"(\d+)\.\d+", text)
    return match[1] if match else None


def pg_dump_schema(conn, params: dict, dbname: str) -> str | None:
    """``pg_dump --schema-only`` of the database, without what legitimately differs between two
    databases (comment lines, psql's ``\\restrict`` keys); None when no pg_dump of the server's major
    version is installed (the catalog comparison stands alone then)."""
    if shutil.which("pg_dump") is None:
        return None
    server = _major(conn.execute("SHOW server_version").fetchone()[0])
    client = _major(subprocess.run(["pg_dump", "--version"], capture_output=True, text=True).stdout)
    if server is None or server != client:
        return None
    out = subprocess.run(
        ["pg_dump", "--schema-only", "--no-owner", "--no-privileges", "-h", str(params["host"])]
        + ["-p", str(params["port"]), "-U", str(params["user"]), "-d", dbname],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return normalise_dump(out)


def normalise_dump(text: str) -> str:
    lines = [line for line in text.splitlines() if not line.startswith(("--", "\\restrict", "\\unrestrict"))]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def pg_rows(conn) -> dict[str, list[str]]:
    """Every row of every table of the current schema, as JSON text, sorted."""
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "AND n.nspname = current_schema() WHERE c.relkind IN ('r', 'p')"
        ).fetchall()
    ]
    return {t: sorted(r[0] for r in conn.execute(f'SELECT to_jsonb(t)::text FROM "{t}" t').fetchall()) for t in tables}


def sqlite_master(path: str) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(), key=repr)


def sqlite_rows(path: str) -> dict[str, list[str]]:
    """Every row of every ordinary table (FTS5 shadow tables included: the indexes' contents), sorted."""
    with sqlite3.connect(path) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'"
            ).fetchall()
        ]
        return {t: sorted(repr(row) for row in conn.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables}
