"""mysqldump (Debian's, from default-mysql-client) against norr sqld, and its
output restored through the `mysql` client: what a user does for a logical
backup or to copy a database.

The dump runs with mysqldump's defaults (LOCK TABLES ... READ LOCAL around the
reads) and with --single-transaction (START TRANSACTION WITH CONSISTENT
SNAPSHOT); the restore runs what the dump holds (DROP / CREATE TABLE, LOCK
TABLES ... WRITE, ALTER TABLE ... DISABLE KEYS, multi-row INSERTs, UNLOCK
TABLES, the versioned SET comments). The restored tables must equal the
originals: definitions (SHOW CREATE TABLE) and every value.
"""
import json
import shutil
import subprocess

import pymysql
import pytest

from conftest import PASSWORD

MYSQLDUMP = shutil.which("mysqldump")
MYSQL = shutil.which("mysql")

SCHEMA = """
CREATE TABLE customers (
  id INT PRIMARY KEY AUTO_INCREMENT,
  name VARCHAR(50) NOT NULL,
  email VARCHAR(100),
  balance DECIMAL(10,2) DEFAULT 0,
  created DATETIME,
  born DATE,
  UNIQUE KEY uq_email (email),
  KEY ix_name (name)
);
CREATE TABLE orders (
  id BIGINT PRIMARY KEY,
  cust INT NOT NULL,
  total DOUBLE,
  qty SMALLINT UNSIGNED NOT NULL DEFAULT 1,
  note TEXT,
  raw VARBINARY(16),
  KEY ix_cust (cust)
);
CREATE TABLE no_pk (a INT, b CHAR(3));
CREATE TABLE a_notes (
  id INT PRIMARY KEY,
  cust INT,
  txt VARCHAR(20),
  CONSTRAINT fk_notes_cust FOREIGN KEY (cust) REFERENCES customers (id) ON DELETE CASCADE
);
CREATE TABLE order_lines (
  id INT PRIMARY KEY,
  order_id BIGINT NOT NULL,
  FOREIGN KEY (order_id) REFERENCES orders (id)
);
CREATE TABLE typed (
  id INT PRIMARY KEY,
  color ENUM('red','green','it''s') NOT NULL DEFAULT 'red',
  tags SET('a','b','c'),
  doc JSON,
  flags BIT(12) DEFAULT b'0',
  KEY ix_color (color)
);
"""


def connect(cluster, db=None):
    return pymysql.connect(host="127.0.0.1", port=cluster.port, user="root", password=PASSWORD,
                           database=db, autocommit=True)


def fill(cluster, db):
    conn = connect(cluster, db)
    with conn.cursor() as cur:
        for stmt in SCHEMA.split(";"):
            if stmt.strip():
                cur.execute(stmt)
        cur.executemany(
            "INSERT INTO customers (name, email, balance, created, born) VALUES (%s, %s, %s, %s, %s)",
            [("Ann", "ann@example.org", "10.50", "2026-01-02 03:04:05", "1990-02-28"),
             ("Bob", None, "0", None, None),
             ("Cé 漢字 😀", "c@example.org", "-3.25", "2025-12-31 23:59:59", "2000-01-01")]
            + [(f"user{i}", f"u{i}@example.org", f"{i}.{i % 100:02d}", None, None) for i in range(200)])
        cur.executemany(
            "INSERT INTO orders VALUES (%s, %s, %s, %s, %s, %s)",
            [(1, 1, 9.99, 2, "it's \"quoted\"\n and\ttabbed \\ backslash", b"\x00\x01\xff'\""),
             (2, 3, None, 1, None, None),
             (3, 2, -1.5e300, 65535, "", b"")]
            + [(100 + i, i % 7, i * 1.25, i, f"note {i}", bytes([i % 256])) for i in range(500)])
        cur.execute("INSERT INTO no_pk VALUES (1, 'x'), (1, 'x'), (NULL, NULL)")
        cur.execute("INSERT INTO a_notes VALUES (1, 1, 'x'), (2, NULL, 'y'), (3, 3, 'z')")
        cur.execute("INSERT INTO order_lines VALUES (1, 1), (2, 1), (3, 100)")
        cur.executemany(
            "INSERT INTO typed VALUES (%s, %s, %s, %s, %s)",
            [(1, "it's", "c,a", json.dumps({"k": "it's \\ \"q\"", "n": [1, 2.5, None], "é": True}), b"\x0f\xff"),
             (2, "green", "", "[]", b"\x00\x00"),
             (3, "red", None, None, None)])
    conn.close()


