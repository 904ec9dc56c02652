"""What NorrDB does not do is said through the driver, never silently
substituted (issue 25): ENGINE=InnoDB warns, EXPLAIN FORMAT=JSON and
variables NorrDB does not act on are refused, SHOW ENGINE NDBCLUSTER STATUS
shows the data node links, and the slow query log writes MySQL's format."""
import os
import time
import uuid

import pymysql
import pytest

from conftest import PASSWORD


def connect(cluster, db=None):
    return pymysql.connect(host="127.0.0.1", port=cluster.port, user="root", password=PASSWORD, database=db,
                           autocommit=True)


def test_engine_innodb_is_made_ndbcluster_with_warnings(cluster, dbname):
    conn = connect(cluster, dbname)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (a INT PRIMARY KEY) ENGINE=InnoDB")
        cur.execute("SHOW WARNINGS")
        assert cur.fetchall() == (
            ("Warning", 1286, "Unknown storage engine 'InnoDB'"),
            ("Warning", 1266, "Using storage engine ndbcluster for table 't'"),
        )
        cur.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_ENGINE_SUBSTITUTION')")
        with pytest.raises(pymysql.err.MySQLError) as e:
            cur.execute("CREATE TABLE u (a INT PRIMARY KEY) ENGINE=InnoDB")
        assert e.value.args == (1286, "Unknown storage engine 'InnoDB'")
    conn.close()


def test_explain_format_json_is_refused(cluster, dbname):
    conn = connect(cluster, dbname)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (a INT PRIMARY KEY)")
        with pytest.raises(pymysql.err.MySQLError) as e:
            cur.execute("EXPLAIN FORMAT=JSON SELECT * FROM t")
        assert e.value.args[0] == 1235, e.value.args
        assert "FORMAT=JSON" in e.value.args[1]
    conn.close()


def test_show_engine_ndbcluster_status_shows_the_data_node(cluster):
    conn = connect(cluster)
    with conn.cursor() as cur:
        cur.execute("SHOW ENGINE NDBCLUSTER STATUS")
        assert [d[0] for d in cur.description] == ["Type", "Name", "Status"]
        rows = cur.fetchall()
    conn.close()
    assert rows[0] == ("ndbcluster", "connection", "number_of_data_nodes=1, number_of_ready_data_nodes=1"), rows
    assert len(rows) == 2, rows
    kind, name, status = rows[1]
    assert kind == "ndbcluster" and name.startswith("data_node_"), rows
    assert status == f"address=unix:{cluster.data_socket}, connected=yes", rows


def test_refused_variables_say_why(cluster):
    conn = connect(cluster)
    with conn.cursor() as cur:
        for sql, code in [("SET GLOBAL general_log = ON", 1235), ("SET GLOBAL read_only = ON", 1235),
                          ("SET GLOBAL require_secure_transport = ON", 3579)]:
            with pytest.raises(pymysql.err.MySQLError) as e:
                cur.execute(sql)
            assert e.value.args[0] == code, (sql, e.value.args)
        cur.execute("SELECT @@global.general_log, @@global.read_only")
        assert tuple(str(v) for v in cur.fetchone()) == ("0", "0")
    conn.close()


def test_slow_query_log_writes_slow_statements_only(cluster, tmp_path):
    log = tmp_path / "slow.log"
    tag = uuid.uuid4().hex[:8]
    conn = connect(cluster)
    try:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL slow_query_log_file = %s", (str(log),))
            cur.execute("SET GLOBAL slow_query_log = ON")
            cur.execute("SET SESSION long_query_time = 0.2")
            cur.execute(f"SELECT SLEEP(0.3), 'slow_{tag}'")
            cur.execute(f"SELECT 'fast_{tag}'")
            cur.execute("SELECT @@global.slow_query_log, @@global.slow_query_log_file")
            assert tuple(str(v) for v in cur.fetchone()) == ("1", str(log))
    finally:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL slow_query_log = OFF")
            cur.execute("SET GLOBAL slow_query_log_file = ''")
        conn.close()
    text = log.read_text()
    assert f"SELECT SLEEP(0.3), 'slow_{tag}';" in text, text
    assert f"fast_{tag}" not in text, text
    entry = text[text.index("# Time: "):]
    lines = entry.splitlines()
    assert lines[1].startswith("# User@Host: root[root] @ 127.0.0.1 [127.0.0.1]"), lines
    assert lines[2].startswith("# Query_time: "), lines
    assert float(lines[2].split()[2]) >= 0.3, lines
    assert "Rows_sent: 1" in lines[2], lines
    assert lines[3].startswith("SET timestamp="), lines
