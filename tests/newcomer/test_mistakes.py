"""A newcomer's mistakes, through the real CLI against the real broker and MariaDB.

Every case asserts the exit code, no traceback, a bound on the lines printed, that nothing was
created or written where it should not be, and that no secret appears in what was printed."""

from __future__ import annotations

import subprocess
import time

import pymysql
import pytest

from logcount.connectors import kafka_io
from tests.support.ports import free_port
from tests.support.readers import end_offsets
from tests.support.run import LOGCOUNT, ROOT, stage_args


def run(*args: str, env: dict | None = None, timeout: float = 120) -> tuple[int, str, float]:
    """`logcount ARGS`: (exit code, everything printed, seconds)."""
    import os

    t0 = time.monotonic()
    proc = subprocess.run([*LOGCOUNT, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=ROOT)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - t0


def one_clear_line(out: str, max_lines: int = 2, *secrets: str) -> str:
    """The error line; no traceback, at most `max_lines` lines in all, no secret anywhere."""
    assert "Traceback" not in out, out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) <= max_lines, f"{len(lines)} lines:\n{out}"
    assert lines and lines[-1].startswith("logcount: error: "), out
    for secret in secrets:
        assert secret not in out, f"secret {secret!r} printed:\n{out}"
    return lines[-1]


def topic_exists(bootstrap: str, topic: str) -> bool:
    return kafka_io.partitions_of(kafka_io.admin(bootstrap), topic) is not None


def databases(url) -> set[str]:
    conn = pymysql.connect(host=url.host, port=url.port, user=url.user, password=url.password)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES")
            return {r[0] for r in cur.fetchall()}
    finally:
        conn.close()


def tables(url) -> set[str]:
    conn = pymysql.connect(host=url.host, port=url.port, user=url.user, password=url.password,
                           database=url.database)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW TABLES")
            return {r[0] for r in cur.fetchall()}
    finally:
        conn.close()


def mysql_url(url, password: str = "", database: str | None = None, port: int | None = None):
    pw = f":{password}" if password else ""
    return f"mysql://{url.user}{pw}@{url.host}:{port or url.port}/{database or url.database}"


