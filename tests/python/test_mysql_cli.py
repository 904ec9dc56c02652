"""The `mysql` command-line client (Debian's default-mysql-client) against norr sqld.

Batch mode checks result formatting and error reporting; interactive mode runs the
client on a pseudo-terminal, as a person would, with its connect-time queries, table
name completion (COM_FIELD_LIST) and the `status` command. The SHOW CREATE TABLE
round trip checks that the output re-executes to an identical table.
"""
import os
import pty
import re
import select
import shutil
import subprocess
import time

import pymysql

from conftest import PASSWORD

MYSQL = shutil.which("mysql")


def mysql_args(cluster, *extra):
    assert MYSQL, "the mysql client is not installed (tests/python/run.sh installs it)"
    return [MYSQL, "-h", "127.0.0.1", "-P", str(cluster.port), "-u", "root",
            f"--password={PASSWORD}", *extra]


def batch(cluster, sql, *extra, check=True):
    p = subprocess.run(mysql_args(cluster, "--batch", *extra), input=sql, text=True,
                       capture_output=True, timeout=60)
    if check:
        assert p.returncode == 0, f"mysql failed ({p.returncode}): {p.stderr}"
    return p


def test_batch_results_and_errors(cluster, dbname):
    out = batch(cluster, f"""
        USE {dbname};
        CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(8,2), d DATE);
        INSERT INTO t VALUES (1, 'ann', 10.50, '2024-02-29'), (2, NULL, -3.25, NULL);
        SELECT id, name, amount, d FROM t ORDER BY id;
    """).stdout
    assert out.splitlines() == [
        "id\tname\tamount\td",
        "1\tann\t10.50\t2024-02-29",
        "2\tNULL\t-3.25\tNULL",
    ]
    # An error stops the batch with MySQL's code and SQLSTATE on stderr; what ran
    # before it stays applied.
    p = batch(cluster, f"USE {dbname}; INSERT INTO t VALUES (3, 'c', 1, NULL);\n"
                       "INSERT INTO t VALUES (1, 'dup', 0, NULL);\nSELECT 'not reached';\n",
              check=False)
    assert p.returncode == 1
    assert "ERROR 1062 (23000)" in p.stderr, p.stderr
    assert "not reached" not in p.stdout
    out = batch(cluster, f"SELECT COUNT(*) FROM {dbname}.t", "--skip-column-names").stdout
    assert out.strip() == "3"
    # A wrong password is refused with 1045.
    p = subprocess.run([MYSQL, "-h", "127.0.0.1", "-P", str(cluster.port), "-u", "root",
                        "--password=wrong", "-e", "SELECT 1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "ERROR 1045 (28000)" in p.stderr, p.stderr


def test_show_create_table_reexecutes_to_an_identical_table(cluster, dbname):
    ddl = (f"CREATE TABLE {dbname}.src ("
           " id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,"
           " code CHAR(4) NOT NULL DEFAULT 'abcd',"
           " note VARCHAR(100) DEFAULT NULL,"
           " price DECIMAL(10,3) NOT NULL,"
           " ratio DOUBLE, small TINYINT, created DATETIME, blob_col BLOB,"
           " PRIMARY KEY (id), UNIQUE KEY uk_code (code, id), KEY k_note_price (note, price)"
           ") PARTITION BY KEY (id) PARTITIONS 4")
    batch(cluster, ddl + ";")
    first = batch(cluster, f"SHOW CREATE TABLE {dbname}.src", "--skip-column-names",
                  "--raw").stdout
    name, create = first.rstrip("\n").split("\t", 1)
    assert name == "src"
    # Re-execute the printed statement under another name in another database.
    batch(cluster, f"CREATE DATABASE {dbname}_copy; USE {dbname}_copy;\n{create};")
    try:
        second = batch(cluster, f"SHOW CREATE TABLE {dbname}_copy.src", "--skip-column-names",
                       "--raw").stdout
        assert second == first
        cols = "SELECT column_name, column_type, is_nullable, column_default, extra " \
               "FROM information_schema.columns WHERE table_schema = '{}' AND table_name = 'src' " \
               "ORDER BY ordinal_position"
        assert batch(cluster, cols.format(dbname)).stdout == batch(
            cluster, cols.format(dbname + "_copy")).stdout
    finally:
        batch(cluster, f"DROP DATABASE {dbname}_copy;")


class Terminal:
    """The mysql client on a pseudo-terminal: what a person typing sees."""

    def __init__(self, args):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # child
            os.environ["TERM"] = "dumb"
            os.execv(args[0], args)
        self.out = b""

    def read_until(self, pattern, timeout_s=30):
        deadline = time.time() + timeout_s
        rx = re.compile(pattern.encode())
        while not rx.search(self.out):
            left = deadline - time.time()
            assert left > 0, f"timed out waiting for {pattern!r}; screen:\n{self.out.decode(errors='replace')}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                assert chunk, f"client exited; screen:\n{self.out.decode(errors='replace')}"
                self.out += chunk
        text = self.out.decode(errors="replace")
        self.out = b""
        return text

    def send(self, line):
        os.write(self.fd, line.encode() + b"\n")

    def close(self):
        try:
            self.send("quit")
            _, status = os.waitpid(self.pid, 0)
            return os.waitstatus_to_exitcode(status)
        finally:
            os.close(self.fd)


def test_interactive_session(cluster, dbname):
    setup = pymysql.connect(host="127.0.0.1", port=cluster.port, user="root",
                            password=PASSWORD, database=dbname, autocommit=True)
    with setup.cursor() as cur:
        cur.execute("CREATE TABLE visits (id INT PRIMARY KEY, who VARCHAR(10), n INT)")
        cur.execute("INSERT INTO visits VALUES (1, 'ann', 3), (2, 'bob', 5)")
    setup.close()
    # Without -A the client reads every table's columns for name completion
    # (COM_FIELD_LIST) when a database is selected.
    term = Terminal(mysql_args(cluster, dbname))
    prompt = r"\[" + dbname + r"\]> $"
    banner = term.read_until(prompt)
    assert "Server version:" in banner, banner
    term.send("SELECT who, n FROM visits ORDER BY id;")
    screen = term.read_until(prompt)
    assert re.search(r"\| who\s+\| n\s+\|", screen), screen
    assert re.search(r"\| ann\s+\|\s+3 \|", screen) and re.search(r"\| bob\s+\|\s+5 \|", screen), screen
    assert "2 rows in set" in screen, screen
    # A transaction across prompts, and an error that leaves the session usable.
    term.send("BEGIN;")
    term.read_until(prompt)
    term.send("UPDATE visits SET n = n + 1 WHERE who = 'ann';")
    assert "1 row affected" in term.read_until(prompt)
    term.send("SELECT nope FROM visits;")
    screen = term.read_until(prompt)
    assert "ERROR 1054 (42S22)" in screen, screen
    term.send("COMMIT;")
    term.read_until(prompt)
    term.send("SELECT n FROM visits WHERE id = 1;")
    assert re.search(r"\|\s+4 \|", term.read_until(prompt))
    # A multi-line statement gets the continuation prompt.
    term.send("SELECT COUNT(*)")
    term.read_until(r"->\s*$")
    term.send("  FROM visits;")
    assert re.search(r"\|\s+2 \|", term.read_until(prompt))
    # `status` runs the client's own introspection queries.
    term.send("status")
    screen = term.read_until(prompt)
    assert "Current database:\t" + dbname in screen.replace("\r", ""), screen
    assert re.search(r"Server version:\s+\S", screen), screen
    term.send("USE information_schema")
    term.read_until(r"\[information_schema\]> $")
    assert term.close() == 0
