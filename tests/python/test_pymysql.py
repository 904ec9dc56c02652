"""PyMySQL (text protocol, client-side parameter interpolation)."""
import datetime
import decimal

import pymysql
import pytest

from conftest import PASSWORD


def connect(cluster, db=None, **kw):
    return pymysql.connect(host="127.0.0.1", port=cluster.port, user="root",
                           password=PASSWORD, database=db, **kw)


def test_select_literal(cluster):
    conn = connect(cluster)
    with conn.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)
    conn.ping()
    conn.close()


def test_wrong_password(cluster):
    with pytest.raises(pymysql.err.OperationalError) as e:
        pymysql.connect(host="127.0.0.1", port=cluster.port, user="root", password="nope")
    assert e.value.args[0] == 1045


def test_crud(cluster, dbname):
    conn = connect(cluster, dbname, autocommit=True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20), qty INT NOT NULL DEFAULT 0)")
    n = cur.executemany("INSERT INTO t (id, name, qty) VALUES (%s, %s, %s)",
                        [(1, "apple", 3), (2, "pear", 5), (3, "plum", 7)])
    assert n == 3
    cur.execute("SELECT id, name, qty FROM t ORDER BY id")
    assert cur.fetchall() == ((1, "apple", 3), (2, "pear", 5), (3, "plum", 7))
    assert [d[0] for d in cur.description] == ["id", "name", "qty"]
    assert cur.execute("UPDATE t SET qty = qty + 1 WHERE id >= %s", (2,)) == 2
    cur.execute("SELECT qty FROM t WHERE id = 3")
    assert cur.fetchone() == (8,)
    assert cur.execute("DELETE FROM t WHERE id = %s", (1,)) == 1
    cur.execute("SELECT COUNT(*) FROM t")
    assert cur.fetchone() == (2,)
    conn.close()


def test_auto_increment_last_insert_id(cluster, dbname):
    conn = connect(cluster, dbname, autocommit=True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE a (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10))")
    cur.execute("INSERT INTO a (v) VALUES ('x')")
    first = cur.lastrowid
    assert first >= 1
    cur.execute("INSERT INTO a (v) VALUES ('y')")
    assert cur.lastrowid > first
    conn.close()


def test_types_round_trip(cluster, dbname):
    conn = connect(cluster, dbname, autocommit=True)
    cur = conn.cursor()
    cur.execute("""CREATE TABLE ty (id INT PRIMARY KEY, i BIGINT, u INT UNSIGNED, d DECIMAL(10,2),
                   f DOUBLE, s VARCHAR(50), b VARBINARY(10), dt DATE, ts DATETIME(3), tm TIME, n INT)""")
    row = (1, -9000000000, 4000000000, decimal.Decimal("123.45"), 1.5, "héllo", b"\x00\x01\xff",
           datetime.date(2024, 2, 29), datetime.datetime(2024, 2, 29, 13, 5, 9, 123000),
           datetime.timedelta(hours=-25, minutes=-1), None)
    cur.execute("INSERT INTO ty VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)", row)
    cur.execute("SELECT * FROM ty")
    assert cur.fetchone() == row
    conn.close()


def test_transactions(cluster, dbname):
    conn = connect(cluster, dbname)
    cur = conn.cursor()
    cur.execute("CREATE TABLE acct (id INT PRIMARY KEY, bal INT)")
    conn.commit()
    conn.begin()
    cur.execute("INSERT INTO acct VALUES (1, 100)")
    conn.rollback()
    cur.execute("SELECT COUNT(*) FROM acct")
    assert cur.fetchone() == (0,)
    conn.begin()
    cur.execute("INSERT INTO acct VALUES (1, 100), (2, 50)")
    cur.execute("UPDATE acct SET bal = bal - 10 WHERE id = 1")
    conn.commit()
    other = connect(cluster, dbname)
    with other.cursor() as c2:
        c2.execute("SELECT id, bal FROM acct ORDER BY id")
        assert c2.fetchall() == ((1, 90), (2, 50))
    other.close()
    conn.close()


def test_savepoints(cluster, dbname):
    conn = connect(cluster, dbname)
    cur = conn.cursor()
    cur.execute("CREATE TABLE sp (id INT PRIMARY KEY, v INT)")
    conn.commit()
    conn.begin()
    cur.execute("INSERT INTO sp VALUES (1, 10)")
    cur.execute("SAVEPOINT a")
    cur.execute("INSERT INTO sp VALUES (2, 20)")
    cur.execute("UPDATE sp SET v = 11 WHERE id = 1")
    cur.execute("ROLLBACK TO SAVEPOINT a")
    cur.execute("SELECT id, v FROM sp ORDER BY id")
    assert cur.fetchall() == ((1, 10),)
    with pytest.raises(pymysql.err.MySQLError) as ei:
        cur.execute("ROLLBACK TO SAVEPOINT nope")
    assert ei.value.args == (1305, "SAVEPOINT nope does not exist")
    cur.execute("RELEASE SAVEPOINT a")
    with pytest.raises(pymysql.err.MySQLError) as ei:
        cur.execute("RELEASE SAVEPOINT a")
    assert ei.value.args[0] == 1305
    conn.commit()
    cur.execute("SELECT id, v FROM sp ORDER BY id")
    assert cur.fetchall() == ((1, 10),)
    conn.close()