@pytest.mark.parametrize("args, words", [
    (["run", "--trigger-interval", "nan"], "--trigger-interval must be a finite number"),
    (["run", "--trigger-interval", "0"], "--trigger-interval must be greater than 0"),
    (["run", "--metrics-port", "70000"], "--metrics-port must be between 0 and 65535"),
    (["sink", "--metrics-port", "-1"], "--metrics-port must be between 0 and 65535"),
    (["run", "--max-records-per-batch", "0"], "--max-records-per-batch must be at least 1"),
    (["run", "--max-records-per-batch", "1e6"], "must be a whole number"),
    (["run", "--startup-timeout", "inf"], "--startup-timeout must be a finite number"),
    (["run", "--delivery", "maybe"], "choose from 'exactly-once', 'at-least-once'"),
    (["run", "--starting-offsets", "middle"], "choose from 'earliest', 'latest'"),
    (["run", "--lateness-horizon", "5x"], "--lateness-horizon takes"),
    (["run", "--emit-final", "1 minute"], "--emit-final takes a whole number of seconds"),
    (["run", "--emit-final", "0s"], "--emit-final takes"),
    (["run", "--emit-final", "2w"], "--emit-final takes"),
    (["run", "--emit-final", "2h", "--lateness-horizon", "1h"], "shorter than --lateness-horiz"),
    (["run", "--emit-final", "1m", "--rollup", "1w"], "--rollup takes 1h, 1d or 1h,1d"),
    (["run", "--rollup", "1h"], "--rollup needs --emit-final"),
    (["run", "--final-topic", "finals"], "--final-topic needs --emit-final"),
    (["run", "--emit-final", "1m", "--final-topic", "logs"], "a topic of its own"),
    (["run", "--emit-final", "1m", "--delivery", "at-least-once"], "needs --delivery exactly"),
    (["demo", "--emit-final", "1m", "--group-by", "service"], "leave out --group-by"),
    (["run", "--level", "ERR OR"], "--level takes a comma-separated list of level words"),
    (["run", "--level", "ERROR,,FATAL"], "--level takes a comma-separated list of level words"),
    (["run", "--timezone", "Mars/Olympus"], "--timezone 'Mars/Olympus' is not a known zone"),
    (["run", "--timezone", "+19:00"], "--timezone offset +19:00 is beyond"),
    (["run", "--line-regex", r"(?<time>\S+ \S+) (\w+)"], "(?<level>...); level missing"),
    (["run", "--line-regex", r"(\S+) (?<level>\w+)"], "(?<level>...); time missing"),
    (["run", "--time-pattern", "yy/MM/dd HH:mm:ss"], "--time-pattern reads the time group"),
    *[(["run", "--line-regex", r"(?<time>\S+) (?<level>\w+)", "--time-pattern", pattern], words)
      for pattern, words in [("yy/MM/dd HH:mm:ss QQ", "QQ is not supported"),
                             ("HH:mm:ss", "must name the year (y), month (M)"),
                             ("yy/MM/dd 'HH:mm", "an unclosed quote"),
                             # what the pure twin would not read as Spark does
                             ("yyyy-MM-dd [HH]:mm", "H inside an optional [section]"),
                             ("yyyy-MM-dd HH:mm:ss]", "a ] without a [ before it"),
                             ("yyyy-MM-dd HH:mm:ss {x}", "{ is reserved")]],
    (["produce", "--file", "README.md", "--expect", "/nonexistent/e.json", "--line-regex",
      r"(?<time>\S+ \S+) (?<level>\w+)", "--time-pattern", "yyyy-MM-dd HH:mm[XXX]"],
     "X inside an optional [section]"),
    (["run", "--json-line-field", ""], "--json-line-field needs a field path"),
    (["run", "--json-time-field", "a..b", "--json-level-field", "level"],
     "--json-time-field 'a..b' is not a field path"),
    (["run", "--json-line-field", "message", "--json-time-field", "ts", "--json-level-field",
      "level"], "give one or the other, not both"),
    (["run", "--json-time-field", "ts"], "need both --json-time-field and --json-level-field"),
    (["produce", "--synthetic", "5", "--shape", "cobol"], "--shape must be one of"),
    (["produce", "--file", "README.md", "--shape", "zap"], "--shape is what --synthetic writes"),
    (["produce", "--synthetic", "-5"], "--synthetic must be at least 0"),
    (["produce", "--file", "/nonexistent/logs.txt"], "no such readable file"),
    (["demo", "--lines", "0"], "--lines must be at least 1"),
    (["run", "--no-such-flag"], "unrecognized arguments"),
])
def test_a_bad_flag_is_one_line_and_exit_2(args, words):
    code, out, _ = run(*args)
    assert code == 2, out
    assert words in one_clear_line(out, 1)


def test_a_regex_java_refuses_is_one_line_before_any_topic(endpoints, names):
    """Python's re and Java's differ: the stage asks Java, as its plan will, before anything."""
    code, out, _ = run(*stage_args(endpoints, names, "--once"), "--line-regex",
                       r"(?<time>\S+ \S+) (?<level>\w+) [z-a]")
    assert code == 2, out
    line = one_clear_line(out, 1)
    assert "--line-regex is not a valid Java regex: Illegal character range" in line, line
    assert not any(topic_exists(endpoints.bootstrap, names.topic(r))
                   for r in ("in", "out", "dlq")), "a flag mistake touched a topic"


def test_a_bad_env_value_names_the_variable():
    code, out, _ = run("run", env={"LOGCOUNT_METRICS_PORT": "http"})
    assert code == 2 and "LOGCOUNT_METRICS_PORT must be a whole number" in one_clear_line(out, 1)


