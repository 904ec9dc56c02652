"""USER() / CURRENT_USER() name the real session (issue 25), and READ ONLY
transactions refuse writes with 1792, through PyMySQL."""
import uuid

import pymysql
import pytest

from conftest import PASSWORD


def connect(cluster, user="root", password=PASSWORD, db=None, unix=False):
    if unix:
        return pymysql.connect(unix_socket=cluster.socket, user=user, password=password, database=db,
                               autocommit=True)
    return pymysql.connect(host="127.0.0.1", port=cluster.port, user=user, password=password, database=db,
                           autocommit=True)


def one(cur, sql):
    cur.execute(sql)
    return cur.fetchone()


def err(fn):
    with pytest.raises(pymysql.err.MySQLError) as e:
        fn()
    return e.value.args[0]


def test_user_and_current_user_name_the_login_and_the_account(cluster):
    u = "u" + uuid.uuid4().hex[:8]
    admin = connect(cluster).cursor()
    admin.execute(f"CREATE USER '{u}'@'127.0.0.%' IDENTIFIED BY 'pw'")
    try:
        c = connect(cluster, u, "pw").cursor()
        # USER(): the name given and the client's address; CURRENT_USER():
        # the account the login matched (its host pattern).
        assert one(c, "SELECT USER(), SESSION_USER(), SYSTEM_USER(), CURRENT_USER(), CURRENT_USER") == (
            f"{u}@127.0.0.1", f"{u}@127.0.0.1", f"{u}@127.0.0.1", f"{u}@127.0.0.%", f"{u}@127.0.0.%")
        assert one(admin, "SELECT USER(), CURRENT_USER()") == ("root@127.0.0.1", "root@localhost")
        # The Unix socket's clients come from localhost.
        s = connect(cluster, unix=True).cursor()
        assert one(s, "SELECT USER(), CURRENT_USER()") == ("root@localhost", "root@localhost")
    finally:
        admin.execute(f"DROP USER '{u}'@'127.0.0.%'")


def test_read_only_transactions_refuse_writes_with_1792(cluster, dbname):
    c = connect(cluster, db=dbname)
    cur = c.cursor()
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    cur.execute("INSERT INTO t VALUES (1, 10)")

    cur.execute("START TRANSACTION READ ONLY")
    assert one(cur, "SELECT v FROM t WHERE id = 1") == (10,)
    for sql in ["INSERT INTO t VALUES (2, 20)", "UPDATE t SET v = 11", "DELETE FROM t",
                "REPLACE INTO t VALUES (1, 12)"]:
        assert err(lambda: cur.execute(sql)) == 1792, sql
    # A temporary table's rows may still change, as MySQL's (its definition
    # may not: test_read_only_refuses_ddl_with_1792).
    cur.execute("COMMIT")
    cur.execute("CREATE TEMPORARY TABLE tmp (a INT)")
    cur.execute("START TRANSACTION READ ONLY")
    cur.execute("INSERT INTO tmp VALUES (1)")
    cur.execute("COMMIT")
    # After the transaction, writes go through again.
    cur.execute("UPDATE t SET v = 11 WHERE id = 1")
    cur.execute("START TRANSACTION READ WRITE")
    cur.execute("UPDATE t SET v = 12 WHERE id = 1")
    cur.execute("COMMIT")
    assert one(cur, "SELECT v FROM t WHERE id = 1") == (12,)

    # SET TRANSACTION READ ONLY: the next transaction only.
    cur.execute("SET TRANSACTION READ ONLY")
    cur.execute("BEGIN")
    assert err(lambda: cur.execute("UPDATE t SET v = 13")) == 1792
    cur.execute("ROLLBACK")
    cur.execute("BEGIN")
    cur.execute("UPDATE t SET v = 13 WHERE id = 1")
    # Not while a transaction is open.
    assert err(lambda: cur.execute("SET TRANSACTION READ ONLY")) == 1568
    cur.execute("COMMIT")

    # The session's mode: every later transaction and autocommitted statement.
    cur.execute("SET SESSION TRANSACTION READ ONLY")
    assert int(one(cur, "SELECT @@transaction_read_only")[0]) == 1
    assert err(lambda: cur.execute("INSERT INTO t VALUES (3, 30)")) == 1792
    cur.execute("SET @@transaction_read_only = 0")
    cur.execute("INSERT INTO t VALUES (3, 30)")
    cur.execute("SET SESSION transaction_read_only = 1")
    assert err(lambda: cur.execute("DELETE FROM t WHERE id = 3")) == 1792
    # An explicit READ WRITE transaction overrides it.
    cur.execute("START TRANSACTION READ WRITE")
    cur.execute("DELETE FROM t WHERE id = 3")
    cur.execute("COMMIT")
    cur.execute("SET SESSION transaction_read_only = 0")
    assert one(cur, "SELECT COUNT(*) FROM t") == (1,)
    c.close()


