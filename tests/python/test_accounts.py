"""Accounts and privileges stored in the cluster (issue 25), through PyMySQL
and mysql-connector: CREATE USER / GRANT / REVOKE / roles / SHOW GRANTS, the
errors MySQL gives (1045, 1142, 1143, 1044, 1227, 1396, 3118), and a second
SQL node that sees the same accounts."""
import os
import subprocess
import time
import uuid

import mysql.connector
import pymysql
import pytest

from conftest import PASSWORD, free_port, wait_port


def root(cluster, db=None):
    return pymysql.connect(host="127.0.0.1", port=cluster.port, user="root",
                           password=PASSWORD, database=db, autocommit=True)


def login(cluster, user, password, db=None, port=None):
    return pymysql.connect(host="127.0.0.1", port=port or cluster.port, user=user,
                           password=password, database=db, autocommit=True)


def err(fn):
    with pytest.raises(pymysql.err.MySQLError) as e:
        fn()
    return e.value.args[0]


def uname():
    return "u" + uuid.uuid4().hex[:8]


@pytest.fixture
def admin(cluster):
    c = root(cluster)
    yield c.cursor()
    c.close()


def test_root_and_wrong_password(cluster):
    root(cluster).close()
    assert err(lambda: login(cluster, "root", "wrong")) == 1045
    assert err(lambda: login(cluster, "nobody", "x")) == 1045


def test_create_user_login_both_plugins_and_1396(cluster, admin):
    u = uname()
    admin.execute(f"CREATE USER '{u}'@'%' IDENTIFIED BY 's3cret'")
    assert err(lambda: admin.execute(f"CREATE USER '{u}'@'%' IDENTIFIED BY 'x'")) == 1396
    admin.execute(f"CREATE USER IF NOT EXISTS '{u}'@'%'")
    # PyMySQL speaks caching_sha2_password (the account's plugin), fast path.
    login(cluster, u, "s3cret").close()
    # mysql-connector asking for mysql_native_password: switched or
    # accepted, the same stored account lets it in.
    m = mysql.connector.connect(host="127.0.0.1", port=cluster.port, user=u, password="s3cret",
                                auth_plugin="mysql_native_password")
    m.close()
    m = mysql.connector.connect(host="127.0.0.1", port=cluster.port, user=u, password="s3cret",
                                auth_plugin="caching_sha2_password", ssl_disabled=True)
    m.close()
    assert err(lambda: login(cluster, u, "wrong")) == 1045
    # The password is stored hashed, never as text.
    admin.execute("SELECT native_hash, sha2_hash FROM mysql.user WHERE user = %s", (u,))
    native, sha2 = admin.fetchone()
    assert native.startswith("*") and len(native) == 41 and "s3cret" not in native + sha2
    admin.execute(f"DROP USER '{u}'@'%'")
    assert err(lambda: login(cluster, u, "s3cret")) == 1045
    assert err(lambda: admin.execute(f"DROP USER '{u}'@'%'")) == 1396