@pytest.mark.parametrize("command", ["run", "sink", "produce"])
def test_kafka_down_is_one_line_within_the_startup_timeout(endpoints, names, command):
    port = free_port()
    args = {"run": [*stage_args(endpoints, names, "--once"), "--startup-timeout", "3"],
            "sink": ["sink", "--once", "--startup-timeout", "3", "--topic", names.topic("out"),
                     "--group-id", names.group, "--metrics-port", "0"],
            "produce": ["produce", "--synthetic", "10", "--topic", names.topic("in")]}[command]
    args = [a if a != endpoints.bootstrap else f"127.0.0.1:{port}" for a in args]
    if command != "run":
        args += ["--bootstrap-servers", f"127.0.0.1:{port}"]
    code, out, took = run(*args)
    assert code == 1, out
    line = one_clear_line(out, 3)
    assert f"127.0.0.1:{port}" in line and "Connection refused" in line, line
    assert took < 40, f"took {took:.0f}s"


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL", "SSL"])
def test_a_security_mismatch_fails_fast_with_the_reason(endpoints, names, protocol):
    secret = "S3cret-Sasl-Pw"
    sasl = ["--kafka-config", "sasl.mechanism=SCRAM-SHA-512", "--kafka-config",
            "sasl.username=alice", "--kafka-config", f"sasl.password={secret}"]
    code, out, took = run(*stage_args(endpoints, names, "--once"), "--kafka-config",
                          f"security.protocol={protocol}",
                          *(sasl if protocol.startswith("SASL") else []))
    assert code == 1, out
    line = one_clear_line(out, 2, secret)
    assert "security.protocol" in line, line
    assert took < 30, f"a mismatch must not wait out the start-up timeout ({took:.0f}s)"
    assert not topic_exists(endpoints.bootstrap, names.topic("in"))


def test_mysql_down_is_one_line_within_the_startup_timeout(endpoints, names, mysql_db):
    url = mysql_url(mysql_db, port=free_port())
    code, out, took = run("sink", "--once", "--bootstrap-servers", endpoints.bootstrap,
                          "--topic", names.topic("out"),
                          "--group-id", names.group, "--mysql-url", url,
                          "--startup-timeout", "4", "--metrics-port", "0")
    assert code == 1, out
    assert "unreachable" in one_clear_line(out, 3)
    assert took < 40


def test_a_wrong_mysql_password_never_prints_it(endpoints, names, mysql_db):
    secret = "Wr0ng/Pass@word"
    from urllib.parse import quote

    url = mysql_url(mysql_db, password=quote(secret, safe=""))
    code, out, _ = run("sink", "--once", "--bootstrap-servers", endpoints.bootstrap,
                       "--topic", names.topic("out"),
                       "--group-id", names.group, "--mysql-url", url, "--metrics-port", "0")
    assert code == 1, out
    line = one_clear_line(out, 2, secret, quote(secret, safe=""))
    assert "refused" in line and "***" in line, line


def test_a_password_without_a_user_is_not_echoed():
    code, out, _ = run("sink", "--mysql-url", "mysql://:Pw-Only-123@127.0.0.1/db")
    assert code == 2 and "Pw-Only-123" not in out
    one_clear_line(out, 1)


