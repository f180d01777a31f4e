"""The sink's MySQL over TLS: a MariaDB with TLS required, started here from Debian's package,
and a CA made here with openssl. `--mysql-tls-ca` must work, and refuse a wrong CA and a server
that does not speak TLS: one line each, at once."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pymysql
import pytest

from logcount.core.settings import MySQLUrl
from tests.support.inputs import create_topic, minute, write_totals
from tests.support.ports import free_port
from tests.support.run import cli

PASSWORD = "tls-App-Pw1"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d: Path, name: str) -> Path:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=d)
    return d / f"{name}.pem"


def make_server_cert(d: Path, ca: str) -> tuple[Path, Path]:
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout",
             "server.key", "-out", "server.csr", cwd=d)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", "2", "-extfile", "san.cnf", "-out", "server.pem", cwd=d)
    return d / "server.pem", d / "server.key"


@pytest.fixture(scope="module")
def tls_mysql(tmp_path_factory):
    if not (shutil.which("openssl") and shutil.which("mariadb-install-db")):
        pytest.skip("openssl or mariadb-install-db missing (scripts/setup.sh installs MariaDB)")
    d = tmp_path_factory.mktemp("tls-mariadb")
    ca, other_ca = make_ca(d, "ca"), make_ca(d, "other-ca")
    cert, key = make_server_cert(d, "ca")
    subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={d / 'data'}",
                    "--auth-root-authentication-method=normal", "--skip-test-db", "--user=root"],
                   check=True, capture_output=True)
    port, sock = free_port(), d / "mysqld.sock"
    proc = subprocess.Popen(
        [shutil.which("mariadbd") or "/usr/sbin/mariadbd", "--no-defaults",
         f"--datadir={d / 'data'}", f"--port={port}", "--bind-address=127.0.0.1",
         f"--socket={sock}", "--skip-name-resolve", "--user=root", f"--ssl-ca={ca}",
         f"--ssl-cert={cert}", f"--ssl-key={key}", "--require-secure-transport=ON",
         "--innodb-buffer-pool-size=64M"],
        stdout=open(d / "out.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = pymysql.connect(unix_socket=str(sock), user="root", autocommit=True)
                break
            except pymysql.err.OperationalError:
                assert proc.poll() is None and time.monotonic() < deadline, \
                    (d / "out.log").read_text()[-2000:]
                time.sleep(0.3)
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE logcount")
            cur.execute("CREATE USER 'app'@'127.0.0.1' IDENTIFIED BY %s REQUIRE SSL", (PASSWORD,))
            cur.execute("GRANT ALL ON logcount.* TO 'app'@'127.0.0.1'")
        conn.close()
        yield MySQLUrl("app", PASSWORD, "127.0.0.1", port, "logcount"), ca, other_ca
    finally:
        proc.terminate()
        proc.wait(30)


def url_of(u: MySQLUrl) -> str:
    return f"mysql://{u.user}:{u.password}@{u.host}:{u.port}/{u.database}"


def sink(endpoints, names, url: str, *extra: str):
    return cli("sink", "--once", "--bootstrap-servers", endpoints.bootstrap, "--topic",
               names.topic("out"), "--group-id", names.group, "--mysql-url", url,
               "--metrics-port", "0", "--startup-timeout", "10", *extra, check=False)


def test_the_sink_writes_over_verified_tls(endpoints, names, tls_mysql):
    url, ca, _ = tls_mysql
    create_topic(endpoints.bootstrap, names.topic("out"))
    totals = {minute(i): 10 + i for i in range(30)}
    write_totals(endpoints.bootstrap, names.topic("out"), totals, names.txn_id)
    proc = sink(endpoints, names, url_of(url), "--mysql-tls-ca", str(ca))
    assert proc.returncode == 0, proc.stderr[-3000:]
    conn = pymysql.connect(host=url.host, port=url.port, user=url.user, password=url.password,
                           database=url.database, ssl_ca=str(ca))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT log_time, log_count FROM error_log ORDER BY log_time")
            got = {t.strftime("%Y-%m-%d %H:%M:00"): c for t, c in cur.fetchall()}
    finally:
        conn.close()
    assert got == totals


@pytest.mark.parametrize("case", ["untrusted-ca", "server-without-tls"])
def test_tls_mistakes_are_one_line_without_the_password(endpoints, names, tls_mysql, mysql_db,
                                                        case):
    url, ca, other_ca = tls_mysql
    create_topic(endpoints.bootstrap, names.topic("out"))
    if case == "untrusted-ca":
        proc = sink(endpoints, names, url_of(url), "--mysql-tls-ca", str(other_ca))
        words = "certificate verify failed"
    else:  # the embedded MariaDB speaks no TLS
        proc = sink(endpoints, names, url_of(mysql_db) if mysql_db.password else
                    f"mysql://{mysql_db.user}@{mysql_db.host}:{mysql_db.port}/"
                    f"{mysql_db.database}", "--mysql-tls-ca", str(ca))
        words = "TLS failed"
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in proc.stderr and len(lines) <= 3, proc.stderr
    assert lines[-1].startswith("logcount: error: ") and words in lines[-1], lines[-1]
    assert PASSWORD not in proc.stderr
    if case == "server-without-tls":  # nothing was written over plain text
        conn = pymysql.connect(host=mysql_db.host, port=mysql_db.port, user=mysql_db.user,
                               password=mysql_db.password, database=mysql_db.database)
        with conn.cursor() as cur:
            cur.execute("SHOW TABLES")
            assert cur.fetchall() == ()
        conn.close()
