"""The stage and the sink on the secured 3-broker cluster, each with its own user, one Java
client properties file each, and exactly the ACLs of docs/deploy.md.

The kill test runs stage and sink continuously while a writer adds plain records and committed
and aborted transactions; it SIGKILLs the broker coordinating the stage's transactional id, then
the one coordinating its group, restarting each. A fresh read_committed reader then recomputes
the expectation with the independent parser (tests/support/reference.py): 0 lost, 0 duplicated."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AclOperation, NewTopic, ResourceType

from tests.support.cluster import allow
from tests.support.exact import assert_exact
from tests.support.harness import ChaosConfig, Writer
from tests.support.readers import end_offsets, group_offsets, read_all, sink_offsets
from tests.support.reference import expectation
from tests.support.run import cli, start_cli, wait_for

R, W, D, DC, C = (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE,
                  AclOperation.DESCRIBE_CONFIGS, AclOperation.CREATE)
T, G, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID


def stage_acls(user: str, names) -> list:
    """docs/deploy.md's table for the stage, nothing more."""
    return [allow(user, T, names.topic("in"), op) for op in (R, D)] \
        + [allow(user, T, names.topic("out"), op, prefixed=True) for op in (R, W, D, DC, C)] \
        + [allow(user, T, names.topic("dlq"), op) for op in (W, D, C)] \
        + [allow(user, G, names.group, op, prefixed=True) for op in (R, D)] \
        + [allow(user, X, names.group, op, prefixed=True) for op in (W, D)]


def sink_acls(user: str, names) -> list:
    return [allow(user, T, names.topic("out"), op) for op in (R, D)] \
        + [allow(user, G, names.group + "-sink", op) for op in (R, D)]


class Users:
    def __init__(self, cluster, names, tmp_path: Path) -> None:
        self.cluster, self.names, self.tmp = cluster, names, tmp_path
        tag = names.prefix[-8:]
        self.stage, self.sink = f"stage-{tag}", f"sink-{tag}"
        self.password = f"Pw-{tag}-secret"
        for user in (self.stage, self.sink):
            cluster.add_user(user, self.password)

    def properties(self, user: str, password: str | None = None, ca: Path | None = None) -> str:
        path = self.tmp / f"{user}-{password or 'ok'}.properties"
        self.cluster.write_java_properties(path, user, password or self.password, ca=ca)
        return str(path)


@pytest.fixture
def users(secured_cluster, names, tmp_path):
    u = Users(secured_cluster, names, tmp_path)
    adm = secured_cluster.admin()
    adm.create_topics([NewTopic(names.topic("in"), 4)])[names.topic("in")].result(30)
    return u


def stage_cmd(names, props: str, *extra: str) -> list[str]:
    # No --bootstrap-servers: the properties file's bootstrap.servers applies.
    return ["run", "--client-config", props, "--input-topic", names.topic("in"),
            "--output-topic", names.topic("out"), "--dlq-topic", names.topic("dlq"),
            "--group-id", names.group, "--master", "local[2]", "--metrics-port", "0",
            "--min-batch-interval", "0", *extra]  # unpaced, as tests/support/run.py stage_args


def sink_cmd(names, props: str, url, *extra: str) -> list[str]:
    pw = f":{url.password}" if url.password else ""
    return ["sink", "--client-config", props, "--topic", names.topic("out"),
            "--group-id", names.group + "-sink", "--metrics-port", "0",
            "--mysql-url", f"mysql://{url.user}{pw}@{url.host}:{url.port}/{url.database}",
            *extra]


# The chaos tier's writer (plain records, committed and aborted transactions, riding out broker
# kills), paced at ~2,000 lines/s until told to stop: far more lines than the kills take.
WRITER = ChaosConfig(lines=1_000_000, partitions=4, duration_s=600.0, seed=5)