def test_table_db_global_privileges(cluster, admin, dbname):
    u = uname()
    admin.execute(f"CREATE TABLE {dbname}.t (a INT PRIMARY KEY, b INT)")
    admin.execute(f"CREATE TABLE {dbname}.t2 (a INT PRIMARY KEY, b INT)")
    admin.execute(f"INSERT INTO {dbname}.t VALUES (1, 10), (2, 20)")
    admin.execute(f"CREATE USER {u} IDENTIFIED BY 'pw'")
    c = login(cluster, u, "pw")
    cur = c.cursor()
    assert err(lambda: cur.execute(f"SELECT * FROM {dbname}.t")) == 1142
    assert err(lambda: cur.execute(f"USE {dbname}")) == 1044
    assert err(lambda: login(cluster, u, "pw", db=dbname)) == 1044
    assert err(lambda: cur.execute("SET GLOBAL max_connections = 10")) == 1227
    assert err(lambda: cur.execute(f"CREATE DATABASE {dbname}_x")) == 1044
    cur.execute("SHOW DATABASES")
    assert dbname not in [r[0] for r in cur.fetchall()]

    # A grant applies to the next statement of a session already open.
    admin.execute(f"GRANT SELECT ON {dbname}.t TO {u}")
    cur.execute(f"SELECT a, b FROM {dbname}.t ORDER BY a")
    assert cur.fetchall() == ((1, 10), (2, 20))
    cur.execute(f"USE {dbname}")
    cur.execute("SHOW TABLES")
    assert [r[0] for r in cur.fetchall()] == ["t"]
    assert err(lambda: cur.execute("INSERT INTO t VALUES (3, 30)")) == 1142
    assert err(lambda: cur.execute("SELECT * FROM t2")) == 1142
    # INSERT ... SELECT needs INSERT on the target and SELECT on the source.
    admin.execute(f"GRANT INSERT ON {dbname}.t2 TO {u}")
    cur.execute("INSERT INTO t2 SELECT * FROM t")
    admin.execute(f"REVOKE SELECT ON {dbname}.t FROM {u}")
    assert err(lambda: cur.execute("INSERT INTO t2 SELECT * FROM t")) == 1142
    # Multi-table DELETE: DELETE on the target, SELECT on the other.
    admin.execute(f"GRANT DELETE ON {dbname}.t2 TO {u}")
    assert err(lambda: cur.execute("DELETE t2 FROM t2 JOIN t ON t.a = t2.a")) == 1142
    admin.execute(f"GRANT SELECT ON {dbname}.* TO {u}")
    cur.execute("DELETE t2 FROM t2 JOIN t ON t.a = t2.a")
    assert err(lambda: cur.execute("UPDATE t SET b = 0")) == 1142
    assert err(lambda: cur.execute("DROP TABLE t")) == 1142
    assert err(lambda: cur.execute("CREATE TABLE t3 (a INT)")) == 1142
    # Views: SELECT on the view is enough (the view reads with its rights).
    admin.execute(f"CREATE VIEW {dbname}.v AS SELECT a FROM {dbname}.t")
    admin.execute(f"REVOKE SELECT ON {dbname}.* FROM {u}")
    assert err(lambda: cur.execute("SELECT * FROM v")) == 1142
    admin.execute(f"GRANT SELECT ON {dbname}.v TO {u}")
    cur.execute("SELECT COUNT(*) FROM v")
    assert cur.fetchone() == (2,)
    assert err(lambda: cur.execute("SELECT * FROM t")) == 1142
    # Global privileges.
    admin.execute(f"GRANT SUPER ON *.* TO {u}")
    cur.execute("SET GLOBAL max_connections = @@global.max_connections")
    assert err(lambda: admin.execute(f"GRANT SUPER ON {dbname}.* TO {u}")) == 1144
    # Nobody writes the system tables directly.
    assert err(lambda: admin.execute("DELETE FROM mysql.user")) == 1235
    c.close()
    admin.execute(f"DROP USER {u}")


def test_column_privileges(cluster, admin, dbname):
    u = uname()
    admin.execute(f"CREATE TABLE {dbname}.t (a INT PRIMARY KEY, b INT, secret INT)")
    admin.execute(f"INSERT INTO {dbname}.t VALUES (1, 2, 3)")
    admin.execute(f"CREATE USER {u} IDENTIFIED BY 'pw'")
    admin.execute(f"GRANT SELECT (a, b), UPDATE (b) ON {dbname}.t TO {u}")
    cur = login(cluster, u, "pw", db=dbname).cursor()
    cur.execute("SELECT a, b FROM t WHERE a = 1")
    assert cur.fetchall() == ((1, 2),)
    assert err(lambda: cur.execute("SELECT secret FROM t")) == 1143
    assert err(lambda: cur.execute("SELECT * FROM t")) == 1143
    cur.execute("UPDATE t SET b = 5 WHERE a = 1")
    assert err(lambda: cur.execute("UPDATE t SET secret = 5 WHERE a = 1")) == 1143
    admin.execute(f"SHOW GRANTS FOR {u}")
    grants = [r[0] for r in admin.fetchall()]
    assert f"GRANT SELECT (`a`, `b`), UPDATE (`b`) ON `{dbname}`.`t` TO `{u}`@`%`" in grants, grants
    admin.execute(f"DROP USER {u}")


