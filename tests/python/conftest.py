"""Starts `norr datad` and `norr sqld` on free loopback ports for the session.
sqld reaches the data node through the data node's Unix socket (`--data-node
unix:PATH`), as a SQL node on the same host would; the Rust tests cover TCP.

Environment: NORR_BIN (path of the `norr` binary; default target/debug/norr),
NORR_SQLD_LOG / NORR_DATAD_LOG (log files; default in a temp dir, printed on
failure).

The data node is given a fresh cluster secret (through a secret file, as an
operator would) and sqld the same one through NORR_CLUSTER_SECRET, so every
run goes through the native protocol's authentication.
"""
import os
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pymysql
import pytest

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "pytest-secret"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout_s=60):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout_s}s")


class Cluster:
    def __init__(self):
        self.bin = os.environ.get("NORR_BIN") or str(ROOT / "target" / "debug" / "norr")
        self.dir = tempfile.mkdtemp(prefix="norr-pytest-")
        self.data_port = free_port()
        self.port = free_port()
        self.socket = os.path.join(self.dir, "sqld.sock")
        self.data_socket = os.path.join(self.dir, "datad.sock")
        self.procs = []
        self.logs = []

    def start(self):
        dlog = open(os.environ.get("NORR_DATAD_LOG", os.path.join(self.dir, "datad.log")), "w")
        slog = open(os.environ.get("NORR_SQLD_LOG", os.path.join(self.dir, "sqld.log")), "w")
        self.logs = [dlog.name, slog.name]
        secret = uuid.uuid4().hex + uuid.uuid4().hex
        secret_file = self.secret_file = os.path.join(self.dir, "cluster.secret")
        with open(os.open(secret_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(secret + "\n")
        denv = {k: v for k, v in os.environ.items() if k != "NORR_CLUSTER_SECRET"}
        datad = subprocess.Popen(
            [self.bin, "datad", "--listen", f"127.0.0.1:{self.data_port}", "--socket", self.data_socket,
             "--secret-file", secret_file],
            stdout=dlog, stderr=subprocess.STDOUT, cwd=self.dir, env=denv)
        self.procs.append(datad)
        wait_port(self.data_port, datad, "datad")
        env = dict(os.environ, NORR_ROOT_PASSWORD=PASSWORD, NORR_CLUSTER_SECRET=secret)
        sqld = subprocess.Popen(
            [self.bin, "sqld", "--listen", f"127.0.0.1:{self.port}",
             "--data-node", f"unix:{self.data_socket}", "--socket", self.socket],
            stdout=slog, stderr=subprocess.STDOUT, cwd=self.dir, env=env)
        self.procs.append(sqld)
        wait_port(self.port, sqld, "sqld")

    def stop(self):
        for p in reversed(self.procs):
            p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()

    def alive(self):
        return all(p.poll() is None for p in self.procs)

    def tail_logs(self, n=40):
        out = []
        for path in self.logs:
            try:
                lines = Path(path).read_text(errors="replace").splitlines()[-n:]
            except OSError:
                lines = []
            out.append(f"--- {path}\n" + "\n".join(lines))
        return "\n".join(out)


@pytest.fixture(scope="session")
def cluster():
    c = Cluster()
    try:
        c.start()
    except Exception:
        c.stop()
        print(c.tail_logs())
        raise
    yield c
    alive = c.alive()
    c.stop()
    if not alive:
        print(c.tail_logs())
    assert alive, "a norr process died during the tests"


@pytest.fixture
def dbname(cluster):
    """A fresh database per test, dropped afterwards."""
    name = "pyt_" + uuid.uuid4().hex[:10]
    conn = pymysql.connect(host="127.0.0.1", port=cluster.port, user="root", password=PASSWORD)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    conn.close()
    yield name
    try:
        conn = pymysql.connect(host="127.0.0.1", port=cluster.port, user="root", password=PASSWORD)
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.close()
    except Exception:
        pass
