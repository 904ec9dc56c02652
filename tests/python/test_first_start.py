"""The first start is safe (issue 25, item 2): a fresh cluster has only
root@localhost, and a SQL node refuses a non-loopback listen address while a
root account has an empty password, unless --allow-empty-root-password."""
import os
import subprocess
import tempfile

import pymysql

from conftest import PASSWORD, free_port, wait_port

FLAG = "--allow-empty-root-password"


def root_accounts(port, password):
    c = pymysql.connect(host="127.0.0.1", port=port, user="root", password=password)
    try:
        with c.cursor() as cur:
            cur.execute("SELECT DISTINCT GRANTEE FROM information_schema.USER_PRIVILEGES "
                        "WHERE GRANTEE LIKE '''root''@%' ORDER BY GRANTEE")
            return [r[0] for r in cur.fetchall()]
    finally:
        c.close()


def test_fresh_cluster_with_a_root_password_has_root_at_localhost_only(cluster):
    # conftest's cluster was fresh and started with NORR_ROOT_PASSWORD.
    assert root_accounts(cluster.port, PASSWORD) == ["'root'@'localhost'"]


class FreshDataNode:
    """A data node of its own: a cluster with no accounts yet."""

    def __init__(self, bin_path):
        self.bin = bin_path
        self.dir = tempfile.mkdtemp(prefix="norr-first-start-")
        self.port = free_port()
        self.socket = os.path.join(self.dir, "datad.sock")
        log = open(os.path.join(self.dir, "datad.log"), "w")
        self.proc = subprocess.Popen([bin_path, "datad", "--listen", f"127.0.0.1:{self.port}",
                                      "--socket", self.socket],
                                     stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        wait_port(self.port, self.proc, "datad")

    def sqld(self, listen, *extra, password=""):
        env = dict(os.environ, NORR_ROOT_PASSWORD=password)
        return subprocess.Popen([self.bin, "sqld", "--listen", listen, "--data-node", f"unix:{self.socket}",
                                 "--node-name", "first-" + listen, *extra],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=self.dir, env=env,
                                text=True)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def stop(p):
    p.terminate()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()


def test_empty_root_password_on_a_non_loopback_address_is_refused_unless_the_flag_says_so(cluster):
    dn = FreshDataNode(cluster.bin)
    try:
        # Loopback: a development start, allowed (and it seeds root@localhost).
        port = free_port()
        p = dn.sqld(f"127.0.0.1:{port}")
        try:
            wait_port(port, p, "sqld on loopback")
            assert root_accounts(port, "") == ["'root'@'localhost'"]
        finally:
            stop(p)
        # Every address: refused, with a message naming the flag, and it
        # never listens.
        port = free_port()
        p = dn.sqld(f"0.0.0.0:{port}")
        out, _ = p.communicate(timeout=60)
        assert p.returncode != 0, out
        assert FLAG in out and "'root'@'localhost'" in out and "empty" in out, out
        # The flag lets it serve.
        p = dn.sqld(f"0.0.0.0:{port}", FLAG)
        try:
            wait_port(port, p, "sqld with " + FLAG)
            pymysql.connect(host="127.0.0.1", port=port, user="root", password="").close()
            # Once root has a password, no flag is needed.
            c = pymysql.connect(host="127.0.0.1", port=port, user="root", password="", autocommit=True)
            c.cursor().execute("ALTER USER 'root'@'localhost' IDENTIFIED BY 'now-set'")
            c.close()
        finally:
            stop(p)
        port = free_port()
        p = dn.sqld(f"0.0.0.0:{port}")
        try:
            wait_port(port, p, "sqld after root got a password")
            pymysql.connect(host="127.0.0.1", port=port, user="root", password="now-set").close()
        finally:
            stop(p)
    finally:
        dn.stop()