def snapshot(cluster, db):
    """Every table's definition and rows, in a comparable form."""
    conn = connect(cluster, db)
    out = {}
    with conn.cursor() as cur:
        cur.execute("SHOW TABLES")
        for (t,) in cur.fetchall():
            cur.execute(f"SHOW CREATE TABLE `{t}`")
            ddl = cur.fetchone()[1]
            cur.execute(f"SELECT * FROM `{t}`")
            rows = sorted(cur.fetchall(), key=repr)
            out[t] = (ddl, rows)
    conn.close()
    return out


def dump(cluster, db, *opts):
    assert MYSQLDUMP, "mysqldump is not installed (tests/python/run.sh installs default-mysql-client)"
    p = subprocess.run([MYSQLDUMP, "-h", "127.0.0.1", "-P", str(cluster.port), "-u", "root",
                        f"--password={PASSWORD}", *opts, db],
                       capture_output=True, timeout=120)
    assert p.returncode == 0, f"mysqldump failed ({p.returncode}): {p.stderr.decode(errors='replace')}"
    return p.stdout


def restore(cluster, db, sql):
    p = subprocess.run([MYSQL, "-h", "127.0.0.1", "-P", str(cluster.port), "-u", "root",
                        f"--password={PASSWORD}", db], input=sql, capture_output=True, timeout=120)
    assert p.returncode == 0, f"restore failed ({p.returncode}): {p.stderr.decode(errors='replace')}"


@pytest.mark.parametrize("opts", [(), ("--single-transaction",)], ids=["lock-tables", "single-transaction"])
def test_dump_and_restore_round_trip(cluster, dbname, opts):
    fill(cluster, dbname)
    # A customer added and deleted again: the counter is past every row, and
    # the dump's AUTO_INCREMENT= carries it, as MySQL's does.
    c1 = connect(cluster, dbname)
    with c1.cursor() as cur:
        cur.execute("INSERT INTO customers (name) VALUES ('gone')")
        gone = cur.lastrowid
        cur.execute("DELETE FROM customers WHERE id = %s", (gone,))
    c1.close()
    before = snapshot(cluster, dbname)
    text = dump(cluster, dbname, *opts)
    if not opts:
        assert b"LOCK TABLES `orders` WRITE;" in text
    # The child a_notes is dumped (and restored) before its parent customers:
    # the dump turns FOREIGN_KEY_CHECKS off around the restore.
    assert b"CONSTRAINT `fk_notes_cust` FOREIGN KEY (`cust`) REFERENCES `customers` (`id`) ON DELETE CASCADE" in text
    assert b"FOREIGN_KEY_CHECKS=0" in text
    # Restore into a second database, and over the original (the dump drops
    # and recreates each table).
    copy = dbname + "_copy"
    conn = connect(cluster)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {copy}")
    try:
        restore(cluster, copy, text)
        assert snapshot(cluster, copy) == before
        restore(cluster, dbname, text)
        assert snapshot(cluster, dbname) == before
        # AUTO_INCREMENT goes on after the restored rows, and after the
        # deleted one.
        c2 = connect(cluster, copy)
        with c2.cursor() as cur:
            cur.execute("INSERT INTO customers (name) VALUES ('next')")
            cur.execute("SELECT MAX(id) = LAST_INSERT_ID(), LAST_INSERT_ID() > %s FROM customers", (gone,))
            assert cur.fetchone() == (1, 1)
            # The restored constraints are enforced.
            with pytest.raises(pymysql.err.IntegrityError) as e:
                cur.execute("INSERT INTO a_notes VALUES (9, 99999, 'orphan')")
            assert e.value.args[0] == 1452
            with pytest.raises(pymysql.err.IntegrityError) as e:
                cur.execute("DELETE FROM orders WHERE id = 100")
            assert e.value.args[0] == 1451
            cur.execute("DELETE FROM customers WHERE id = 1")
            cur.execute("SELECT id FROM a_notes ORDER BY id")
            assert cur.fetchall() == ((2,), (3,))
        c2.close()
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {copy}")
        conn.close()


