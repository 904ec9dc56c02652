"""GET_LOCK around a migration, as Rails and Flyway take it, through PyMySQL:
a second migrator waits for the first one's lock and then sees its work."""
import threading

import pymysql

from conftest import PASSWORD

LOCK = "schema_migrations_lock"


def connect(cluster, db=None):
    return pymysql.connect(host="127.0.0.1", port=cluster.port, user="root",
                           password=PASSWORD, database=db, autocommit=True)


def test_second_migrator_waits_for_the_first(cluster, dbname):
    a, b, obs = connect(cluster, dbname), connect(cluster, dbname), connect(cluster)
    ca, cb, co = a.cursor(), b.cursor(), obs.cursor()
    ca.execute("SELECT GET_LOCK(%s, %s)", (LOCK, 10))
    assert ca.fetchone() == (1,)
    cb.execute("SELECT GET_LOCK(%s, 0)", (LOCK,))
    assert cb.fetchone() == (0,)

    # The second migrator waits (in a thread: PyMySQL blocks).
    got = {}

    def migrate_b():
        cb.execute("SELECT GET_LOCK(%s, 60)", (LOCK,))
        got["b"] = cb.fetchone()
        cb.execute("SELECT COUNT(*) FROM schema_migrations")
        got["rows"] = cb.fetchone()

    t = threading.Thread(target=migrate_b)
    t.start()
    while True:
        co.execute("SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = %s", (b.thread_id(),))
        if co.fetchone() == ("User lock",):
            break

    # The first migrator's work, in a transaction: COMMIT keeps the lock.
    ca.execute("BEGIN")
    ca.execute("CREATE TABLE schema_migrations (version VARCHAR(20) PRIMARY KEY)")
    ca.execute("INSERT INTO schema_migrations VALUES ('20260101')")
    ca.execute("COMMIT")
    ca.execute("SELECT IS_USED_LOCK(%s) = CONNECTION_ID()", (LOCK,))
    assert ca.fetchone() == (1,)
    ca.execute("SELECT RELEASE_LOCK(%s)", (LOCK,))
    assert ca.fetchone() == (1,)

    t.join(timeout=60)
    assert not t.is_alive()
    assert got == {"b": (1,), "rows": (1,)}
    cb.execute("DO RELEASE_LOCK(%s)", (LOCK,))
    cb.execute("SELECT IS_FREE_LOCK(%s), SLEEP(0)", (LOCK,))
    assert cb.fetchone() == (1, 0)
    for c in (a, b, obs):
        c.close()