def test_coordinator_kills_under_a_continuous_run_are_exact(secured_cluster, users, names,
                                                           mysql_db, tmp_path):
    cluster, admin = secured_cluster, secured_cluster.admin_conf()
    cluster.add_acls(stage_acls(users.stage, names) + sink_acls(users.sink, names))
    t0 = time.monotonic()
    writer = Writer(cluster.bootstrap, names.topic("in"), WRITER, names.txn_id + "-writer",
                    admin)
    writer.start()
    stage = start_cli(*stage_cmd(names, users.properties(users.stage), "--trigger-interval",
                                 "0.5", "--max-records-per-batch", "4000"),
                      log_path=tmp_path / "stage.log")
    sink = start_cli(*sink_cmd(names, users.properties(users.sink), mysql_db),
                     log_path=tmp_path / "sink.log")
    log = tmp_path / "stage.log"
    try:
        wait_for(lambda: "batch 2 committed" in log.read_text(), 240, what="the first batches")
        # The input must hold an aborted transaction before the kills: a writer whose own
        # transaction coordinator is killed can spend the rest of the run in its timeouts, and
        # then the check below had nothing aborted to check (seen once in CI).
        wait_for(lambda: writer.aborted > 0, 120, what="the writer's first aborted transaction")
        txn_id = names.group + "-stage"
        for kind, coordinator in (("transaction", cluster.transaction_coordinator),
                                  ("group", cluster.group_coordinator)):
            key = txn_id if kind == "transaction" else names.group
            node = coordinator(key)
            committed = log.read_text().count(" committed: ")
            cluster.kill_broker(node)
            # A real failover: the controller fences the dead broker (broker.session.timeout.ms,
            # 9 s) and another one takes the coordinator's partition over; the writer, stage and
            # sink run on against two brokers meanwhile.
            wait_for(lambda k=key, n=node, c=coordinator: c(k) != n, 60,
                     what=f"the {kind} coordinator to move off broker {node}")
            time.sleep(3)
            assert writer.error is None, writer.error
            cluster.start_broker(node)
            cluster.wait_healthy()
            wait_for(lambda n=committed: log.read_text().count(" committed: ") > n + 1, 240,
                     what=f"commits after the {kind} coordinator (broker {node}) came back")
            assert stage.poll() is None, f"stage died:\n{log.read_text()[-3000:]}"
        writer.stop.set()
        writer.join(300)
        assert writer.error is None, writer.error
        in_ends = end_offsets(admin, names.topic("in"))
        wait_for(lambda: group_offsets(admin, names.group, names.topic("in")) == in_ends, 300,
                 what="the stage to drain the input")
        out_ends = {p: e for p, e in end_offsets(admin, names.topic("out")).items() if e > 0}
        wait_for(lambda: sink_offsets(mysql_db, names) == out_ends, 180,
                 what="the sink to drain the output")
    finally:
        writer.stop.set()
        for proc in (stage, sink):
            proc.send_signal(signal.SIGTERM)
        codes = [p.wait(120) for p in (stage, sink)]
    assert codes == [0, 0], (log.read_text()[-3000:], (tmp_path / "sink.log").read_text()[-2000:])
    expected, malformed, aborted_at = expectation(read_all(admin, names.topic("in"), True, 120),
                                                  read_all(admin, names.topic("in"), False, 120))
    aborted = len(aborted_at)
    assert aborted > 0 and sum(expected.values()) > 1000, "the input holds what it claims"
    assert_exact(admin, names, expected, url=mysql_db, malformed=malformed, timeout_s=120)
    print(f"\nsecured coordinator kills: {sum(expected.values())} ERROR lines in "
          f"{len(expected)} minutes, {aborted} aborted records, "
          f"{time.monotonic() - t0:.0f}s; lost 0, duplicated 0")


def one_line(proc, *secrets: str) -> str:
    out = proc.stdout + proc.stderr
    lines = [ln for ln in out.splitlines() if ln.strip()]
    # At most: the settings line, the state line, the Spark-ready line, the error.
    assert "Traceback" not in out and len(lines) <= 4, out
    assert lines[-1].startswith("logcount: error: "), out
    for s in secrets:
        assert s not in out, f"secret printed: {out}"
    return lines[-1]


