"""SQLAlchemy Core over PyMySQL."""
import pytest
import sqlalchemy as sa

from conftest import PASSWORD


@pytest.fixture
def engine(cluster, dbname):
    e = sa.create_engine(f"mysql+pymysql://root:{PASSWORD}@127.0.0.1:{cluster.port}/{dbname}")
    yield e
    e.dispose()


def test_core_crud_and_transactions(engine):
    md = sa.MetaData()
    users = sa.Table(
        "users", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(50), nullable=False),
        sa.Column("score", sa.Integer, nullable=False, server_default="0"),
    )
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(users.insert(), [{"name": "ann", "score": 3}, {"name": "bob", "score": 5}])
        r = conn.execute(users.insert().values(name="cid"))
        assert r.inserted_primary_key[0] is not None
    with engine.connect() as conn:
        rows = conn.execute(sa.select(users.c.name, users.c.score).order_by(users.c.name)).all()
        assert [tuple(r) for r in rows] == [("ann", 3), ("bob", 5), ("cid", 0)]
    with engine.begin() as conn:
        r = conn.execute(users.update().where(users.c.name == "bob").values(score=users.c.score + 1))
        assert r.rowcount == 1
        r = conn.execute(users.delete().where(users.c.name == "ann"))
        assert r.rowcount == 1
    # A failed transaction rolls back.
    with pytest.raises(RuntimeError):
        with engine.begin() as conn:
            conn.execute(users.insert().values(name="ghost"))
            raise RuntimeError("abort")
    with engine.connect() as conn:
        names = conn.execute(sa.select(users.c.name).order_by(users.c.name)).scalars().all()
        assert names == ["bob", "cid"]
        assert conn.execute(sa.select(sa.func.count()).select_from(users)).scalar() == 2
    md.drop_all(engine)


def test_core_errors(engine):
    md = sa.MetaData()
    t = sa.Table("u", md, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False))
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(t.insert().values(id=1))
    with pytest.raises(sa.exc.IntegrityError):
        with engine.begin() as conn:
            conn.execute(t.insert().values(id=1))
    with pytest.raises(sa.exc.ProgrammingError):
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT * FROM missing_table"))


def test_core_upsert_uses_the_row_alias(engine):
    # For servers from MySQL 8.0.20 on, SQLAlchemy renders
    # on_duplicate_key_update as `... AS new ON DUPLICATE KEY UPDATE c = new.c`.
    from sqlalchemy.dialects.mysql import insert as mysql_insert

    md = sa.MetaData()
    t = sa.Table(
        "kv", md,
        sa.Column("k", sa.String(20), primary_key=True),
        sa.Column("v", sa.Integer, nullable=False),
        sa.Column("hits", sa.Integer, nullable=False, server_default="1"),
    )
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(t.insert(), [{"k": "a", "v": 1}, {"k": "b", "v": 2}])
    stmt = mysql_insert(t).values([{"k": "a", "v": 10}, {"k": "c", "v": 30}])
    stmt = stmt.on_duplicate_key_update(v=stmt.inserted.v, hits=t.c.hits + 1)
    assert " AS new" in str(stmt.compile(dialect=engine.dialect))
    with engine.begin() as conn:
        conn.execute(stmt)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(t.c.k, t.c.v, t.c.hits).order_by(t.c.k)).all()
        assert [tuple(r) for r in rows] == [("a", 10, 2), ("b", 2, 1), ("c", 30, 1)]
    md.drop_all(engine)


