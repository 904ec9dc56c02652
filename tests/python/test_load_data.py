"""LOAD DATA LOCAL INFILE through PyMySQL and mysql-connector: the client's
file is streamed to the server, cut into records by the FIELDS / LINES
options and written as one statement."""
import os
import subprocess

import mysql.connector
import pymysql
import pytest

from conftest import PASSWORD


def connect(cluster, db=None, **kw):
    kw.setdefault("autocommit", True)
    return pymysql.connect(host="127.0.0.1", port=cluster.port, user="root",
                           password=PASSWORD, database=db, **kw)


def error_code(excinfo):
    return excinfo.value.args[0]


def fails_with(cur, sql):
    """The MySQL error number `sql` fails with."""
    with pytest.raises(pymysql.err.MySQLError) as e:
        cur.execute(sql)
    return error_code(e)


def info(conn):
    # The OK packet's info is a length-encoded string (as mysqld sends it);
    # PyMySQL hands over the raw bytes.
    msg = conn._result.message
    return msg[1:].decode() if msg else ""


def write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def warnings(cur):
    cur.execute("SHOW WARNINGS")
    return [(code, msg) for _, code, msg in cur.fetchall()]


def test_tab_separated_defaults(cluster, dbname, tmp_path):
    conn = connect(cluster, dbname, local_infile=True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(8), "
                "score DOUBLE NOT NULL DEFAULT 9, note VARCHAR(20) DEFAULT 'none')")
    path = write(tmp_path, "t.tsv",
                 b"1\tab\t2.5\tx\n"
                 b"2\t\\N\t\t\\\\back\\tslash\n"    # NULL, empty number, escapes
                 b"3\tc\n"                          # missing fields
                 b"4\td\t4\ty\textra\n"             # one field too many
                 b"1\tdup\t1\tz\n"                  # duplicate key: skipped
                 b"5\tlast\t5\tno newline")
    n = cur.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE t")
    assert n == 5
    assert info(conn) == "Records: 6  Deleted: 0  Skipped: 1  Warnings: 4"
    # Within a batch of rows: field counts as the file is read, then
    # conversions, then keys as the rows are written.
    assert warnings(cur) == [
        (1261, "Row 3 doesn't contain data for all columns"),
        (1262, "Row 4 was truncated; it contained more data than there were input columns"),
        (1366, "Incorrect double value: '' for column 'score' at row 2"),
        (1062, "Duplicate entry '1' for key 't.PRIMARY'"),
    ]
    cur.execute("SELECT id, name, score, note FROM t ORDER BY id")
    assert cur.fetchall() == (
        (1, "ab", 2.5, "x"),
        (2, None, 0.0, "\\back\tslash"),
        (3, "c", 9.0, "none"),
        (4, "d", 4.0, "y"),
        (5, "last", 5.0, "no newline"),
    )


def test_csv_with_quotes_header_and_crlf(cluster, dbname, tmp_path):
    conn = connect(cluster, dbname, local_infile=True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE c (id INT PRIMARY KEY, txt TEXT, d DATE, v DECIMAL(5,2))")
    path = write(tmp_path, "c.csv",
                 b"id,txt,d,v\r\n"
                 b'1,"a, ""quoted""\r\nline",2026-11-24,1.5\r\n'
                 b'2,NULL,"2020-01-02",\r\n'
                 b'3,"NULL",\\N,999.999\r\n')
    cur.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE c "
                "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' "
                "LINES TERMINATED BY '\\r\\n' IGNORE 1 LINES")
    assert info(conn) == "Records: 3  Deleted: 0  Skipped: 0  Warnings: 2"
    assert [code for code, _ in warnings(cur)] == [1366, 1264]
    cur.execute("SELECT id, txt, CAST(d AS CHAR), CAST(v AS CHAR) FROM c ORDER BY id")
    assert cur.fetchall() == (
        (1, 'a, "quoted"\r\nline', "2026-11-24", "1.50"),
        (2, None, "2020-01-02", "0.00"),        # unquoted NULL is NULL; empty number is 0
        (3, "NULL", None, "999.99"),            # quoted "NULL" is text; out of range: the limit
    )


