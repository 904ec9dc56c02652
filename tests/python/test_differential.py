"""Differential tier: statement files with the answers MySQL 8.0 gives
(tests/python/differential/*.test, written by hand from the MySQL 8.0
manual), run through real drivers against NorrDB. Each file runs twice on a
fresh database: every statement through PyMySQL's text protocol, then
through mysql-connector-python's prepared (binary protocol) cursor, so that
both of the server's execution paths give MySQL's answer.

File format (one record per block, blocks separated by blank lines; SQL may
span lines):

    # comment
    statement ok [affected=N] [insert_id=N] [warnings=CODE,CODE]
    INSERT ...

    statement error CODE
    UPDATE ...
    ----
    message: the exact error message (optional)

    query [warnings=CODE,...] [rowsort]
    SELECT ...
    ----
    columns: name | other name
    value | value

`columns:` (optional) is the exact list of result column names; each other
line is a row, values separated by ` | `, NULL for NULL, (empty) for ''.
`insert_id` is the OK packet's insert id (the driver's lastrowid),
`affected` its affected rows, `warnings` the codes SHOW WARNINGS lists
after the statement (none when absent from a query, not checked on a
statement without it).

A record whose header ends in `text-only` runs only on the text protocol
(statements MySQL cannot prepare, such as PREPARE itself).
"""
import datetime
import decimal
from pathlib import Path

import mysql.connector
import pymysql
import pytest

from conftest import PASSWORD

HERE = Path(__file__).resolve().parent
FILES = sorted((HERE / "differential").glob("*.test"))


class Record:
    def __init__(self, line, kind, opts, sql, columns, rows):
        self.line = line
        self.kind = kind          # "ok", "error", "query"
        self.opts = opts          # dict of header options
        self.sql = sql
        self.columns = columns    # list or None
        self.rows = rows          # list of lists of strings


def parse(path):
    lines = path.read_text().splitlines()
    records, i = [], 0
    while i < len(lines):
        line = lines[i].strip()
        if not line or line.startswith("#"):
            i += 1
            continue
        start = i + 1
        words = line.split()
        opts = {}
        if words[0] == "statement" and words[1] == "ok":
            kind, rest = "ok", words[2:]
        elif words[0] == "statement" and words[1] == "error":
            kind, rest = "error", words[3:]
            opts["code"] = int(words[2])
        elif words[0] == "query":
            kind, rest = "query", words[1:]
        else:
            raise ValueError(f"{path.name}:{start}: bad record header {line!r}")
        for w in rest:
            k, _, v = w.partition("=")
            opts[k] = v if v else True
        i += 1
        sql = []
        while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
            sql.append(lines[i])
            i += 1
        columns, rows = None, []
        if kind == "error" and i < len(lines) and lines[i].strip() == "----":
            i += 1
            text = lines[i].strip() if i < len(lines) else ""
            if not text.startswith("message: "):
                raise ValueError(f"{path.name}:{start}: an error's ---- is followed by `message: text`")
            opts["message"] = text[len("message: "):]
            i += 1
        elif kind == "query":
            if i >= len(lines) or lines[i].strip() != "----":
                raise ValueError(f"{path.name}:{start}: query without ----")
            i += 1
            while i < len(lines) and lines[i].strip():
                text = lines[i].strip()
                if text.startswith("columns:"):
                    columns = [c.strip() for c in text[len("columns:"):].split(" | ")]
                else:
                    rows.append([v.strip() for v in text.split(" | ")])
                i += 1
        if not sql:
            raise ValueError(f"{path.name}:{start}: record without SQL")
        records.append(Record(start, kind, opts, "\n".join(sql), columns, rows))
    return records


def show(v):
    if v is None:
        return "NULL"
    if isinstance(v, (bytes, bytearray)):
        try:
            v = bytes(v).decode("utf-8")
        except UnicodeDecodeError:
            return "0x" + bytes(v).hex()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (datetime.date, datetime.datetime, datetime.timedelta)):
        return str(v)
    s = str(v)
    return "(empty)" if s == "" else s


