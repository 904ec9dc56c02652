"""Clients on sqld's Unix socket (`--socket`): the same server, host `localhost`."""
import subprocess

import pymysql
import pytest

from conftest import PASSWORD


def test_pymysql_over_the_socket(cluster, dbname):
    conn = pymysql.connect(unix_socket=cluster.socket, user="root", password=PASSWORD, database=dbname)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@socket")
            assert cur.fetchone()[0] == cluster.socket
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
            cur.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
            conn.commit()
            cur.execute("SELECT v FROM t ORDER BY id")
            assert [r[0] for r in cur.fetchall()] == ["a", "b"]
    finally:
        conn.close()
    # The TCP listener serves the same data.
    tcp = pymysql.connect(host="127.0.0.1", port=cluster.port, user="root", password=PASSWORD, database=dbname)
    try:
        with tcp.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM t")
            assert cur.fetchone()[0] == 2
    finally:
        tcp.close()


def test_wrong_password_names_localhost(cluster):
    with pytest.raises(pymysql.err.OperationalError) as e:
        pymysql.connect(unix_socket=cluster.socket, user="root", password="wrong")
    code, msg = e.value.args
    assert code == 1045
    assert "'root'@'localhost'" in msg


def test_mysql_client_over_the_socket(cluster):
    out = subprocess.run(
        ["mysql", "-S", cluster.socket, "-uroot", f"-p{PASSWORD}", "--batch", "-e", "SELECT 40 + 2 AS answer"],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["answer", "42"]
