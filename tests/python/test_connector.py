"""mysql-connector-python: pure-Python and C extension, text and prepared
(binary protocol) cursors."""
import datetime
import decimal

import mysql.connector
import pytest

from conftest import PASSWORD

MODES = [True]
try:  # the C extension ships in the wheel on most platforms
    import _mysql_connector  # noqa: F401
    MODES.append(False)
except ImportError:
    pass


def connect(cluster, db=None, use_pure=True, **kw):
    return mysql.connector.connect(host="127.0.0.1", port=cluster.port, user="root",
                                   password=PASSWORD, database=db, use_pure=use_pure, **kw)


@pytest.mark.parametrize("use_pure", MODES)
def test_select_and_auth(cluster, use_pure):
    conn = connect(cluster, use_pure=use_pure)
    cur = conn.cursor()
    cur.execute("SELECT 1")
    assert cur.fetchall() == [(1,)]
    conn.close()
    with pytest.raises(mysql.connector.Error) as e:
        mysql.connector.connect(host="127.0.0.1", port=cluster.port, user="root",
                                password="wrong", use_pure=use_pure)
    assert e.value.errno == 1045


@pytest.mark.parametrize("use_pure", MODES)
def test_crud_prepared(cluster, dbname, use_pure):
    conn = connect(cluster, dbname, use_pure=use_pure, autocommit=True)
    cur = conn.cursor(prepared=True)
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(8,2), "
                "made DATETIME, f DOUBLE)")
    rows = [(1, "one", decimal.Decimal("1.10"), datetime.datetime(2020, 1, 2, 3, 4, 5), 0.5),
            (2, "two", decimal.Decimal("2.20"), datetime.datetime(2021, 6, 7, 8, 9, 10), -1e20),
            (3, None, None, None, None)]
    for r in rows:
        cur.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)", r)
    cur.execute("SELECT id, name, price, made, f FROM t WHERE id >= ? ORDER BY id", (1,))
    got = [tuple(r) for r in cur.fetchall()]
    assert got == rows
    cur.execute("UPDATE t SET name = ? WHERE id = ?", ("uno", 1))
    assert cur.rowcount == 1
    cur.execute("DELETE FROM t WHERE id = ?", (2,))
    assert cur.rowcount == 1
    cur.execute("SELECT name FROM t WHERE id = ?", (1,))
    assert cur.fetchall() == [("uno",)]
    conn.close()


@pytest.mark.parametrize("use_pure", MODES)
def test_transactions_and_errors(cluster, dbname, use_pure):
    conn = connect(cluster, dbname, use_pure=use_pure)
    cur = conn.cursor()
    cur.execute("CREATE TABLE k (id INT PRIMARY KEY, v INT)")
    conn.start_transaction()
    cur.execute("INSERT INTO k VALUES (1, 1)")
    assert conn.in_transaction
    conn.rollback()
    cur.execute("SELECT COUNT(*) FROM k")
    assert cur.fetchall() == [(0,)]
    # The connector runs with autocommit off: the SELECT opened a transaction
    # (as in MySQL), which must end before start_transaction().
    conn.commit()
    conn.start_transaction()
    cur.execute("INSERT INTO k VALUES (1, 1)")
    conn.commit()
    with pytest.raises(mysql.connector.IntegrityError) as e:
        cur.execute("INSERT INTO k VALUES (1, 2)")
    assert e.value.errno == 1062 and e.value.sqlstate == "23000"
    with pytest.raises(mysql.connector.ProgrammingError) as e:
        cur.execute("SELECT * FROM nope")
    assert e.value.errno == 1146 and e.value.sqlstate == "42S02"
    cur.execute("SELECT v FROM k")
    assert cur.fetchall() == [(1,)]
    conn.close()


@pytest.mark.parametrize("use_pure", MODES)
def test_rollup_table_values_prepared(cluster, dbname, use_pure):
    # COM_STMT_PREPARE / EXECUTE over the wire: binary rows with the
    # rolled-up NULLs, GROUPING() values and VALUES' column names.
    conn = connect(cluster, dbname, use_pure=use_pure, autocommit=True)
    cur = conn.cursor(prepared=True)
    cur.execute("CREATE TABLE s (id INT PRIMARY KEY, g INT NOT NULL, v INT)")
    for r in [(1, 1, 10), (2, 1, 20), (3, 2, 30)]:
        cur.execute("INSERT INTO s VALUES (?, ?, ?)", r)
    cur.execute("SELECT g, COUNT(*), GROUPING(g) FROM s WHERE v >= ? GROUP BY g WITH ROLLUP", (10,))
    assert [d[0] for d in cur.description] == ["g", "COUNT(*)", "GROUPING(g)"]
    assert [tuple(r) for r in cur.fetchall()] == [(1, 2, 0), (2, 1, 0), (None, 3, 1)]
    cur.execute("VALUES ROW(5, 'a'), ROW(2, 'b') ORDER BY column_0")
    assert [d[0] for d in cur.description] == ["column_0", "column_1"]
    assert [tuple(r) for r in cur.fetchall()] == [(2, "b"), (5, "a")]
    cur.execute("TABLE s ORDER BY id DESC LIMIT ?", (1,))
    assert [tuple(r) for r in cur.fetchall()] == [(3, 2, 30)]
    conn.close()
