"""No SQL built from user input, as a static rule plus a runtime check.

Static rule: every place in ``agent_sessions/**/*.py`` that builds SQL-looking text by
f-string, ``%``, ``.format()`` or ``+`` may interpolate only expressions on the
allow-list below, each vetted to carry constants, identifiers chosen by the code, ``%s``
placeholder lists, or fragments that are themselves built under this rule.  User values
go in as query parameters.  A new interpolation fails this test until it is reviewed
and listed.

Runtime check: a hostile marker string travels through every user-controlled field
(ids, roles, labels, keys, names, search queries, tool arguments); the SQL *templates*
sent to the database (``connection.execute_wrapper`` sees them before parameters are
bound) never contain it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.db import connection

from agent_sessions import DjangoSearchProvider, Session
from agent_sessions.manager import SessionManager

PACKAGE = Path(__file__).resolve().parent.parent / "agent_sessions"
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|WHERE|FROM|JOIN|ORDER BY|VALUES|MATCH|AND|OR)\b")

# file → interpolated expressions (as ``ast.unparse`` prints them) vetted as constant-only.
TARGET = "identifiers of a fixed plan.Target (table/column names defined in code)"
FRAGMENT = "a fragment built in this module under the same rule; user values are appended to params"
ALLOWED: dict[str, dict[str, str]] = {
    "search/fts5.py": {
        "_PROBE": "module constant: the temp table's name",
        "filters.keys": "'seq' or 'session_id' (checked by search.run.match_sql)",
        "target.table": TARGET,
        "target.fts": TARGET,
        "target.trigram": TARGET,
        "target.text": TARGET,
        "target.scope": TARGET,
        "alias": "'m.' or '' (code literal)",
        "c": "a name from target.columns",
        "', '.join(['%s'] * len(filters.roles))": "placeholders only",
        "columns": FRAGMENT,
        "snippet": FRAGMENT,
        "source": FRAGMENT,
        "tokens": "an int literal (12 or 32)",
        "table": TARGET,
        "word_expr": "an FTS5 MATCH expression passed as a parameter, never as SQL",
        "_any(parts.excluded_words, variants)": "an FTS5 MATCH expression passed as a parameter, never as SQL",
        "' UNION '.join(selects)": FRAGMENT,
        "selects": FRAGMENT,
        "text_col": TARGET,
        "f'COALESCE(m.{target.text}, {EMPTY})'": TARGET,
        "EMPTY": "module constant: an empty SQL string literal",
        "' AND '.join(where)": FRAGMENT,
        "where": FRAGMENT,
        "', '.join(order)": FRAGMENT,
        "' OR '.join(tests)": FRAGMENT,
        "t": TARGET,
        "r": FRAGMENT,
        "ranks": FRAGMENT,
        "order": FRAGMENT,
        "occurrences_sql(f'm.{target.text}', needles, 'max')": "CASE expressions with %s placeholders only",
        "_contains(f'COALESCE(m.{target.text}, {EMPTY})', term)": "instr() over a column and a %s placeholder",
        "' WHERE ' + ' AND '.join(where) if where else ''": FRAGMENT,
        "' AND '.join(inner)": FRAGMENT,
        "after_snippet": "plan.snippet_columns: ', m.' + target.extra (a TARGET name) or ''",
    },
    "search/tsquery.py": {
        "filters.keys": "'seq' or 'session_id' (checked by search.run.match_sql)",
        "target.table": TARGET,
        "target.tsv": TARGET,
        "target.text": TARGET,
        "target.scope": TARGET,
        "alias": "'m.' or '' (code literal)",
        "c": "a name from target.columns",
        "negative": FRAGMENT,
        "positive": FRAGMENT,
        "order": FRAGMENT,
        "columns": FRAGMENT,
        "rank_cols": FRAGMENT,
        "source": FRAGMENT,
        "hit_columns": FRAGMENT,
        "headline": FRAGMENT,
        "inner_sql": FRAGMENT,
        "i": "an int from enumerate()",
        "r": FRAGMENT,
        "where": FRAGMENT,
        "' AND '.join(where)": FRAGMENT,
        "' OR '.join(tests)": FRAGMENT,
        "tests": FRAGMENT,
        "_any(parts.excluded_words, config, where_params)": FRAGMENT,
        "_any(parts.excluded_words, config, tsq_params)": FRAGMENT,
        "_term(term, config, params)": "to_tsquery(%s::regconfig, %s): placeholders only",
        "occurrences_sql(f'm.{target.text}', needles, 'greatest')": "CASE expressions with %s placeholders only",
        "''.join((f'hit.r{i} DESC, ' for i in range(len(ranks))))": "rank column aliases r0, r1 …",
        "' WHERE ' + ' AND '.join(where) if where else ''": FRAGMENT,
        "' AND '.join(inner)": FRAGMENT,
        "', q' if tsq else ''": "a code literal",
        "'' if 'seq' in target.columns else ', m.seq'": "a code literal",
        "target.extra": TARGET,
        "snippet_columns(target, filters, 'm.')": "', m.' + target.extra (a TARGET name) or ''",
        "snippet_columns(target, filters, 'hit.')": "', hit.' + target.extra (a TARGET name) or ''",
        "not_ascii": "octet_length/char_length of a TARGET column",
        "_ilike(f'm.{column}', term, params)": FRAGMENT,
        "q(lead)": "the tsquery: plainto/phraseto_tsquery(%s::regconfig, %s) calls and tsquery operators",
        "q(rank_params)": "the tsquery: plainto/phraseto_tsquery(%s::regconfig, %s) calls and tsquery operators",
        "q(headline_params)": "the tsquery: plainto/phraseto_tsquery(%s::regconfig, %s) calls and tsquery operators",
    },
    "checks.py": {"PG_TRGM_INSTALL": "module constant (storage.postgres), shown in a hint, never run"},
    "search/query.py": {},
    "search/snippet.py": {},
    "search/plan.py": {"target.table": TARGET, "condition": FRAGMENT, "' AND '.join(inner)": FRAGMENT},
    "storage/walks.py": {
        "sql": "walk(): path_cte() (module constants)",
        "_NEWEST_ARM": "module constant: the latest leaf's first arm",
        "LATEST_LEAF": "module constant",
        "_CHILDLESS.format(t='w')": "module constant + code-literal alias",
        "_CHILDLESS.format(t='m')": "module constant + code-literal alias",
        "PATH_KEY.format(t='m.')": "module constant + code-literal alias",
        "PATH_KEY.format(t='s.')": "module constant + code-literal alias",
        "SESSION_RANGE.format(t='')": "module constant + code-literal alias",
        "SESSION_RANGE.format(t='m.')": "module constant + code-literal alias",
    },
    "storage/range_reads.py": {
        "columns": "a column list storage/orm.py builds from module constants",
        "_LEAF[leaf_id is None]": "one of two module-constant leaf lookups",
        "_NEWEST_LEAF[leaf_id is None]": "one of two module-constant leaf lookups",
        "NEWEST_LEAF_SEQ": "module constant (storage.walks)",
        "SESSION_RANGE.format(t='m.')": "module constant (storage.walks) + code-literal alias",
    },
    "storage/api_keys.py": {
        "select": "quoted column names of the ApiKey and user models' concrete fields",
        "quote(ApiKey._meta.db_table)": "a model's table name, quoted",
        "quote(user_model._meta.db_table)": "a model's table name, quoted",
        "quote(user_model._meta.pk.column)": "a model's column name, quoted",
        "owner": "a model's column name, quoted",
        "prefix": "a model's column name, quoted",
        "revoked": "a model's column name, quoted",
    },
    "storage/visible_tokens.py": {
        "', '.join(['%s'] * len(ids))": "placeholders only",
        "marks": "'%s, %s, …' only",
        "ROWS_BOUND": "module constant (storage.walks): the walk's cycle guard, a %s placeholder only",
    },
    "storage/appends.py": {
        "COLUMNS": "module constant: the column list",
        "chosen": "one of three module-constant parent subqueries (LATEST_LEAF, NO_PARENT, EXPLICIT_PARENT)",
        "_CHILDREN[partitioned]": "one of two module-constant children probes",
    },
    "storage/orm.py": {
        "size": "BYTES_EXPR of the backend formatted with a code literal column",
        "_placeholders(len(chunk))": "'%s, %s, …' only",
        "_placeholders(len(columns))": "'%s, %s, …' only",
        "', '.join(columns)": "column names from bulk_columns (a class constant)",
        "f'{int(base_tokens)} + tokens'": "an int() read from the database",
        "int(base_tokens)": "an int()",
        "_placeholders(len(roots))": "'%s, %s, …' only",
        "self.backend.BYTES_EXPR.format(col='content')": "backend constant + code literal",
        "self.backend.BYTES_EXPR.format(col='m.content')": "backend constant + code literal",
        "', '.join([row_sql] * len(chunk))": "repeated '(%s, …)' groups",
        "row_sql": "'(%s, …)' only",
        "LATEST_LEAF": "module constant",
        "PATH_ROW": "module constant: the walk's row join",
        "path_cte(self.connection.vendor)": "module-constant walk chosen by vendor",
        "cte": "path_cte(): module-constant walks chosen by vendor",
        "walk": "path_cte() (module constants)",
        "parent_sql": "one of three module-constant subqueries",
        "sql": "recent_cte() (module constants) formatted with BYTES_EXPR",
        "membership": "backend.in_list(): a constant membership test with one %s placeholder",
        "copy_cte(self.connection.vendor, backend.RANDOM_HEX_EXPR)": "module-constant walk + backend constant",
        "_COPY_COLUMNS": "module constant: the column list of copy_path_to",
        "quote": "backend JSON_QUOTE_EXPR (a constant) formatted with a code-literal column",
        "HAS_OVERLAYS": "module constant: the overlay-existence subquery (%s placeholder)",
    },
    "storage/postgres.py": {
        "sql": "estimated_rows: a queryset's SQL as Django's compiler wrote it, its values in params",
        "', '.join(['to_regprocedure(%s) IS NOT NULL'] * len(_READS))": "one placeholder per read function",
        "postgres_append.LOCK.format(key='%s')": "module constant: the lock expression, with a placeholder",
        "insert": "locked_insert: appends.statement(), the append's SQL from code constants, with placeholders",
        "head": "orm.insert_rows: 'INSERT INTO assistant_messages (<bulk_columns>) VALUES '",
        "row_sql": "'(%s, …)' only",
        "', '.join(columns)": "insert_many: session_id + orm bulk_columns (a class constant)",
        "table": "insert_many: a code-literal table name (orm passes 'assistant_messages')",
    },
    "storage/postgres_append.py": {
        "NAME": "module constant: the function's name",
        "', '.join(['%s'] * len(_args(stamps=stamps)))": "'%s, %s, …' only",
        "SIGNATURE": "module constant: the name and the argument types",
        "UNSTAMPED_SIGNATURE": "module constant: the name and the argument types (without the stamp argument)",
        "other": "install_sql(): SIGNATURE or UNSTAMPED_SIGNATURE (module constants)",
        "args": "module-constant argument names and types",
        "body(stamps=stamps)": "PL/pgSQL generated from appends (module constants) and code literals",
        "PLANNER_SETTINGS": "module constant: SET clauses",
        "COUNTING": "module constant: the SET clause of triggers.COUNTED_BY_APPEND",
    },
    "storage/postgres_reads.py": {
        "self.name": "ReadFunction.name: the module constants RECENT, PATH and WINDOW",
        "ONE_BY_ONE": "module constant: an int",
        "', '.join(['%s'] * len(self.args))": "'%s, %s, …' only",
    },
    "storage/postgres_plans.py": {
        "KEEP_PLANS_FROM_ROWS": "module constant: an int",
        "KEEP_PLANS_FROM_BYTES": "module constant: an int",
        "MODE": "module constant: the plan-mode expression",
        "table": "_known(): a table alias, 'c' or 'k' (code literals)",
        "_known('k')": "code literal alias; the expression holds module constants only",
        "_known('c')": "code literal alias; the expression holds module constants only",
    },
    "triggers.py": {
        "COUNTED_BY_APPEND": "module constant: a setting's name",
        "_PG_STAMP": "module constant: the updated_at assignment of both count updates",
        "session": "count_one_sql(): a code-literal SQL expression (the function's argument name)",
        "stamped": "count_one_sql(): _PG_STAMP, or a coalesce of a code-literal name and _PG_NEWEST",
    },
    "storage/postgres_partitions.py": {
        "table": "one of TABLES (checked on entry)",
        "KEY": "module constant 'session_id'",
        "partitions": "an int (checked ≥ 2)",
        "i": "a range() int",
        "next_seq": "an int from the database",
        "partition_name(table, i)": "TABLES name + '_pNN'",
        "new": "TABLES name + a code-literal suffix",
        "sequence": "TABLES name + a code-literal suffix",
        "columns": "column names read from pg_attribute",
        "old_part": "a partition name read from pg_inherits (regclass text, quoted when needed)",
        "old_part.strip(chr(34))": "the same name, unquoted, with a code-literal suffix",
    },
    "storage/sqlite.py": {
        "fts": "code literal table names",
        "table": TARGET,
        "_NOW": "module constant: strftime() of 'now'",
        "head": "orm.insert_rows: 'INSERT INTO assistant_messages (<bulk_columns>) VALUES '",
        "', '.join([row_sql] * len(chunk))": "repeated '(%s, …)' groups",
        "row_sql": "'(%s, …)' only",
        "', '.join(columns)": "insert_many: session_id + orm bulk_columns (a class constant)",
        "DEFERRED_INDEX": "module constant: the deferred-indexing marker table's name",
        "plan.MESSAGES.table": TARGET,
        "_indexed(columns, values, '')": "TARGET columns, as is or in the _NON_ASCII_ONLY CASE",
        "_AFTER_START": "module constant: a WHERE over TARGET columns with %s placeholders",
        "_LATER.replace('%', '%%')": "module constant _LATER, its % escaped for a statement with parameters",
    },
}


def _module_constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "..."`` (or implicit concatenations / f-strings of them) → text."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found[node.targets[0].id] = value.value
            elif isinstance(value, ast.JoinedStr):
                found[node.targets[0].id] = "".join(
                    v.value for v in value.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
                )
    return found


def _text_of(node: ast.AST, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def _is_constant(node: ast.AST, constants: dict[str, str]) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or (
        isinstance(node, ast.Name) and node.id in constants
    )


def _pieces(node: ast.AST, constants: dict[str, str]) -> tuple[str, list[ast.AST]] | None:
    """``(constant text, interpolated expressions)`` of a string-building node, else None."""
    if isinstance(node, ast.JoinedStr):
        return _text_of(node, constants) or "", [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _text_of(node.left, constants) or "", [node.right]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        text = (_text_of(node.left, constants) or "") + (_text_of(node.right, constants) or "")
        exprs = [
            side
            for side in (node.left, node.right)
            if not _is_constant(side, constants) and not isinstance(side, (ast.BinOp, ast.JoinedStr))
        ]
        return text, exprs
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        base = node.func.value
        exprs = [e for e in (*node.args, *(k.value for k in node.keywords)) if not _is_constant(e, constants)]
        return _text_of(base, constants) or ast.unparse(base), exprs
    return None


def sql_interpolations(path: Path) -> list[tuple[int, str]]:
    """``(line, expression)`` for each non-constant piece interpolated into SQL-looking text."""
    tree = ast.parse(path.read_text())
    constants = _module_constants(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        pieces = _pieces(node, constants)
        if pieces is not None and SQL.search(pieces[0]):
            found += [(node.lineno, ast.unparse(e)) for e in pieces[1]]
    return found


def test_sql_is_never_formatted_with_unvetted_values():
    violations = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("migrations/"):
            continue  # schema DDL from code constants only; reviewed with each migration
        allowed = ALLOWED.get(rel, {})
        for line, expr in sql_interpolations(path):
            if expr not in allowed:
                violations.append(f"agent_sessions/{rel}:{line}: {expr}")
    assert not violations, "SQL built with unvetted interpolations (pass values as parameters):\n" + "\n".join(
        violations
    )


def test_execute_never_receives_a_formatted_string_inline():
    """``cursor.execute(f"...")`` / ``execute("..." % x)`` / ``.raw()`` / ``RawSQL`` / ``.extra()``:
    the first argument is a constant, or text whose pieces are all vetted."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text())
        constants = _module_constants(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in {"raw", "extra", "RawSQL"}:
                offenders.append(f"{rel}:{node.lineno}: {name}() is not used by this package")
            if name in {"execute", "executemany"} and node.args:
                pieces = _pieces(node.args[0], constants)
                if pieces is not None and any(ast.unparse(e) not in ALLOWED.get(rel, {}) for e in pieces[1]):
                    offenders.append(f"{rel}:{node.lineno}: {ast.unparse(node.args[0])[:80]}")
    assert not offenders, "\n".join(offenders)


def test_the_rule_catches_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def f(cursor, user):\n"
        "    cursor.execute(f\"SELECT * FROM t WHERE id = '{user}'\")\n"
        '    cursor.execute("DELETE FROM t WHERE id = %s" % user)\n'
        '    cursor.execute("UPDATE t SET a = {}".format(user))\n'
        '    cursor.execute("SELECT 1 FROM t WHERE name = " + user)\n'
    )
    assert [expr for _, expr in sql_interpolations(bad)] == ["user", "user", "user", "user"]