def test_an_unknown_database_is_not_created(endpoints, names, mysql_db):
    missing = names.database + "_typo"
    url = mysql_url(mysql_db, database=missing)
    kafka_io.ensure_topic(kafka_io.admin(endpoints.bootstrap), names.topic("out"), 1,
                          {"cleanup.policy": "compact"})
    code, out, _ = run("sink", "--once", "--bootstrap-servers", endpoints.bootstrap,
                       "--topic", names.topic("out"),
                       "--group-id", names.group, "--mysql-url", url, "--metrics-port", "0")
    assert code == 1, out
    assert "--create-database" in one_clear_line(out, 2)
    assert missing not in databases(mysql_db)
    # Asked for, it is created.
    code, out, _ = run("sink", "--once", "--bootstrap-servers", endpoints.bootstrap,
                       "--topic", names.topic("out"),
                       "--group-id", names.group, "--mysql-url", url, "--metrics-port", "0",
                       "--create-database")
    try:
        assert code == 0, out
        assert missing in databases(mysql_db)
    finally:
        conn = pymysql.connect(host=mysql_db.host, port=mysql_db.port, user=mysql_db.user,
                               password=mysql_db.password, autocommit=True)
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{missing}`")
        conn.close()


def test_a_url_encoded_password_works_decoded(endpoints, names, mysql_db):
    password = "p@ss:w/rd%"
    from urllib.parse import quote

    admin = pymysql.connect(host=mysql_db.host, port=mysql_db.port, user=mysql_db.user,
                            password=mysql_db.password, autocommit=True)
    user = names.database[:30]
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE USER '{user}'@'%%' IDENTIFIED BY %s", (password,))
            cur.execute(f"GRANT ALL ON `{mysql_db.database}`.* TO '{user}'@'%'")
        kafka_io.ensure_topic(kafka_io.admin(endpoints.bootstrap), names.topic("out"), 1,
                              {"cleanup.policy": "compact"})
        url = (f"mysql://{user}:{quote(password, safe='')}@{mysql_db.host}:{mysql_db.port}/"
               f"{mysql_db.database}")
        code, out, _ = run("sink", "--once", "--bootstrap-servers", endpoints.bootstrap,
                           "--topic", names.topic("out"),
                           "--group-id", names.group, "--mysql-url", url,
                           "--metrics-port", "0")
        assert code == 0, out
        assert password not in out and quote(password, safe="") not in out
        assert "error_log" in tables(mysql_db)
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        admin.close()


def test_kafka_down_leaves_no_tables_in_mysql(names, mysql_db):
    code, out, _ = run("sink", "--once", "--bootstrap-servers", f"127.0.0.1:{free_port()}",
                       "--startup-timeout", "2", "--mysql-url", mysql_url(mysql_db),
                       "--topic", names.topic("out"),
                       "--group-id", names.group, "--metrics-port", "0")
    assert code == 1, out
    one_clear_line(out, 3)
    assert tables(mysql_db) == set()


def test_missing_spark_jars_create_nothing_in_kafka(endpoints, names, tmp_path):
    code, out, _ = run(*stage_args(endpoints, names, "--once"),
                       env={"LOGCOUNT_JARS_DIR": str(tmp_path)})
    assert code == 1, out
    assert "scripts/setup.sh" in one_clear_line(out, 2)
    for role in ("in", "out", "dlq"):
        assert not topic_exists(endpoints.bootstrap, names.topic(role))


def test_produce_checks_its_expect_folder_before_writing_anything(endpoints, names, tmp_path):
    code, out, _ = run("produce", "--bootstrap-servers", endpoints.bootstrap, "--topic",
                       names.topic("in"), "--synthetic", "500", "--expect",
                       str(tmp_path / "missing" / "expected.json"))
    assert code == 2 and "--expect" in one_clear_line(out, 1)
    assert not topic_exists(endpoints.bootstrap, names.topic("in"))


def test_a_line_over_the_size_limit_stops_the_load_with_where_to_resume(endpoints, names,
                                                                         tmp_path):
    path = tmp_path / "big.log"
    with open(path, "wb") as f:
        for i in range(300):
            f.write(b"2017-07-30 14:09:08 ERROR line %d\n" % i)
        f.write(b"2017-07-30 14:09:08 ERROR " + b"x" * 1_100_000 + b"\n")
        f.write(b"2017-07-30 14:10:08 ERROR after\n")
    code, out, _ = run("produce", "--bootstrap-servers", endpoints.bootstrap, "--topic",
                       names.topic("in"), "--file", str(path), "--partitions", "1")
    assert code == 2, out
    line = one_clear_line(out, 1)
    assert "line 301 " in line and "the 300 lines before it were written" in line, line
    assert "tail -n +302" in line
    assert sum(end_offsets(endpoints.bootstrap, names.topic("in")).values()) == 300