def test_core_begin_nested_savepoints(engine):
    # begin_nested() is SAVEPOINT / ROLLBACK TO SAVEPOINT / RELEASE SAVEPOINT.
    md = sa.MetaData()
    t = sa.Table(
        "nest", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("v", sa.Integer, nullable=False),
        sa.Column("u", sa.Integer, unique=True),
    )
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(t.insert(), [{"id": 1, "v": 10, "u": 1}, {"id": 2, "v": 20, "u": 2}])
        # A nested block that fails is undone alone.
        with pytest.raises(sa.exc.IntegrityError):
            with conn.begin_nested():
                conn.execute(t.update().where(t.c.id == 1).values(v=11))
                conn.execute(t.insert().values(id=3, v=30, u=3))
                conn.execute(t.insert().values(id=4, v=40, u=3))
        # One that is rolled back explicitly, with a nested one inside.
        sp = conn.begin_nested()
        conn.execute(t.delete().where(t.c.id == 2))
        inner = conn.begin_nested()
        conn.execute(t.insert().values(id=5, v=50, u=2))
        inner.commit()
        sp.rollback()
        # One that commits (RELEASE SAVEPOINT) keeps its changes.
        with conn.begin_nested():
            conn.execute(t.update().where(t.c.id == 2).values(v=21))
            conn.execute(t.insert().values(id=3, v=31, u=3))
        rows = conn.execute(sa.select(t.c.id, t.c.v, t.c.u).order_by(t.c.id)).all()
        assert [tuple(r) for r in rows] == [(1, 10, 1), (2, 21, 2), (3, 31, 3)]
    with engine.connect() as conn:
        rows = conn.execute(sa.select(t.c.id, t.c.v, t.c.u).order_by(t.c.id)).all()
        assert [tuple(r) for r in rows] == [(1, 10, 1), (2, 21, 2), (3, 31, 3)]
    md.drop_all(engine)


def test_reflect_and_read_a_view(engine):
    """An ORM's view introspection (get_view_names, get_view_definition,
    reflected columns from information_schema / SHOW CREATE) and a read."""
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(30) NOT NULL, price INT)"))
        conn.execute(sa.text("INSERT INTO items VALUES (1, 'pen', 3), (2, 'book', 12), (3, 'desk', 90)"))
        conn.execute(sa.text("CREATE VIEW cheap AS SELECT id, name FROM items WHERE price < 20"))
    insp = sa.inspect(engine)
    assert insp.get_view_names() == ["cheap"]
    assert "items" in insp.get_table_names() and "cheap" not in insp.get_table_names()
    assert "WHERE price < 20" in insp.get_view_definition("cheap")
    cols = {c["name"]: c for c in insp.get_columns("cheap")}
    assert list(cols) == ["id", "name"]
    # (NOT NULL of a view column is not carried through yet: nullable is True.)
    cheap = sa.Table("cheap", sa.MetaData(), autoload_with=engine)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(cheap.c.name).where(cheap.c.id > 1).order_by(cheap.c.id)).all()
        assert [r[0] for r in rows] == ["book"]
    with engine.begin() as conn:
        conn.execute(sa.text("DROP VIEW cheap"))
        conn.execute(sa.text("DROP TABLE items"))


def test_computed_columns(engine):
    """sa.Computed: CREATE TABLE with GENERATED ALWAYS AS, inserts that leave
    the column out, values read back, and reflection of the computation."""
    md = sa.MetaData()
    lines = sa.Table(
        "invoice_lines", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("price", sa.Integer, nullable=False),
        sa.Column("qty", sa.Integer, nullable=False),
        sa.Column("total", sa.Integer, sa.Computed("price * qty", persisted=True)),
        sa.Column("half", sa.Integer, sa.Computed("price DIV 2")),
    )
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(lines.insert(), [{"id": 1, "price": 3, "qty": 4}, {"id": 2, "price": 10, "qty": 2}])
        conn.execute(lines.update().where(lines.c.id == 2).values(qty=5))
        rows = conn.execute(sa.select(lines.c.id, lines.c.total, lines.c.half).order_by(lines.c.id)).all()
        assert [tuple(r) for r in rows] == [(1, 12, 1), (2, 50, 5)]
    cols = {c["name"]: c for c in sa.inspect(engine).get_columns("invoice_lines")}
    assert cols["total"]["computed"]["persisted"] is True
    assert "price" in cols["total"]["computed"]["sqltext"] and "qty" in cols["total"]["computed"]["sqltext"]
    assert cols["half"]["computed"].get("persisted") in (False, None)
    assert "computed" not in cols["price"]
    md.drop_all(engine)