def test_errors(cluster, dbname):
    conn = connect(cluster, dbname, autocommit=True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE e (id INT PRIMARY KEY)")
    cur.execute("INSERT INTO e VALUES (1)")
    with pytest.raises(pymysql.err.IntegrityError) as ei:
        cur.execute("INSERT INTO e VALUES (1)")
    assert ei.value.args[0] == 1062
    with pytest.raises(pymysql.err.ProgrammingError) as ei:
        cur.execute("SELEC 1")
    assert ei.value.args[0] == 1064
    with pytest.raises(pymysql.err.ProgrammingError) as ei:
        cur.execute("SELECT * FROM no_such_table")
    assert ei.value.args[0] == 1146
    # The connection is still usable.
    cur.execute("SELECT COUNT(*) FROM e")
    assert cur.fetchone() == (1,)
    conn.close()


def test_multi_statements(cluster, dbname):
    conn = connect(cluster, dbname, autocommit=True,
                   client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)
    cur = conn.cursor()
    cur.execute("SELECT 1; SELECT 2")
    assert cur.fetchall() == ((1,),)
    assert cur.nextset()
    assert cur.fetchall() == ((2,),)
    conn.close()


def ok_info(conn):
    # The OK packet's info text. mysqld sends it length-encoded (net_send_ok)
    # and PyMySQL hands over the rest of the packet, prefix included.
    raw = conn._result.message
    assert raw and raw[0] == len(raw) - 1, raw
    return raw[1:]


def test_multi_table_update_and_delete(cluster, dbname):
    # Affected rows and the "Rows matched" info of MySQL's multi-table UPDATE;
    # CLIENT_FOUND_ROWS turns the count into matched rows.
    conn = connect(cluster, dbname, autocommit=True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE orders (id INT PRIMARY KEY, cust INT, total INT)")
    cur.execute("CREATE TABLE cust (id INT PRIMARY KEY, spent INT, vip INT)")
    cur.executemany("INSERT INTO orders VALUES (%s, %s, %s)", [(1, 1, 10), (2, 1, 20), (3, 2, 5), (4, 9, 7)])
    cur.executemany("INSERT INTO cust VALUES (%s, %s, %s)", [(1, 0, 0), (2, 5, 0), (3, 0, 0)])
    n = cur.execute("UPDATE cust c JOIN orders o ON o.cust = c.id SET c.spent = o.total, c.vip = 1")
    # cust 1 (matched twice, updated once) and cust 2 (spent already 5, vip changes)
    assert n == 2
    assert ok_info(conn) == b"Rows matched: 2  Changed: 2  Warnings: 0"
    n = cur.execute("UPDATE cust c JOIN orders o ON o.cust = c.id SET c.vip = 1")
    assert n == 0
    assert ok_info(conn) == b"Rows matched: 2  Changed: 0  Warnings: 0"
    cur.execute("SELECT ROW_COUNT()")
    assert cur.fetchone() == (0,)
    n = cur.execute("DELETE o, c FROM orders o JOIN cust c ON c.id = o.cust WHERE c.id = %s", (1,))
    assert n == 3
    n = cur.execute("DELETE o FROM orders o LEFT JOIN cust c ON c.id = o.cust WHERE c.id IS NULL")
    assert n == 1
    cur.execute("SELECT id FROM orders ORDER BY id")
    assert cur.fetchall() == ((3,),)
    conn.close()

    found = connect(cluster, dbname, autocommit=True, client_flag=pymysql.constants.CLIENT.FOUND_ROWS)
    cur = found.cursor()
    assert cur.execute("UPDATE cust c JOIN orders o ON o.cust = c.id SET c.vip = 1") == 1
    found.close()


def test_found_rows(cluster, dbname):
    conn = connect(cluster, dbname, autocommit=True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE fr (id INT PRIMARY KEY)")
    cur.executemany("INSERT INTO fr VALUES (%s)", [(i,) for i in range(1, 8)])
    cur.execute("SELECT SQL_CALC_FOUND_ROWS id FROM fr ORDER BY id LIMIT %s", (2,))
    assert cur.fetchall() == ((1,), (2,))
    cur.execute("SELECT FOUND_ROWS()")
    assert cur.fetchone() == (7,)
    conn.close()