def test_roles_and_show_grants(cluster, admin, dbname):
    u, r = uname(), "r" + uuid.uuid4().hex[:8]
    admin.execute(f"CREATE TABLE {dbname}.t (a INT PRIMARY KEY)")
    admin.execute(f"CREATE USER {u} IDENTIFIED BY 'pw'")
    admin.execute(f"CREATE ROLE {r}")
    admin.execute(f"GRANT SELECT, INSERT ON {dbname}.* TO {r}")
    admin.execute(f"GRANT {r} TO {u}")
    # A role cannot log in.
    assert err(lambda: login(cluster, r, "")) == 1045
    cur = login(cluster, u, "pw").cursor()
    # Not active until SET ROLE (or a default role).
    assert err(lambda: cur.execute(f"SELECT * FROM {dbname}.t")) == 1142
    cur.execute(f"SET ROLE {r}")
    cur.execute(f"INSERT INTO {dbname}.t VALUES (1)")
    cur.execute(f"SELECT * FROM {dbname}.t")
    assert cur.fetchall() == ((1,),)
    cur.execute("SHOW GRANTS")
    mine = [x[0] for x in cur.fetchall()]
    assert f"GRANT USAGE ON *.* TO `{u}`@`%`" in mine, mine
    assert f"GRANT SELECT, INSERT ON `{dbname}`.* TO `{u}`@`%`" in mine, mine
    assert f"GRANT `{r}`@`%` TO `{u}`@`%`" in mine, mine
    cur.execute("SET ROLE NONE")
    assert err(lambda: cur.execute(f"SELECT * FROM {dbname}.t")) == 1142
    assert err(lambda: cur.execute("SET ROLE nosuchrole")) == 3530
    # Another account's grants need privileges on the mysql schema.
    assert err(lambda: cur.execute("SHOW GRANTS FOR root@localhost")) == 1044
    admin.execute(f"SET DEFAULT ROLE {r} TO {u}")
    cur2 = login(cluster, u, "pw").cursor()
    cur2.execute(f"SELECT * FROM {dbname}.t")
    admin.execute(f"SHOW GRANTS FOR {u}")
    assert [x[0] for x in admin.fetchall()] == [f"GRANT USAGE ON *.* TO `{u}`@`%`", f"GRANT `{r}`@`%` TO `{u}`@`%`"]
    admin.execute(f"SHOW GRANTS FOR {r}")
    assert f"GRANT SELECT, INSERT ON `{dbname}`.* TO `{r}`@`%`" in [x[0] for x in admin.fetchall()]
    admin.execute(f"REVOKE {r} FROM {u}")
    assert err(lambda: cur2.execute(f"SELECT * FROM {dbname}.t")) == 1142
    admin.execute("SHOW GRANTS FOR root@localhost")
    assert admin.fetchall()[0][0].startswith("GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION")
    admin.execute(f"DROP ROLE {r}")
    admin.execute(f"DROP USER {u}")


def test_alter_user_lock_expire_rename(cluster, admin):
    u, v = uname(), uname()
    admin.execute(f"CREATE USER {u}@'%' IDENTIFIED WITH mysql_native_password BY 'one'")
    login(cluster, u, "one").close()
    admin.execute(f"ALTER USER {u} IDENTIFIED BY 'two'")
    assert err(lambda: login(cluster, u, "one")) == 1045
    login(cluster, u, "two").close()
    admin.execute(f"ALTER USER {u} ACCOUNT LOCK")
    assert err(lambda: login(cluster, u, "two")) == 3118
    admin.execute(f"ALTER USER {u} ACCOUNT UNLOCK")
    c = login(cluster, u, "two")
    # Anyone may change their own password; not someone else's.
    c.cursor().execute("ALTER USER USER() IDENTIFIED BY 'three'")
    assert err(lambda: c.cursor().execute("ALTER USER root@localhost IDENTIFIED BY 'x'")) == 1227
    assert err(lambda: c.cursor().execute(f"CREATE USER {v}")) == 1227
    c.close()
    login(cluster, u, "three").close()
    admin.execute(f"ALTER USER {u} PASSWORD EXPIRE")
    # PyMySQL cannot run in the expired-password sandbox: refused as MySQL does.
    assert err(lambda: login(cluster, u, "three")) == 1862
    admin.execute(f"ALTER USER {u} IDENTIFIED BY 'four'")
    admin.execute(f"RENAME USER {u} TO {v}")
    assert err(lambda: login(cluster, u, "four")) == 1045
    login(cluster, v, "four").close()
    assert err(lambda: admin.execute(f"ALTER USER {u} ACCOUNT LOCK")) == 1396
    assert err(lambda: admin.execute(f"GRANT SELECT ON *.* TO {u}")) == 1410
    assert err(lambda: admin.execute(f"GRANT EXECUTE ON *.* TO {v}")) == 1235
    assert err(lambda: admin.execute(f"CREATE USER {u} REQUIRE X509")) == 1235
    admin.execute(f"DROP USER {v}")


