"""CREATE TEMPORARY TABLE through PyMySQL: per-connection tables that shadow
base tables, survive COMMIT / ROLLBACK and go with the connection."""
import pymysql
import pytest

from conftest import PASSWORD


def connect(cluster, db=None, **kw):
    return pymysql.connect(host="127.0.0.1", port=cluster.port, user="root",
                           password=PASSWORD, database=db, **kw)


def error_code(excinfo):
    return excinfo.value.args[0]


def test_temporary_table_lifecycle(cluster, dbname):
    a = connect(cluster, dbname, autocommit=True)
    b = connect(cluster, dbname, autocommit=True)
    ca, cb = a.cursor(), b.cursor()
    ca.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
    ca.execute("INSERT INTO t VALUES (1, 'base')")

    ca.execute("CREATE TEMPORARY TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
    ca.executemany("INSERT INTO t VALUES (%s, %s)", [(1, "tmp1"), (2, "tmp2")])
    ca.execute("SELECT id, v FROM t ORDER BY id")
    assert ca.fetchall() == ((1, "tmp1"), (2, "tmp2"))
    assert [d[0] for d in ca.description] == ["id", "v"]
    # The other connection still reads the base table.
    cb.execute("SELECT id, v FROM t")
    assert cb.fetchall() == ((1, "base"),)

    ca.execute("SHOW CREATE TABLE t")
    name, ddl = ca.fetchone()
    assert name == "t"
    assert ddl.startswith("CREATE TEMPORARY TABLE `t` (")
    ca.execute("SHOW TABLES")
    assert ca.fetchall() == (("t",),)

    with pytest.raises(pymysql.MySQLError) as e:
        ca.execute("CREATE TEMPORARY TABLE t (x INT)")
    assert error_code(e) == 1050
    with pytest.raises(pymysql.MySQLError) as e:
        cb.execute("SELECT * FROM nothere")
    assert error_code(e) == 1146

    # Survives COMMIT and ROLLBACK; its rows follow the transaction.
    ca.execute("BEGIN")
    ca.execute("CREATE TEMPORARY TABLE tx (a INT PRIMARY KEY)")
    ca.execute("INSERT INTO tx VALUES (1)")
    ca.execute("ROLLBACK")
    ca.execute("SELECT COUNT(*) FROM tx")
    assert ca.fetchone() == (0,)
    ca.execute("BEGIN")
    ca.execute("INSERT INTO tx VALUES (2)")
    ca.execute("COMMIT")
    ca.execute("SELECT a FROM tx")
    assert ca.fetchall() == ((2,),)

    # AS SELECT from the (shadowed) base table is not possible by name; from
    # another temporary table it is.
    ca.execute("CREATE TEMPORARY TABLE copy AS SELECT id * 10 AS x FROM t")
    ca.execute("SELECT x FROM copy ORDER BY x")
    assert ca.fetchall() == ((10,), (20,))

    # DROP TEMPORARY TABLE never drops the base table.
    ca.execute("DROP TEMPORARY TABLE t")
    with pytest.raises(pymysql.MySQLError) as e:
        ca.execute("DROP TEMPORARY TABLE t")
    assert error_code(e) == 1051
    ca.execute("SELECT id, v FROM t")
    assert ca.fetchall() == ((1, "base"),)

    # Gone with the connection: a new one on the same server sees none.
    a.close()
    a2 = connect(cluster, dbname, autocommit=True)
    with pytest.raises(pymysql.MySQLError) as e:
        a2.cursor().execute("SELECT * FROM tx")
    assert error_code(e) == 1146
    a2.close()
    b.close()