def test_dump_waits_for_a_write_lock_held_by_another_session(cluster, dbname):
    """mysqldump's LOCK TABLES ... READ waits for a session's WRITE lock on
    this SQL node, and gives up with the lock wait time-out."""
    fill(cluster, dbname)
    holder = connect(cluster, dbname)
    with holder.cursor() as cur:
        cur.execute("LOCK TABLES orders WRITE")
        cur.execute("INSERT INTO orders VALUES (9999, 1, 1, 1, 'held', NULL)")
    # New sessions (mysqldump's) start from the global value.
    admin = connect(cluster)
    with admin.cursor() as cur:
        cur.execute("SET GLOBAL lock_wait_timeout = 1")
    try:
        p = subprocess.run([MYSQLDUMP, "-h", "127.0.0.1", "-P", str(cluster.port), "-u", "root",
                            f"--password={PASSWORD}", dbname], capture_output=True, timeout=60)
    finally:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL lock_wait_timeout = DEFAULT")
        admin.close()
    assert p.returncode != 0
    assert b"1205" in p.stderr, p.stderr
    with holder.cursor() as cur:
        cur.execute("UNLOCK TABLES")
    text = dump(cluster, dbname)
    assert b"(9999,1,1,1,'held',NULL)" in text
    holder.close()


VIEWS = """
CREATE TABLE emp (id INT PRIMARY KEY, name VARCHAR(20), dept INT, pay DECIMAL(8,2));
CREATE VIEW rich (who, pay) AS SELECT name, pay FROM emp WHERE pay >= 100;
CREATE VIEW richest AS SELECT who FROM rich WHERE pay > 150;
CREATE VIEW by_dept AS SELECT dept, COUNT(*) AS n, SUM(pay) AS total FROM emp GROUP BY dept;
CREATE ALGORITHM=MERGE SQL SECURITY INVOKER VIEW checked AS SELECT id, pay FROM emp WHERE pay < 1000 WITH CASCADED CHECK OPTION
"""


@pytest.mark.parametrize("opts", [(), ("--single-transaction",)], ids=["lock-tables", "single-transaction"])
def test_dump_and_restore_views(cluster, dbname, opts):
    """Views (one over another, an aggregate, CHECK OPTION) dump as
    mysqldump's placeholder views first and the real definitions at the end,
    and restore to the same definitions and rows. The default run locks the
    views with the tables (LOCK TABLES ... READ)."""
    conn = connect(cluster, dbname)
    with conn.cursor() as cur:
        for stmt in VIEWS.split(";"):
            if stmt.strip():
                cur.execute(stmt)
        cur.execute("INSERT INTO emp VALUES (1, 'ann', 1, 50), (2, 'bob', 1, 120), (3, 'cid', 2, 200)")
    conn.close()
    before = snapshot(cluster, dbname)
    assert set(before) == {"emp", "rich", "richest", "by_dept", "checked"}
    assert before["richest"][1] == [("cid",)]
    text = dump(cluster, dbname, *opts)
    assert b"for view `richest`" in text
    assert b"/*!50013 DEFINER=`root`@`%` SQL SECURITY INVOKER */" in text
    # No rows are dumped for a view.
    assert b"INSERT INTO `rich`" not in text
    copy = dbname + "_copy"
    conn = connect(cluster)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {copy}")
    try:
        restore(cluster, copy, text)
        assert snapshot(cluster, copy) == before
        c2 = connect(cluster, copy)
        with c2.cursor() as cur:
            # The restored view reads the copy's table, and keeps its CHECK OPTION.
            cur.execute("INSERT INTO emp VALUES (4, 'dan', 2, 500)")
            cur.execute("SELECT who FROM richest ORDER BY who")
            assert cur.fetchall() == (("cid",), ("dan",))
            with pytest.raises(pymysql.err.OperationalError) as e:
                cur.execute("UPDATE checked SET pay = 5000 WHERE id = 4")
            assert e.value.args[0] == 1369
        c2.close()
        # Over the original too (the dump drops and recreates each view).
        restore(cluster, dbname, text)
        assert snapshot(cluster, dbname) == before
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {copy}")
        conn.close()