def codes(opt):
    if opt is None or opt is True:
        return []
    return sorted(int(c) for c in opt.split(","))


class TextRunner:
    """PyMySQL: every statement on the text protocol."""
    name = "text"

    def __init__(self, cluster, db):
        self.conn = pymysql.connect(host="127.0.0.1", port=cluster.port, user="root",
                                    password=PASSWORD, database=db, autocommit=True)

    def run(self, sql):
        cur = self.conn.cursor()
        try:
            cur.execute(sql)
        except pymysql.err.MySQLError as e:
            return ("error", e.args[0], e.args[1] if len(e.args) > 1 else "")
        names = [d[0] for d in cur.description] if cur.description else None
        rows = [list(r) for r in cur.fetchall()] if cur.description else []
        return ("ok", names, rows, cur.rowcount, cur.lastrowid)

    def warnings(self):
        cur = self.conn.cursor()
        cur.execute("SHOW WARNINGS")
        return sorted(r[1] for r in cur.fetchall())

    def close(self):
        self.conn.close()


class PreparedRunner(TextRunner):
    """mysql-connector-python's prepared cursor: COM_STMT_PREPARE and
    COM_STMT_EXECUTE (binary result rows) for every statement."""
    name = "prepared"

    def __init__(self, cluster, db):
        self.conn = mysql.connector.connect(host="127.0.0.1", port=cluster.port, user="root",
                                            password=PASSWORD, database=db, use_pure=True,
                                            autocommit=True)

    def run(self, sql):
        cur = self.conn.cursor(prepared=True)
        try:
            cur.execute(sql)
            names = list(cur.column_names) if cur.description else None
            rows = [list(r) for r in cur.fetchall()] if cur.description else []
            affected, insert_id = cur.rowcount, cur.lastrowid
        except mysql.connector.Error as e:
            return ("error", e.errno, e.msg)
        finally:
            try:
                cur.close()
            except mysql.connector.Error:
                pass
        return ("ok", names, rows, affected, insert_id)

    def warnings(self):
        cur = self.conn.cursor()
        cur.execute("SHOW WARNINGS")
        return sorted(r[1] for r in cur.fetchall())


def check(runner, rec, where):
    got = runner.run(rec.sql)
    if rec.kind == "error":
        assert got[0] == "error", f"{where}: expected error {rec.opts['code']}, statement succeeded"
        assert got[1] == rec.opts["code"], f"{where}: expected error {rec.opts['code']}, got {got[1]}: {got[2]}"
        if "message" in rec.opts:
            assert got[2] == rec.opts["message"], f"{where}: error message {got[2]!r}"
        return
    assert got[0] == "ok", f"{where}: unexpected error {got[1]}: {got[2]}"
    _, names, rows, affected, insert_id = got
    if "affected" in rec.opts:
        assert affected == int(rec.opts["affected"]), f"{where}: affected rows {affected}"
    if "insert_id" in rec.opts:
        assert (insert_id or 0) == int(rec.opts["insert_id"]), f"{where}: insert id {insert_id}"
    if rec.kind == "query":
        assert names is not None, f"{where}: no result set"
        if rec.columns is not None:
            assert names == rec.columns, f"{where}: column names {names}"
        shown = [[show(v) for v in r] for r in rows]
        want = rec.rows
        if "rowsort" in rec.opts:
            shown, want = sorted(shown), sorted(want)
        assert shown == want, f"{where}: rows {shown}"
    if rec.kind == "query" or "warnings" in rec.opts:
        assert runner.warnings() == codes(rec.opts.get("warnings")), f"{where}: warnings"


@pytest.mark.parametrize("mode", ["text", "prepared"])
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_differential(cluster, dbname, path, mode):
    records = parse(path)
    runner = (TextRunner if mode == "text" else PreparedRunner)(cluster, dbname)
    try:
        for rec in records:
            if mode == "prepared" and "text-only" in rec.opts:
                continue
            check(runner, rec, f"{path.name}:{rec.line} ({mode})")
    finally:
        runner.close()


def test_files_exist_and_parse():
    assert FILES, "no differential test files"
    for p in FILES:
        assert parse(p), p