def test_column_list_user_variables_and_set(cluster, dbname, tmp_path):
    conn = connect(cluster, dbname, local_infile=True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE u (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20), "
                "total INT, src VARCHAR(10))")
    path = write(tmp_path, "u.txt", b"skip|alice|3|4\nskip|bob|10|\n")
    cur.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE u FIELDS TERMINATED BY '|' "
                "(@dummy, name, @a, @b) SET total = @a + IFNULL(NULLIF(@b, ''), 0), src = 'file'")
    assert info(conn) == "Records: 2  Deleted: 0  Skipped: 0  Warnings: 0"
    first = conn.insert_id()
    cur.execute("SELECT LAST_INSERT_ID(), @b")
    assert cur.fetchone() == (first, "")
    cur.execute("SELECT name, total, src FROM u ORDER BY id")
    assert cur.fetchall() == (("alice", 7, "file"), ("bob", 10, "file"))
    # REPLACE: the second load replaces both rows by their key.
    path2 = write(tmp_path, "u2.txt", f"{first}\tALICE\n{first + 1}\tBOB\n".encode())
    n = cur.execute(f"LOAD DATA LOCAL INFILE '{path2}' REPLACE INTO TABLE u (id, name)")
    assert n == 4
    assert info(conn) == "Records: 2  Deleted: 2  Skipped: 0  Warnings: 0"
    cur.execute("SELECT name, total, src FROM u ORDER BY id")
    assert cur.fetchall() == (("ALICE", None, None), ("BOB", None, None))


