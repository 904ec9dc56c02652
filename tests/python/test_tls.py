"""TLS for the MySQL protocol (issue 25): the server offers it (a self-signed
certificate made at start), PyMySQL, mysql-connector-python and the mysql
client use it, SHOW STATUS shows the cipher, REQUIRE SSL accounts are refused
without it (1045), and caching_sha2_password's full authentication (the
password in clear inside TLS) logs in accounts this SQL node has not seen."""
import shutil
import ssl
import subprocess
import uuid

import mysql.connector
import pymysql
import pytest

from conftest import PASSWORD


def no_verify():
    # The server's certificate is self-signed: encryption without
    # verification, as `mysql --ssl-mode=REQUIRED` does.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def connect(cluster, user="root", password=PASSWORD, tls=True):
    # PyMySQL uses TLS when the server offers it unless told not to.
    if tls:
        return pymysql.connect(host="127.0.0.1", port=cluster.port, user=user, password=password,
                               ssl=no_verify(), autocommit=True)
    return pymysql.connect(host="127.0.0.1", port=cluster.port, user=user, password=password,
                           ssl_disabled=True, autocommit=True)


def status(conn, name):
    with conn.cursor() as cur:
        cur.execute(f"SHOW STATUS LIKE '{name}'")
        row = cur.fetchone()
    return row[1] if row else None


def err(fn):
    with pytest.raises(pymysql.err.MySQLError) as e:
        fn()
    return e.value.args[0]


def test_pymysql_over_tls_shows_the_cipher(cluster):
    c = connect(cluster)
    assert status(c, "Ssl_version") in ("TLSv1.2", "TLSv1.3")
    cipher = status(c, "Ssl_cipher")
    assert cipher.startswith("TLS_") or cipher.startswith("ECDHE-"), cipher
    # Queries go through the TLS stream, large results too.
    with c.cursor() as cur:
        cur.execute("SELECT REPEAT('x', 300000), 42")
        big, n = cur.fetchone()
    assert len(big) == 300000 and n == 42
    c.close()
    plain = connect(cluster, tls=False)
    assert status(plain, "Ssl_cipher") == ""
    plain.close()


def test_require_ssl_refuses_logins_without_tls_with_1045(cluster):
    u = "u" + uuid.uuid4().hex[:8]
    admin = connect(cluster, tls=False).cursor()
    admin.execute(f"CREATE USER '{u}'@'%' IDENTIFIED BY 'pw' REQUIRE SSL")
    try:
        assert err(lambda: connect(cluster, u, "pw", tls=False)) == 1045
        c = connect(cluster, u, "pw")
        assert status(c, "Ssl_cipher") != ""
        c.close()
        # Wrong password over TLS: still 1045.
        assert err(lambda: connect(cluster, u, "nope")) == 1045
        # Through the Unix socket (a secure transport, as in MySQL).
        pymysql.connect(unix_socket=cluster.socket, user=u, password="pw", ssl_disabled=True).close()
        admin.execute(f"ALTER USER '{u}'@'%' REQUIRE NONE")
        connect(cluster, u, "pw", tls=False).close()
        admin.execute(f"ALTER USER '{u}'@'%' REQUIRE SSL")
        assert err(lambda: connect(cluster, u, "pw", tls=False)) == 1045
        # RENAME keeps the requirement, DROP removes it.
        admin.execute(f"RENAME USER '{u}'@'%' TO '{u}x'@'%'")
        assert err(lambda: connect(cluster, u + "x", "pw", tls=False)) == 1045
        admin.execute(f"DROP USER '{u}x'@'%'")
        admin.execute(f"CREATE USER '{u}x'@'%' IDENTIFIED BY 'pw'")
        connect(cluster, u + "x", "pw", tls=False).close()
        admin.execute(f"DROP USER '{u}x'@'%'")
    finally:
        admin.execute(f"DROP USER IF EXISTS '{u}'@'%'")


def test_caching_sha2_full_authentication_over_tls(cluster):
    u = "u" + uuid.uuid4().hex[:8]
    admin = connect(cluster, tls=False).cursor()
    admin.execute(f"CREATE USER '{u}'@'%' IDENTIFIED WITH caching_sha2_password BY 'first' REQUIRE SSL")
    try:
        # The first TLS login of the account on this SQL node: full
        # authentication (PyMySQL sends the password in clear inside TLS).
        assert err(lambda: connect(cluster, u, "wrong")) == 1045
        connect(cluster, u, "first").close()
        # Then the fast path; a new password needs the full one again.
        connect(cluster, u, "first").close()
        admin.execute(f"ALTER USER '{u}'@'%' IDENTIFIED BY 'second'")
        assert err(lambda: connect(cluster, u, "first")) == 1045
        connect(cluster, u, "second").close()
        # mysql-connector-python: TLS by default when offered.
        for _ in range(2):
            m = mysql.connector.connect(host="127.0.0.1", port=cluster.port, user=u, password="second",
                                        auth_plugin="caching_sha2_password", ssl_verify_cert=False)
            cur = m.cursor()
            cur.execute("SHOW STATUS LIKE 'Ssl_cipher'")
            assert cur.fetchone()[1] != ""
            cur.execute("SELECT CURRENT_USER()")
            assert cur.fetchone()[0] == f"{u}@%"
            m.close()
        with pytest.raises(mysql.connector.Error) as e:
            mysql.connector.connect(host="127.0.0.1", port=cluster.port, user=u, password="second",
                                    ssl_disabled=True)
        assert e.value.errno == 1045
    finally:
        admin.execute(f"DROP USER IF EXISTS '{u}'@'%'")


@pytest.mark.skipif(shutil.which("mysql") is None, reason="no mysql client")
def test_mysql_client_with_ssl(cluster):
    u = "u" + uuid.uuid4().hex[:8]
    admin = connect(cluster, tls=False).cursor()
    admin.execute(f"CREATE USER '{u}'@'%' IDENTIFIED BY 'pw' REQUIRE SSL")
    try:
        # MariaDB's client spells it --ssl; MySQL's --ssl-mode=REQUIRED.
        help_text = subprocess.run(["mysql", "--help"], capture_output=True, text=True).stdout
        flag = "--ssl-mode=REQUIRED" if "--ssl-mode" in help_text else "--ssl"
        base = ["mysql", "-h127.0.0.1", f"-P{cluster.port}", f"-u{u}", "-ppw", "--batch", "--skip-column-names"]
        out = subprocess.run(base + [flag, "-e", "SHOW STATUS LIKE 'Ssl_cipher'"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        name, cipher = out.stdout.strip().split("\t")
        assert name == "Ssl_cipher" and cipher != "", out.stdout
        off = "--ssl-mode=DISABLED" if flag == "--ssl-mode=REQUIRED" else "--skip-ssl"
        out = subprocess.run(base + [off, "-e", "SELECT 1"], capture_output=True, text=True, timeout=30)
        assert out.returncode != 0 and "1045" in out.stderr, out
    finally:
        admin.execute(f"DROP USER IF EXISTS '{u}'@'%'")