def test_read_only_refuses_ddl_with_1792(cluster, dbname):
    """DDL in read-only mode (MySQL 8.0: after the statement's implicit
    commit, which ends an explicit READ ONLY transaction, so only a READ
    ONLY session refuses it; temporary-table DDL makes no implicit commit
    and is refused inside a READ ONLY transaction too)."""
    u = "ro" + uuid.uuid4().hex[:8]
    c = connect(cluster, db=dbname)
    cur = c.cursor()
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    cur.execute("CREATE VIEW vw AS SELECT id FROM t")

    cur.execute("SET SESSION TRANSACTION READ ONLY")
    refused = [
        "CREATE TABLE t2 (a INT PRIMARY KEY)",
        "CREATE TABLE t3 (a INT PRIMARY KEY) PARTITION BY HASH (a) PARTITIONS 2",
        "CREATE TABLE t4 LIKE t",
        "ALTER TABLE t ADD COLUMN w INT",
        "DROP TABLE t",
        "RENAME TABLE t TO t5",
        "TRUNCATE TABLE t",
        "CREATE INDEX iv ON t (v)",
        "DROP INDEX iv ON t",
        f"CREATE DATABASE {dbname}_x",
        f"DROP DATABASE {dbname}",
        "CREATE VIEW vw2 AS SELECT 1",
        "DROP VIEW vw",
        "OPTIMIZE TABLE t",
        "CREATE TEMPORARY TABLE tmp (a INT)",
        f"CREATE USER '{u}'@'%' IDENTIFIED BY 'pw'",
        f"GRANT SELECT ON {dbname}.* TO root@localhost",
    ]
    for sql in refused:
        assert err(lambda: cur.execute(sql)) == 1792, sql
    # Reads, SET and SHOW still run; the table is unchanged.
    cur.execute("ANALYZE TABLE t")
    assert one(cur, "SHOW CREATE TABLE t")[0] == "t"
    assert one(cur, "SELECT COUNT(*) FROM t") == (0,)
    # An explicit READ WRITE transaction does not help: DDL commits it first
    # and then runs in the session's mode.
    cur.execute("START TRANSACTION READ WRITE")
    assert err(lambda: cur.execute("CREATE TABLE t2 (a INT PRIMARY KEY)")) == 1792
    cur.execute("SET SESSION TRANSACTION READ WRITE")

    # A READ ONLY transaction in a READ WRITE session: the implicit commit
    # ends it and the DDL runs, as in MySQL ...
    cur.execute("START TRANSACTION READ ONLY")
    cur.execute("CREATE TABLE t2 (a INT PRIMARY KEY)")
    cur.execute("INSERT INTO t2 VALUES (1)")
    # ... but temporary-table DDL makes no implicit commit: refused in it.
    cur.execute("START TRANSACTION READ ONLY")
    assert err(lambda: cur.execute("CREATE TEMPORARY TABLE tmp (a INT)")) == 1792
    cur.execute("COMMIT")
    cur.execute("CREATE TEMPORARY TABLE tmp (a INT)")
    cur.execute("START TRANSACTION READ ONLY")
    assert err(lambda: cur.execute("DROP TEMPORARY TABLE tmp")) == 1792
    cur.execute("COMMIT")
    cur.execute("DROP TEMPORARY TABLE tmp")
    c.close()


def modes(cur, sql):
    ro, iso = one(cur, sql)
    return int(ro), iso


def test_set_global_transaction_sets_the_default_of_new_sessions(cluster, dbname):
    admin = connect(cluster, db=dbname)
    a = admin.cursor()
    a.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    try:
        a.execute("SET GLOBAL TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ ONLY")
        assert modes(a, "SELECT @@global.transaction_read_only, @@global.transaction_isolation") == (
            1, "SERIALIZABLE")
        assert modes(a, "SELECT @@global.tx_read_only, @@global.tx_isolation") == (1, "SERIALIZABLE")
        # This session keeps its own values ...
        assert modes(a, "SELECT @@session.transaction_read_only, @@session.transaction_isolation") == (
            0, "READ-COMMITTED")
        a.execute("INSERT INTO t VALUES (1)")
        # ... a new one starts from the global ones.
        n = connect(cluster, db=dbname)
        b = n.cursor()
        assert modes(b, "SELECT @@transaction_read_only, @@transaction_isolation") == (1, "SERIALIZABLE")
        assert err(lambda: b.execute("INSERT INTO t VALUES (2)")) == 1792
        assert err(lambda: b.execute("CREATE TABLE t2 (a INT PRIMARY KEY)")) == 1792
        n.close()
        a.execute("SET GLOBAL TRANSACTION READ WRITE")
        assert modes(a, "SELECT @@global.transaction_read_only, @@global.transaction_isolation") == (
            0, "SERIALIZABLE")
        n = connect(cluster, db=dbname)
        b = n.cursor()
        b.execute("INSERT INTO t VALUES (2)")
        n.close()
    finally:
        a.execute("SET GLOBAL TRANSACTION ISOLATION LEVEL READ COMMITTED, READ WRITE")
    assert modes(a, "SELECT @@global.transaction_read_only, @@global.transaction_isolation") == (
        0, "READ-COMMITTED")
    admin.close()
