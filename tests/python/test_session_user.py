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
    # A temporary table of the session may still change, as MySQL's.
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