def test_second_sql_node_sees_the_same_accounts(cluster, admin):
    port = free_port()
    log = open(os.path.join(cluster.dir, "sqld2.log"), "w")
    env = dict(os.environ, NORR_ROOT_PASSWORD="another-password")
    p = subprocess.Popen([cluster.bin, "sqld", "--listen", f"127.0.0.1:{port}",
                          "--data-node", f"unix:{cluster.data_socket}", "--node-name", "sqld2",
                          "--secret-file", cluster.secret_file],
                         stdout=log, stderr=subprocess.STDOUT, cwd=cluster.dir, env=env)
    try:
        wait_port(port, p, "second sqld")
        # The cluster's root password wins over this node's flag.
        assert err(lambda: login(cluster, "root", "another-password", port=port)) == 1045
        login(cluster, "root", PASSWORD, port=port).close()
        u = uname()
        admin.execute(f"CREATE USER {u} IDENTIFIED BY 'pw'")
        deadline = time.time() + 5
        while True:
            try:
                c = login(cluster, u, "pw", port=port)
                break
            except pymysql.err.OperationalError:
                assert time.time() < deadline, "the second SQL node never saw the new account"
                time.sleep(0.1)
        cur = c.cursor()
        assert err(lambda: cur.execute("SET GLOBAL max_connections = 100")) == 1227
        admin.execute(f"GRANT SUPER ON *.* TO {u}")
        deadline = time.time() + 5
        while True:
            try:
                cur.execute("SET GLOBAL max_connections = @@global.max_connections")
                break
            except pymysql.err.OperationalError:
                assert time.time() < deadline, "the second SQL node never saw the grant"
                time.sleep(0.1)
        c.close()
        admin.execute(f"DROP USER {u}")
    finally:
        p.terminate()
        p.wait(timeout=10)


def test_information_schema_shows_what_the_account_may_see(cluster, admin, dbname):
    u = uname()
    admin.execute(f"CREATE TABLE {dbname}.t (a INT PRIMARY KEY)")
    admin.execute(f"CREATE TABLE {dbname}.hidden (a INT PRIMARY KEY)")
    admin.execute(f"CREATE USER {u} IDENTIFIED BY 'pw'")
    admin.execute(f"GRANT SELECT ON {dbname}.t TO {u}")
    admin.execute(f"GRANT PROCESS ON *.* TO {u} WITH GRANT OPTION")
    cur = login(cluster, u, "pw").cursor()
    cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (dbname,))
    assert [r[0] for r in cur.fetchall()] == ["t"]
    cur.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (dbname,))
    assert cur.fetchall() == ((dbname,),)
    cur.execute("SELECT GRANTEE, PRIVILEGE_TYPE, IS_GRANTABLE FROM information_schema.USER_PRIVILEGES")
    assert cur.fetchall() == ((f"'{u}'@'%'", "PROCESS", "YES"),)
    cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME, PRIVILEGE_TYPE FROM information_schema.TABLE_PRIVILEGES")
    assert cur.fetchall() == ((dbname, "t", "SELECT"),)
    admin.execute(f"GRANT UPDATE ON {dbname}.* TO {u}")
    admin.execute("SELECT TABLE_SCHEMA, PRIVILEGE_TYPE FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = %s",
                  (f"'{u}'@'%'",))
    assert admin.fetchall() == ((dbname, "UPDATE"),)
    admin.execute(f"DROP USER {u}")