def test_large_file_streams_in_batches(cluster, dbname, tmp_path):
    conn = connect(cluster, dbname, local_infile=True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE big (id INT PRIMARY KEY, k INT, pad CHAR(60))")
    rows = 20000
    data = b"".join(b"%d\t%d\t%s\n" % (i, i % 97, b"p" * 60) for i in range(rows))
    assert len(data) > 1_000_000   # many client packets, many batches
    path = write(tmp_path, "big.tsv", data)
    assert cur.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE big") == rows
    cur.execute("SELECT COUNT(*), SUM(id), SUM(k), MIN(LENGTH(pad)) FROM big")
    assert cur.fetchone() == (rows, rows * (rows - 1) // 2, sum(i % 97 for i in range(rows)), 60)


def test_failed_load_is_not_half_applied(cluster, dbname, tmp_path):
    conn = connect(cluster, dbname, local_infile=True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE f (id INT PRIMARY KEY, d DATE)")
    # 2000 good rows (several batches are written), then a date that does
    # not parse: an error, and none of the file's rows stay.
    data = b"".join(b"%d\t2020-01-01\n" % i for i in range(2000)) + b"5000\tnot a date\n"
    path = write(tmp_path, "f.tsv", data)
    assert fails_with(cur, f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE f") == 1292
    cur.execute("SELECT COUNT(*) FROM f")
    assert cur.fetchone() == (0,)
    # Inside a transaction: the statement is undone, the transaction's
    # earlier work stays.
    cur.execute("BEGIN")
    cur.execute("INSERT INTO f VALUES (-1, '2001-01-01')")
    assert fails_with(cur, f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE f") == 1292
    cur.execute("SELECT id FROM f")
    assert cur.fetchall() == ((-1,),)
    cur.execute("COMMIT")
    # A good load in a transaction is rolled back with it.
    good = write(tmp_path, "g.tsv", b"7\t2020-02-02\n8\t2020-02-03\n")
    cur.execute("BEGIN")
    cur.execute(f"LOAD DATA LOCAL INFILE '{good}' INTO TABLE f")
    cur.execute("SELECT COUNT(*) FROM f")
    assert cur.fetchone() == (3,)
    cur.execute("ROLLBACK")
    cur.execute("SELECT id FROM f ORDER BY id")
    assert cur.fetchall() == ((-1,),)


def test_refusals(cluster, dbname, tmp_path):
    path = write(tmp_path, "r.tsv", b"1\n")
    conn = connect(cluster, dbname, local_infile=True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE r (id INT PRIMARY KEY, g INT AS (id * 2))")
    # A client that did not enable LOCAL: 1148, and the session goes on.
    plain = connect(cluster, dbname)
    assert fails_with(plain.cursor(), f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE r") == 1148
    pc = plain.cursor()
    pc.execute("SELECT COUNT(*) FROM r")
    assert pc.fetchone() == (0,)
    # A file on the server's host: refused as with secure_file_priv.
    assert fails_with(cur, f"LOAD DATA INFILE '{path}' INTO TABLE r") == 1290
    assert fails_with(cur, f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE nosuch") == 1146
    cur.execute("CREATE VIEW rv AS SELECT id FROM r")
    assert fails_with(cur, f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE rv") == 1235
    assert fails_with(cur, f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE r (id, nosuch)") == 1054
    assert fails_with(cur, f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE r (id, g)") == 3105
    assert fails_with(cur, f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE r FIELDS ENCLOSED BY 'ab'") == 1083
    # The server switch (on by default, as MariaDB).
    cur.execute("SET GLOBAL local_infile = 0")
    try:
        assert fails_with(cur, f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE r") == 3948
    finally:
        cur.execute("SET GLOBAL local_infile = 1")
    # Without a column list the generated column is left out.
    assert cur.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE r") == 1
    cur.execute("SELECT id, g FROM r")
    assert cur.fetchall() == ((1, 2),)


def test_mysql_connector_and_prepared_refusal(cluster, dbname, tmp_path):
    path = write(tmp_path, "m.csv", b"1,one\n2,two\n")
    cnx = mysql.connector.connect(host="127.0.0.1", port=cluster.port, user="root",
                                  password=PASSWORD, database=dbname,
                                  allow_local_infile=True, autocommit=True)
    cur = cnx.cursor()
    cur.execute("CREATE TABLE m (id INT PRIMARY KEY, v VARCHAR(5))")
    cur.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE m FIELDS TERMINATED BY ','")
    assert cur.rowcount == 2
    cur.execute("SELECT id, v FROM m ORDER BY id")
    assert cur.fetchall() == [(1, "one"), (2, "two")]
    pcur = cnx.cursor(prepared=True)
    with pytest.raises(mysql.connector.Error) as e:
        pcur.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE m")
    assert e.value.errno == 1295
    cnx.close()


def test_mysql_cli_local_infile(cluster, dbname, tmp_path):
    path = write(tmp_path, "cli.tsv", b"1\tx\n2\ty\n")
    with connect(cluster, dbname) as conn:
        conn.cursor().execute("CREATE TABLE cli (id INT PRIMARY KEY, v CHAR(1))")
    out = subprocess.run(
        ["mysql", "-h127.0.0.1", f"-P{cluster.port}", "-uroot", f"-p{PASSWORD}",
         "--local-infile=1", "-vv", dbname, "-e",
         f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE cli; SELECT COUNT(*) FROM cli"],
        capture_output=True, text=True, timeout=60, env=dict(os.environ, MYSQL_PWD=PASSWORD))
    assert out.returncode == 0, out.stderr
    assert "Records: 2  Deleted: 0  Skipped: 0  Warnings: 0" in out.stdout


def test_timestamp_columns_load_in_the_session_time_zone(cluster, dbname, tmp_path):
    # A TIMESTAMP field is the session zone's wall time and is stored as its
    # UTC moment; a DATETIME field is stored as it is. The range check is the
    # UTC moment's: 2038-01-19 08:44:07 here is TIMESTAMP's last second.
    conn = connect(cluster, dbname, local_infile=True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP NULL, dt DATETIME NULL)")
    cur.execute("SET time_zone = '+05:30'")
    path = write(tmp_path, "ts.tsv",
                 b"1\t2024-01-01 05:30:00\t2024-01-01 05:30:00\n"
                 b"2\t2038-01-19 08:44:07\t2038-01-19 08:44:07\n")
    assert cur.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE t") == 2
    cur.execute("SELECT id, CAST(ts AS CHAR), CAST(dt AS CHAR) FROM t ORDER BY id")
    assert cur.fetchall() == (
        (1, "2024-01-01 05:30:00", "2024-01-01 05:30:00"),
        (2, "2038-01-19 08:44:07", "2038-01-19 08:44:07"),
    )
    cur.execute("SET time_zone = '+00:00'")
    cur.execute("SELECT id, CAST(ts AS CHAR), CAST(dt AS CHAR) FROM t ORDER BY id")
    assert cur.fetchall() == (
        (1, "2024-01-01 00:00:00", "2024-01-01 05:30:00"),
        (2, "2038-01-19 03:14:07", "2038-01-19 08:44:07"),
    )