GENERATED = """
CREATE TABLE people (
  id INT PRIMARY KEY,
  first VARCHAR(20) NOT NULL,
  last VARCHAR(20),
  full_name VARCHAR(41) AS (CONCAT(first, ' ', last)),
  doc JSON,
  city VARCHAR(20) GENERATED ALWAYS AS (doc->>'$.city') STORED,
  UNIQUE KEY uq_full (full_name),
  KEY ix_city (city)
)
"""


@pytest.mark.parametrize("opts", [(), ("--single-transaction",)], ids=["lock-tables", "single-transaction"])
def test_dump_and_restore_generated_columns(cluster, dbname, opts):
    """Generated columns dump as SHOW CREATE TABLE prints them and the
    definitions restore identically; the base columns copied into the
    restored table compute the same generated values and indexes work.

    Only the definitions go through the dump (--no-data): Debian's mysqldump
    (MariaDB's) writes the generated values into its INSERTs, which MySQL 8.0
    and NorrDB refuse (3105); MariaDB's server ignores them with a warning
    outside strict mode. See the report of the generated-columns change."""
    conn = connect(cluster, dbname)
    with conn.cursor() as cur:
        cur.execute(GENERATED)
        cur.execute("""INSERT INTO people (id, first, last, doc) VALUES
                       (1, 'Ann', 'Lee', '{"city": "Oslo"}'), (2, 'Bob', NULL, NULL),
                       (3, 'Cé', 'Ng', '{"city": "Bergen"}')""")
    conn.close()
    before = snapshot(cluster, dbname)
    ddl = before["people"][0]
    assert "`full_name` varchar(41) GENERATED ALWAYS AS (CONCAT(`first`, ' ', `last`)) VIRTUAL" in ddl, ddl
    assert "`city` varchar(20) GENERATED ALWAYS AS (" in ddl and ") STORED" in ddl, ddl
    text = dump(cluster, dbname, "--no-data", *opts)
    assert b"GENERATED ALWAYS AS" in text
    copy = dbname + "_copy"
    conn = connect(cluster)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {copy}")
    try:
        restore(cluster, copy, text)
        c2 = connect(cluster, copy)
        with c2.cursor() as cur:
            cur.execute(f"INSERT INTO people (id, first, last, doc) SELECT id, first, last, doc FROM {dbname}.people")
        assert snapshot(cluster, copy) == before
        with c2.cursor() as cur:
            cur.execute("SELECT id FROM people WHERE city = 'Bergen'")
            assert cur.fetchall() == ((3,),)
            cur.execute("UPDATE people SET last = 'Li' WHERE id = 1")
            cur.execute("SELECT full_name FROM people WHERE id = 1")
            assert cur.fetchone() == ("Ann Li",)
            with pytest.raises(pymysql.err.MySQLError) as e:
                cur.execute("INSERT INTO people (id, first, full_name) VALUES (9, 'x', 'y')")
            assert e.value.args[0] == 3105
        c2.close()
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {copy}")
        conn.close()