def test_check_constraints(engine):
    """sa.CheckConstraint (and the column-level form Django emits for
    PositiveIntegerField / JSONField): created, enforced with MySQL's 3819,
    reflected by name and text."""
    md = sa.MetaData()
    items = sa.Table(
        "items", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("qty", sa.Integer, nullable=False),
        sa.Column("price", sa.Numeric(10, 2), nullable=False),
        sa.CheckConstraint("qty >= 0", name="items_qty_nonneg"),
        sa.CheckConstraint("price > 0 AND price < 10000", name="items_price_range"),
    )
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(items.insert(), [{"id": 1, "qty": 2, "price": 5}, {"id": 2, "qty": 0, "price": 1}])
    with pytest.raises(sa.exc.OperationalError) as e:
        with engine.begin() as conn:
            conn.execute(items.update().where(items.c.id == 1).values(qty=items.c.qty - 3))
    assert e.value.orig.args[0] == 3819
    assert "items_qty_nonneg" in e.value.orig.args[1]
    with pytest.raises(sa.exc.OperationalError):
        with engine.begin() as conn:
            conn.execute(items.insert().values(id=3, qty=1, price=0))
    with engine.connect() as conn:
        assert conn.execute(sa.select(items.c.qty).where(items.c.id == 1)).scalar() == 2
        assert conn.execute(sa.select(sa.func.count()).select_from(items)).scalar() == 2
    checks = {c["name"]: c["sqltext"] for c in sa.inspect(engine).get_check_constraints("items")}
    assert set(checks) == {"items_qty_nonneg", "items_price_range"}
    assert "qty" in checks["items_qty_nonneg"]
    # Django's DDL for a PositiveIntegerField and a JSONField.
    with engine.begin() as conn:
        conn.execute(sa.text(
            "CREATE TABLE `app_thing` (`id` bigint AUTO_INCREMENT NOT NULL PRIMARY KEY, "
            "`count` integer UNSIGNED NOT NULL CHECK (`count` >= 0), "
            "`data` json NOT NULL CHECK (JSON_VALID(`data`)))"))
        conn.execute(sa.text("INSERT INTO app_thing (`count`, `data`) VALUES (1, '{\"a\": 1}')"))
    with pytest.raises(sa.exc.OperationalError) as e:
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO app_thing (`count`, `data`) VALUES (1, 'not json')"))
    assert e.value.orig.args[0] in (3140, 3819)
    md.drop_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE app_thing"))


def test_nested_outer_join(engine):
    # `a.join(b.join(c, ...), isouter=True)` renders a parenthesized join:
    # a LEFT OUTER JOIN (b JOIN c ON ...) ON ... The (b, c) pair is
    # NULL-extended as a unit: b2 has no c, so a2 gets NULLs for both.
    md = sa.MetaData()
    a = sa.Table("nj_a", md, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False))
    b = sa.Table(
        "nj_b", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("a_id", sa.Integer, nullable=False),
    )
    c = sa.Table(
        "nj_c", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("b_id", sa.Integer, nullable=False),
    )
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(a.insert(), [{"id": 1}, {"id": 2}, {"id": 3}])
        conn.execute(b.insert(), [{"id": 1, "a_id": 1}, {"id": 2, "a_id": 2}])
        conn.execute(c.insert(), [{"id": 10, "b_id": 1}, {"id": 11, "b_id": 1}])
    j = a.join(b.join(c, c.c.b_id == b.c.id), b.c.a_id == a.c.id, isouter=True)
    stmt = sa.select(a.c.id, b.c.id, c.c.id).select_from(j).order_by(a.c.id, c.c.id)
    assert "LEFT OUTER JOIN (nj_b INNER JOIN nj_c" in str(stmt.compile(dialect=engine.dialect))
    with engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(stmt).all()]
    assert rows == [(1, 1, 10), (1, 1, 11), (2, None, None), (3, None, None)]
    md.drop_all(engine)
