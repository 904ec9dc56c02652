"""ENUM, SET, JSON and BIT columns through PyMySQL, mysql-connector-python
(text and prepared cursors) and SQLAlchemy: values round-trip, and the column
metadata is what MySQL sends, so the drivers decode them as they would from
MySQL (JSON as MYSQL_TYPE_JSON, BIT as bytes, ENUM/SET as strings)."""
import json

import mysql.connector
import pymysql
import pytest
import sqlalchemy as sa

from conftest import PASSWORD

DDL = ("CREATE TABLE typed (id INT PRIMARY KEY, color ENUM('red','green','blue') NOT NULL, "
       "tags SET('a','b','c'), doc JSON, flags BIT(12))")
DOC = {"name": "Cé 漢字", "n": [1, 2.5, None, True], "nested": {"k": "v"}}


def pconnect(cluster, db):
    return pymysql.connect(host="127.0.0.1", port=cluster.port, user="root", password=PASSWORD,
                           database=db, autocommit=True)


def cconnect(cluster, db):
    return mysql.connector.connect(host="127.0.0.1", port=cluster.port, user="root",
                                   password=PASSWORD, database=db, use_pure=True, autocommit=True)


def test_pymysql_round_trip_and_metadata(cluster, dbname):
    conn = pconnect(cluster, dbname)
    with conn.cursor() as cur:
        cur.execute(DDL)
        cur.execute("INSERT INTO typed VALUES (%s, %s, %s, %s, %s)",
                    (1, "GREEN", "c,a", json.dumps(DOC), b"\x0a\x01"))
        cur.execute("INSERT INTO typed VALUES (2, 1, '', '[1, \"x\"]', b'101')")
        cur.execute("SELECT id, color, tags, doc, flags, color+0, doc->>'$.name' FROM typed ORDER BY id")
        rows = cur.fetchall()
        assert rows[0][:3] == (1, "green", "a,c")
        assert json.loads(rows[0][3]) == DOC
        assert rows[0][4] == b"\x0a\x01"
        assert rows[0][5:] == (2, "Cé 漢字")
        assert rows[1][:5] == (2, "red", "", '[1, "x"]', b"\x00\x05")
        types = {d[0]: d[1] for d in cur.description}
        assert types["color"] == pymysql.constants.FIELD_TYPE.STRING
        assert types["tags"] == pymysql.constants.FIELD_TYPE.STRING
        assert types["doc"] == pymysql.constants.FIELD_TYPE.JSON
        assert types["flags"] == pymysql.constants.FIELD_TYPE.BIT
        with pytest.raises(pymysql.err.DataError) as e:
            cur.execute("INSERT INTO typed (id, color) VALUES (3, 'purple')")
        assert e.value.args[0] == 1265
        # PyMySQL maps errors by number and has none of its own for 3140.
        with pytest.raises(pymysql.err.OperationalError) as e:
            cur.execute("INSERT INTO typed (id, color, doc) VALUES (3, 'red', '{bad')")
        assert e.value.args[0] == 3140
    conn.close()


def test_connector_text_and_prepared(cluster, dbname):
    conn = cconnect(cluster, dbname)
    cur = conn.cursor()
    cur.execute(DDL)
    cur.execute("INSERT INTO typed VALUES (%s, %s, %s, %s, %s)", (1, "blue", "b", json.dumps(DOC), 7))
    pcur = conn.cursor(prepared=True)
    pcur.execute("INSERT INTO typed VALUES (?, ?, ?, ?, ?)", (2, "Red", "a,b,c", '{"z": 1, "a": [true]}', 4095))
    for c in (cur, conn.cursor(prepared=True)):
        if c is cur:
            c.execute("SELECT id, color, tags, doc, flags, flags+0 FROM typed ORDER BY id")
        else:
            c.execute("SELECT id, color, tags, doc, flags, flags+0 FROM typed WHERE id > ? ORDER BY id", (0,))
        rows = [tuple(r) for r in c.fetchall()]
        assert [r[0] for r in rows] == [1, 2]
        assert rows[0][1] == "blue" and rows[1][1] == "red"
        # The connector gives SET columns as Python sets (it reads SET_FLAG).
        assert rows[0][2] in ("b", {"b"}) and rows[1][2] in ("a,b,c", {"a", "b", "c"})
        docs = [json.loads(r[3]) if isinstance(r[3], (str, bytes, bytearray)) else r[3] for r in rows]
        assert docs == [DOC, {"z": 1, "a": [True]}]
        assert rows[1][3] in ('{"a": [true], "z": 1}', b'{"a": [true], "z": 1}', bytearray(b'{"a": [true], "z": 1}'))
        assert [r[5] for r in rows] == [7, 4095]
    pcur.execute("SELECT color FROM typed WHERE color = ?", ("BLUE",))
    assert [tuple(r) for r in pcur.fetchall()] == [("blue",)]
    with pytest.raises(mysql.connector.Error) as e:
        pcur.execute("INSERT INTO typed (id, color) VALUES (?, ?)", (9, "pink"))
    assert e.value.errno == 1265
    conn.close()


def test_sqlalchemy_types(cluster, dbname):
    from sqlalchemy.dialects import mysql as my
    engine = sa.create_engine(f"mysql+pymysql://root:{PASSWORD}@127.0.0.1:{cluster.port}/{dbname}")
    md = sa.MetaData()
    t = sa.Table("sa_typed", md,
                 sa.Column("id", sa.Integer, primary_key=True),
                 sa.Column("status", sa.Enum("new", "done", name="status"), nullable=False),
                 sa.Column("perms", my.SET("r", "w", "x")),
                 sa.Column("data", sa.JSON),
                 sa.Column("bits", my.BIT(8)))
    md.create_all(engine)
    with engine.begin() as c:
        c.execute(t.insert(), [{"id": 1, "status": "done", "perms": {"r", "x"}, "data": {"a": [1, 2]}, "bits": 5},
                               {"id": 2, "status": "new", "perms": set(), "data": None, "bits": None}])
    with engine.connect() as c:
        rows = c.execute(sa.select(t).order_by(t.c.id)).all()
        assert rows[0].status == "done" and rows[0].perms == {"r", "x"} and rows[0].data == {"a": [1, 2]}
        assert rows[0].bits in (5, b"\x05")
        assert rows[1].status == "new" and rows[1].perms == set() and rows[1].data is None
        got = c.execute(sa.select(t.c.id).where(t.c.data["a"][1].as_integer() == 2)).scalars().all()
        assert got == [1]
    # Reflection reads the member lists back from SHOW CREATE TABLE / information_schema.
    md2 = sa.MetaData()
    r = sa.Table("sa_typed", md2, autoload_with=engine)
    assert list(r.c.status.type.enums) == ["new", "done"]
    assert isinstance(r.c.data.type, sa.JSON)
    engine.dispose()