MARKER = "zq9x'); DROP TABLE assistant_messages; --"


@pytest.mark.django_db
def test_hostile_values_only_ever_reach_the_database_as_parameters():
    templates: list[str] = []

    def record(execute, sql, params, many, context):
        templates.append(sql)
        return execute(sql, params, many, context)

    manager = SessionManager().with_context("memory", description="facts", max_tokens=500).with_cached_prompt()
    with connection.execute_wrapper(record):
        info = manager.create(MARKER, model=MARKER, source=MARKER)
        manager.append(info.id, {"id": MARKER, "role": MARKER, "parts": [{"type": "text", "text": f"hello {MARKER}"}]})
        child = {"id": MARKER + "2", "role": "user", "parts": [{"type": "text", "text": MARKER}]}
        manager.upsert(info.id, child, MARKER)
        manager.get_history(info.id, MARKER + "2")
        manager.get_branches(info.id, MARKER)
        manager.search(MARKER)
        manager.search(f'"{MARKER}" OR -{MARKER} hello')
        manager.search("zq9x 漢字 -drop")
        manager.rename(info.id, MARKER)
        fork = manager.fork(info.id, MARKER, MARKER)
        manager.add_compaction(info.id, MARKER, MARKER, MARKER + "2")
        session = manager.get_session(info.id)
        session.replace_context_block("memory", MARKER)
        session.freeze_system_prompt()
        tools = session.tools()
        tools["set_context"].execute(label="memory", content=MARKER)
        searchable = Session.create().for_session(MARKER).with_context(MARKER, provider=DjangoSearchProvider())
        searchable.tools()["set_context"].execute(label=MARKER, content=f"entry {MARKER}", metadata={"title": MARKER})
        searchable.tools()["search_context"].execute(label=MARKER, query=MARKER)
        manager.tools()["session_search"].execute(query=MARKER)
        manager.delete_messages(info.id, [MARKER])
        manager.compact_and_split(info.id, MARKER, MARKER)
        manager.delete(fork.id)
    assert len(templates) > 40
    leaked = [sql for sql in templates if "zq9x" in sql]
    assert not leaked, leaked[:3]