@pytest.mark.parametrize("missing", ["all", "transactional-id", "input-read"])
def test_a_missing_acl_is_one_line_naming_what_was_denied(secured_cluster, users, names,
                                                         missing):
    acls = stage_acls(users.stage, names)
    if missing == "all":
        acls, words = [], f"not authorized: topic {names.topic('in')}"
    elif missing == "transactional-id":
        acls, words = [a for a in acls if a.restype != X], "not authorized: transactional id"
    else:  # the first request that needs it: the fresh start's offsets commit
        acls = [a for a in acls if not (a.name == names.topic("in") and a.operation == R)]
        words = "send_offsets_to_transaction: not authorized: topic"
    if acls:
        secured_cluster.add_acls(acls)
    t0 = time.monotonic()
    proc = cli(*stage_cmd(names, users.properties(users.stage), "--once"), check=False,
               timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    line = one_line(proc, users.password)
    assert words in line, line
    assert time.monotonic() - t0 < 90, "a denial must not be retried"


@pytest.mark.parametrize("case", ["wrong-password", "untrusted-ca"])
def test_a_wrong_password_or_an_untrusted_ca_is_one_line(secured_cluster, users, names, case):
    secured_cluster.add_acls(stage_acls(users.stage, names))
    if case == "wrong-password":
        props, words = users.properties(users.stage, "Not-The-Pw-42"), "Authentication"
    else:
        props = users.properties(users.stage, ca=secured_cluster.untrusted_ca)
        words = "certificate verify failed"
    t0 = time.monotonic()
    proc = cli(*stage_cmd(names, props, "--once"), check=False, timeout=120)
    assert proc.returncode == 1, proc.stderr[-3000:]
    line = one_line(proc, users.password, "Not-The-Pw-42")
    assert words in line, line
    assert time.monotonic() - t0 < 30, "a login failure must not wait out the start-up timeout"


def viewer_acls(user: str, names) -> list:
    """docs/deploy.md's read-only ACLs of `logcount state show`."""
    return [allow(user, T, names.topic("in"), D),
            allow(user, T, names.topic("out") + "-state", R)] \
        + [allow(user, T, names.topic("out"), op, prefixed=True) for op in (D, DC)] \
        + [allow(user, G, names.group, D, prefixed=True)]


def test_state_show_needs_only_read_acls(secured_cluster, users, names):
    """An operator's read-only user sees the stage's state and the start it predicts, and
    writes nothing (it could not: it has no WRITE anywhere)."""
    viewer = f"viewer-{names.prefix[-8:]}"
    secured_cluster.add_user(viewer, users.password)
    secured_cluster.add_acls(stage_acls(users.stage, names) + viewer_acls(viewer, names))
    admin = secured_cluster.admin_conf()
    producer = Producer(admin)
    for i in range(2_000):
        level = "ERROR" if i % 3 else "INFO"
        producer.produce(names.topic("in"), f"2017-07-30 14:{i % 60:02d}:08 {level} m{i}".encode(),
                         partition=i % 4)
    assert producer.flush(60) == 0
    cli(*stage_cmd(names, users.properties(users.stage), "--once"), timeout=300)
    show = ["state", "show", "--client-config", users.properties(viewer), "--input-topic",
            names.topic("in"), "--output-topic", names.topic("out"), "--group-id", names.group,
            "--dlq-topic", names.topic("dlq")]
    before = end_offsets(admin, names.topic("out") + "-state")
    report = json.loads(cli(*show, "--json", timeout=120).stdout)
    assert report["start"]["action"] == "resume", report["start"]
    group = group_offsets(admin, names.group, names.topic("in"))
    assert {r["partition"]: (r["state"], r["group"]) for r in report["partitions"]} == {
        p: (o, o) for p, o in group.items()}, report["partitions"]
    assert report["minutes"] > 0 and report["claim"]["instance"]
    assert end_offsets(admin, names.topic("out") + "-state") == before
    text = cli(*show, timeout=120)
    assert users.password not in text.stdout + text.stderr
    assert "a start now would: resume (exit 0)" in text.stdout, text.stdout

