"""A production-shaped Kafka cluster for tests, from the same broker jars as the embedded stack.

One dedicated KRaft controller (node 100) and three brokers (nodes 1, 2, 3), each its own JVM in
its own session (process group) under `workdir`:

- clients and brokers talk SASL_SSL only, SCRAM-SHA-512, with a CA made here with `openssl`;
- authorisation by `StandardAuthorizer` with `allow.everyone.if.no.acl.found=false`: a user sees
  nothing without ACLs; `admin` (created when the storage is formatted) is the super user;
- the internal topics run at replication factor 3 / min ISR 2, as a production cluster does;
- each broker has a second client listener, PROXIED (SASL_SSL too), that advertises a port on
  which nothing listens until a test puts a fault-injecting proxy there (tests/network): clients
  bootstrapped at `proxied_bootstrap` then reach every broker only through its proxy, while the
  brokers' own traffic (replication, the controller) stays on their direct listeners.

Users and ACLs changed through this class are enforced by every running broker when the call
returns (`metadata_barrier`). Do not delete SCRAM users on this cluster: Kafka 4.3.1 can then
restart a broker with no SCRAM users at all (see `disable_user`).

Plain Python (no pytest): `tests/conftest.py` wraps it in a session fixture.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import logging
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from confluent_kafka import ElectionType, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from logcount.core.paths import jars_dir
from tests.support.ports import free_ports

HOST = "127.0.0.1"
# An ACL filter's "any" name, principal or host: None, where confluent-kafka's stubs say str.
ANY_NAME = cast(str, None)
CONTROLLER_ID = 100
BROKER_IDS = (1, 2, 3)
ADMIN_USER = "admin"
SCRAM = "SCRAM-SHA-512"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
# Six partitions each: fast to create and load, and enough that coordinators land on all three
# brokers (the kill tests need the transaction and group coordinators to be identifiable).
OFFSETS_PARTITIONS = 6
TXN_PARTITIONS = 6
INTERNAL_TOPICS = {"__consumer_offsets": OFFSETS_PARTITIONS,
                   "__transaction_state": TXN_PARTITIONS}
# Why these bounds: a cold broker JVM starts in ~5-10 s on 2 cores; three brokers and a
# controller starting together on a loaded 2-core machine take several times that.
START_TIMEOUT_S = 240.0
RESTART_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
# Per-node JVM: small heap, serial GC, and the C1 compiler only: 4 JVMs start together on 2
# cores (maybe next to another test run), and skipping C2 brings the cluster up in ~15 s rather
# than 20-27 s there; tests move little data, so C2's faster steady state does not matter.
NODE_JVM = ("-Xms128m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
TOOL_JVM = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
# The throwaway user whose password `metadata_barrier` changes (see there).
BARRIER_USER = "metadata-barrier"
WARMUP_ID = "secured-cluster-warmup"

log = logging.getLogger("tests.secured")
# librdkafka's own log lines (refused logins while a broker catches up, connection refused while
# one is down) go to Python logging rather than straight to the terminal.
_RDKAFKA_LOG = logging.getLogger("tests.secured.rdkafka")


class SecuredClusterError(RuntimeError):
    pass


def missing_tools() -> str | None:
    """Why the cluster cannot run here, or None."""
    if not shutil.which("java"):
        return "java not found (the secured cluster runs the Kafka broker jars): install a JDK 17"
    if not shutil.which("openssl"):
        return "openssl not found (the secured cluster makes its CA with it): install openssl"
    kafka = jars_dir() / "kafka"
    if not any(kafka.glob("kafka_2.13-*.jar")):
        return f"Kafka broker jars missing in {kafka}: run scripts/setup.sh"
    return None


# -- the coordinator of a key --------------------------------------------------------------------


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def coordinator_partition(key: str, partitions: int) -> int:
    """The partition of `__transaction_state` (for a transactional id) or `__consumer_offsets`
    (for a group id) that holds `key`: `Utils.abs(key.hashCode()) % partitions`, as in Kafka
    4.3.1's TransactionStateManager.partitionFor and GroupCoordinatorService.partitionFor.
    Utils.abs maps Integer.MIN_VALUE to 0."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# -- TLS -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tls:
    ca: Path            # the CA brokers and clients trust (PEM)
    ca_key: Path
    keystore: Path      # the brokers' key + certificate + CA, one PEM file
    untrusted_ca: Path  # a second, unrelated CA: a client trusting only it must fail


def make_tls(directory: Path) -> Tls:
    """A CA, one server certificate it signs (SAN IP:127.0.0.1, DNS:localhost) for all brokers,
    and an unrelated second CA. EC P-256 keys (fast to make), unencrypted PKCS#8."""
    directory.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        proc = subprocess.run(["openssl", *args], cwd=directory, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SecuredClusterError(f"openssl {args[0]} failed: {proc.stderr.strip()}")

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    for name, cn in (("ca", "logcount test CA"), ("untrusted-ca", "logcount unrelated CA")):
        openssl("req", "-x509", *ec, "-keyout", f"{name}.key", "-out", f"{name}.pem",
                "-days", "7", "-sha256", "-subj", f"/CN={cn}",
                "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    (directory / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
    )
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-set_serial", str(random.SystemRandom().getrandbits(63)), "-days", "7",
            "-sha256", "-extfile", "server.ext", "-out", "server.pem")
    keystore = directory / "server-keystore.pem"
    keystore.write_text("".join((directory / f).read_text()
                                for f in ("server.key", "server.pem", "ca.pem")))
    for f in ("ca.key", "untrusted-ca.key", "server.key", "server-keystore.pem"):
        (directory / f).chmod(0o600)
    return Tls(ca=directory / "ca.pem", ca_key=directory / "ca.key", keystore=keystore,
               untrusted_ca=directory / "untrusted-ca.pem")


# -- processes ----------------------------------------------------------------------------------


_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


_SIGKILL = int(signal.SIGKILL)


def die_with_parent() -> None:  # runs in the child between fork and exec: nothing but prctl
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, _SIGKILL)


@dataclass
class _Node:
    node_id: int
    port: int
    dir: Path
    proc: subprocess.Popen[bytes] | None = None
    proxied_port: int = 0  # the PROXIED listener (brokers only)
    proxy_port: int = 0  # what PROXIED advertises: where a test's proxy listens

    @property
    def name(self) -> str:
        return "controller" if self.node_id == CONTROLLER_ID else f"broker-{self.node_id}"

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.dir / "server.log"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        # Only while the leader is unreaped: then its pid (= the group id) cannot be recycled.
        if self.running():
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def wait_exit(self, timeout_s: float) -> bool:
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def tail(self, lines: int = 15) -> str:
        out = []
        for f in (self.dir / "out.log", self.log_file):
            with contextlib.suppress(OSError):
                out += f.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(out)


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, base64url without padding, and - as Kafka's own
    Uuid.randomUuid ensures - not starting with '-', which the storage tool's argument parser
    would take for an option ("argument --cluster-id/-t: expected one argument")."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _check_credential(what: str, value: str) -> None:
    # They go inside a quoted JAAS string in a .properties file: keep them free of what would
    # need escaping there (quotes, backslashes, line breaks).
    if not value or re.search(r'["\\\r\n]', value):
        raise ValueError(f"{what} must be non-empty without quotes, backslashes or line breaks")


def jaas(user: str, password: str) -> str:
    _check_credential("user", user)
    _check_credential("password", password)
    return f'{SCRAM_MODULE} required username="{user}" password="{password}";'


def allow(user: str, resource_type: ResourceType, name: str, operation: AclOperation, *,
          prefixed: bool = False, host: str = "*") -> AclBinding:
    """An ALLOW ACL for `User:<user>` (literal name, or a prefix with prefixed=True)."""
    return AclBinding(resource_type, name,
                      ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL,
                      f"User:{user}", host, operation, AclPermissionType.ALLOW)


def acls_of(user: str) -> AclBindingFilter:
    """A filter matching every ACL of `User:<user>` (for delete_acls)."""
    return AclBindingFilter(ResourceType.ANY, ANY_NAME, ResourcePatternType.ANY, f"User:{user}",
                            ANY_NAME, AclOperation.ANY, AclPermissionType.ANY)


# -- the cluster ---------------------------------------------------------------------------------


class SecuredCluster:
    """Controller 100 + brokers 1..3, SASL_SSL/SCRAM-SHA-512, ACLs, internal topics RF 3/ISR 2.

    `start()` formats and starts all four JVMs in parallel and returns once healthy; `stop()`
    leaves no process behind (SIGTERM, then SIGKILL of each node's process group after a bound);
    an atexit hook and PR_SET_PDEATHSIG (for nodes started from the main thread) kill the nodes
    should the test process end without calling it.
    """

    def __init__(self, workdir: Path, *, node_jvm: Iterable[str] = NODE_JVM) -> None:
        self.workdir = Path(workdir).resolve()
        self.node_jvm = tuple(node_jvm)
        self.admin_password = secrets.token_hex(16)
        self.cluster_id = _cluster_id()
        self.tls: Tls | None = None
        self.controller: _Node | None = None
        self.brokers: dict[int, _Node] = {}
        self.startup_s: float | None = None
        # Seconds since start() began at which each start-up phase ended.
        self.startup_phases: dict[str, float] = {}
        self._admin: AdminClient | None = None
        self._lock = threading.RLock()

    # -- addresses and client configuration --

    @property
    def started(self) -> bool:
        return self.controller is not None

    def _need_started(self) -> None:
        if not self.started:
            raise SecuredClusterError("the cluster is not started")

    @property
    def bootstrap(self) -> str:
        """All three broker addresses, comma-separated (SASL_SSL)."""
        self._need_started()
        return ",".join(b.address for b in self.brokers.values())

    def broker_address(self, node_id: int) -> str:
        return self._node(node_id).address

    def proxied_listener(self, node_id: int) -> str:
        """Where broker `node_id`'s PROXIED listener listens: a proxy's upstream."""
        return f"{HOST}:{self._node(node_id).proxied_port}"

    def proxy_address(self, node_id: int) -> str:
        """What broker `node_id` advertises on PROXIED: where its proxy must listen."""
        return f"{HOST}:{self._node(node_id).proxy_port}"

    @property
    def proxied_bootstrap(self) -> str:
        """The three proxy addresses: a client bootstrapped here is told, in every metadata
        answer, to reach each broker through its proxy."""
        self._need_started()
        return ",".join(self.proxy_address(b) for b in self.brokers)

    @property
    def ca(self) -> Path:
        self._need_started()
        assert self.tls is not None
        return self.tls.ca

    @property
    def untrusted_ca(self) -> Path:
        self._need_started()
        assert self.tls is not None
        return self.tls.untrusted_ca

    def librdkafka_conf(self, user: str, password: str, *, ca: Path | None = None,
                        bootstrap: str | None = None) -> dict[str, str]:
        """A confluent-kafka client configuration for `user` (add group.id etc. yourself)."""
        _check_credential("user", user)
        _check_credential("password", password)
        return {
            "bootstrap.servers": bootstrap or self.bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM,
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.location": str(ca or self.ca),
            # librdkafka's default, stated: the broker certificate must name 127.0.0.1.
            "ssl.endpoint.identification.algorithm": "https",
        }

    def admin_conf(self) -> dict[str, str]:
        return self.librdkafka_conf(ADMIN_USER, self.admin_password)

    def java_properties(self, user: str, password: str, *, ca: Path | None = None,
                        bootstrap: str | None = None) -> str:
        """A Java client properties text (`--consumer.config`, `--command-config`, logcount's
        `--client-config`) for `user` (bootstrap: the brokers' direct addresses unless given)."""
        return (
            f"bootstrap.servers={bootstrap or self.bootstrap}\n"
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={SCRAM}\n"
            f"sasl.jaas.config={jaas(user, password)}\n"
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={Path(ca or self.ca).resolve()}\n"
        )

    def write_java_properties(self, path: Path, user: str, password: str, *,
                              ca: Path | None = None, bootstrap: str | None = None) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.java_properties(user, password, ca=ca, bootstrap=bootstrap))
        path.chmod(0o600)
        return path

    def admin(self) -> AdminClient:
        """The cluster's shared AdminClient, logged in as the super user `admin`."""
        with self._lock:
            if self._admin is None:
                conf: dict[str, Any] = {**self.admin_conf(), "logger": _RDKAFKA_LOG}
                self._admin = AdminClient(conf)
            return self._admin

    # -- node configuration --

    def _node(self, node_id: int) -> _Node:
        self._need_started()
        if node_id == CONTROLLER_ID:
            assert self.controller is not None
            return self.controller
        if node_id not in self.brokers:
            raise ValueError(f"no node {node_id}: brokers are {BROKER_IDS}, "
                             f"the controller is {CONTROLLER_ID}")
        return self.brokers[node_id]

    def _nodes(self) -> list[_Node]:
        return [*self.brokers.values(), *([self.controller] if self.controller else [])]

    def _common_properties(self) -> str:
        assert self.controller is not None
        return f"""\
controller.quorum.voters={CONTROLLER_ID}@{self.controller.address}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,PROXIED:SASL_SSL
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
# User:ANONYMOUS is the principal of a connection on a PLAINTEXT listener. The only one here is
# the controller's CONTROLLER listener, bound to loopback, which only the brokers connect to:
# this test cluster lets them act on the controller that way. Production runs SASL_SSL on the
# controller listener too (brokers log in there as a super user) and never lists ANONYMOUS. The
# brokers' own listener is SASL_SSL only, so no client is ever ANONYMOUS there.
super.users=User:{ADMIN_USER};User:ANONYMOUS
# What a production cluster runs: three replicas, and a write needs two in sync. The brokers
# create the internal topics with their settings below.
min.insync.replicas=2
offsets.topic.replication.factor=3
offsets.topic.num.partitions={OFFSETS_PARTITIONS}
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions={TXN_PARTITIONS}
unclean.leader.election.enable=false
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0
# The stage asks for 60 s transactions; the embedded stack allows up to 15 min, so does this.
transaction.max.timeout.ms=900000
"""

    def _controller_properties(self) -> str:
        assert self.controller is not None
        return f"""\
process.roles=controller
node.id={CONTROLLER_ID}
listeners=CONTROLLER://{self.controller.address}
log.dirs={self.controller.dir / 'data'}
# The controller creates the topics, so the topic defaults are its settings (Kafka 4.3 warns
# that brokers' copies will be ignored in 5.0).
num.partitions=1
default.replication.factor=3
{self._common_properties()}"""

    def _broker_properties(self, node: _Node) -> str:
        assert self.tls is not None
        return f"""\
process.roles=broker
node.id={node.node_id}
listeners=SASL_SSL://{node.address},PROXIED://{HOST}:{node.proxied_port}
advertised.listeners=SASL_SSL://{node.address},PROXIED://{HOST}:{node.proxy_port}
inter.broker.listener.name=SASL_SSL
sasl.enabled.mechanisms={SCRAM}
sasl.mechanism.inter.broker.protocol={SCRAM}
listener.name.sasl_ssl.{SCRAM.lower()}.sasl.jaas.config={jaas(ADMIN_USER, self.admin_password)}
listener.name.proxied.{SCRAM.lower()}.sasl.jaas.config={jaas(ADMIN_USER, self.admin_password)}
ssl.keystore.type=PEM
ssl.keystore.location={self.tls.keystore}
ssl.truststore.type=PEM
ssl.truststore.location={self.tls.ca}
ssl.client.auth=none
ssl.endpoint.identification.algorithm=https
log.dirs={node.dir / 'data'}
{self._common_properties()}
# Small machine: fewer threads, and a 16 MB (not 128 MB) compaction buffer in a 384 MB heap.
num.network.threads=2
num.io.threads=4
num.replica.fetchers=1
background.threads=4
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=16777216
log.cleaner.backoff.ms=1000
"""

    def _log4j(self, node: _Node) -> str:
        return f"""\
Configuration:
  name: secured-{node.name}
  Appenders:
    File:
      name: FILE
      fileName: "{node.log_file}"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: FILE
"""

    def _classpath(self) -> str:
        return str(jars_dir() / "kafka" / "*")

    def _node_jvm(self, node: _Node) -> list[str]:
        return ["java", *self.node_jvm, "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={node.dir / 'log4j2.yaml'}",
                f"-Dkafka.logs.dir={node.dir}", "-cp", self._classpath()]

    # -- lifecycle --

    def start(self, timeout_s: float = START_TIMEOUT_S) -> float:
        """Make the CA, format and start all four nodes, create the internal topics; return the
        seconds it took until healthy (also in `startup_s`)."""
        if self.started:
            raise SecuredClusterError("already started (use start_broker to restart a broker)")
        reason = missing_tools()
        if reason:
            raise SecuredClusterError(reason)
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.tls = make_tls(self.workdir / "tls")
        self.startup_phases["tls"] = time.monotonic() - t0
        n = len(BROKER_IDS)
        ports = free_ports(1 + 3 * n)
        self.controller = _Node(CONTROLLER_ID, ports[0], self.workdir / "controller")
        self.brokers = {b: _Node(b, ports[1 + i], self.workdir / f"broker-{b}",
                                 proxied_port=ports[1 + n + i], proxy_port=ports[1 + 2 * n + i])
                        for i, b in enumerate(BROKER_IDS)}
        atexit.register(self._kill_all)
        try:
            for node in self._nodes():
                node.dir.mkdir(parents=True, exist_ok=True)
                props = (self._controller_properties() if node is self.controller
                         else self._broker_properties(node))
                (node.dir / "server.properties").write_text(props)
                (node.dir / "server.properties").chmod(0o600)
                (node.dir / "log4j2.yaml").write_text(self._log4j(node))
            self._format_all()
            self.startup_phases["format"] = time.monotonic() - t0
            for node in self._nodes():
                self._launch(node)
            for b in BROKER_IDS:
                self._wait_answers(self.brokers[b], deadline)
            self.startup_phases["brokers_answer"] = time.monotonic() - t0
            self._create_internal_topics(deadline)
            self.startup_phases["internal_topics"] = time.monotonic() - t0
            self.wait_healthy(timeout_s=max(1.0, deadline - time.monotonic()))
            self.startup_phases["healthy"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - t0
        log.info("secured cluster healthy after %.1f s (%s)", self.startup_s, self.bootstrap)
        return self.startup_s

    def _format_all(self) -> None:
        """kafka-storage format on every node, in parallel; `admin`'s SCRAM credential goes into
        the bootstrap metadata (only the controller's copy matters, all get the same)."""
        scram = f"{SCRAM}=[name={ADMIN_USER},password={self.admin_password}]"
        procs = []
        for node in self._nodes():
            cmd = ["java", *TOOL_JVM, f"-Dlog4j2.configurationFile={self._tools_log4j()}",
                   "-cp", self._classpath(), "kafka.tools.StorageTool", "format",
                   "--config", str(node.dir / "server.properties"),
                   "--cluster-id", self.cluster_id, "--add-scram", scram]
            procs.append((node, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT, text=True)))
        failed = []
        for node, proc in procs:
            out, _ = proc.communicate(timeout=120)
            if proc.returncode != 0:
                failed.append(f"{node.name}: {out.strip()[-2000:]}")
        if failed:
            raise SecuredClusterError("kafka-storage format failed:\n" + "\n".join(failed))

    def _tools_log4j(self) -> Path:
        path = self.workdir / "tools-log4j2.yaml"
        if not path.exists():
            path.write_text("""\
Configuration:
  name: secured-tools
  Appenders:
    Console:
      name: STDERR
      target: SYSTEM_ERR
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDERR
""")
        return path

    def _launch(self, node: _Node) -> None:
        if node.proc is not None and node.running():
            raise SecuredClusterError(f"{node.name} is already running (pid {node.proc.pid})")
        in_main = threading.current_thread() is threading.main_thread()
        with open(node.dir / "out.log", "ab") as out:
            node.proc = subprocess.Popen(
                [*self._node_jvm(node), "kafka.Kafka", str(node.dir / "server.properties")],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=node.dir,
                start_new_session=True,
                # PR_SET_PDEATHSIG fires when the *thread* that forked exits: only the main
                # thread lives as long as the test process.
                preexec_fn=die_with_parent if in_main else None,
            )
        (node.dir / "pid").write_text(str(node.proc.pid))

    def _probe_client(self, node: _Node, user: str, password: str) -> str | None:
        """None when `node` itself answers a metadata request for `user`, else why not. A
        broker enables its listener only once registered, caught up with the metadata and
        unfenced; with it the only bootstrap address, the request goes to it."""
        errors: list[str] = []
        conf: dict[str, Any] = {
            **self.librdkafka_conf(user, password, bootstrap=node.address),
            "logger": _RDKAFKA_LOG, "error_cb": lambda e: errors.append(e.str())}
        # Destroyed here, in this thread: an AdminClient left to the garbage collector can be
        # collected on its own librdkafka thread, which aborts the process (seen once).
        with AdminClient(conf) as adm:
            try:
                adm.list_topics(timeout=3)
                return None
            except KafkaException as exc:
                return errors[-1] if errors else str(exc.args[0].str())

    def _check_alive(self, *nodes: _Node) -> None:
        for node in nodes:
            if node.proc is not None and node.proc.poll() is not None:
                raise SecuredClusterError(
                    f"{node.name} exited (status {node.proc.returncode}); see {node.log_file}:\n"
                    f"{node.tail()}")

    def _wait_answers(self, node: _Node, deadline: float) -> None:
        while True:
            self._check_alive(node, *([self.controller] if self.controller else []))
            why = self._probe_client(node, ADMIN_USER, self.admin_password)
            if why is None:
                return
            if time.monotonic() > deadline:
                raise SecuredClusterError(f"{node.name} not answering on {node.address} ({why}); "
                                          f"see {node.log_file}:\n{node.tail()}")
            time.sleep(0.5)

    def _create_internal_topics(self, deadline: float) -> None:
        """Kafka creates __consumer_offsets and __transaction_state on the first FindCoordinator
        for a group or a transactional id: ask for both once, before any test does."""
        adm = self.admin()
        while True:
            topics = set(adm.list_topics(timeout=10).topics)
            if "__consumer_offsets" not in topics:
                with contextlib.suppress(KafkaException):
                    adm.describe_consumer_groups([WARMUP_ID], request_timeout=10)[
                        WARMUP_ID].result()
            if "__transaction_state" not in topics:
                producer = Producer({**self.admin_conf(), "transactional.id": WARMUP_ID,
                                     "logger": _RDKAFKA_LOG})
                with contextlib.suppress(KafkaException):
                    producer.init_transactions(20)
                del producer
            if set(INTERNAL_TOPICS) <= topics:
                return
            if time.monotonic() > deadline:
                raise SecuredClusterError(f"internal topics not created: {sorted(topics)}")
            time.sleep(0.5)

    def health_problems(self, topics: Iterable[str] = ()) -> list[str]:
        """What keeps the cluster from being healthy now (empty when healthy): every broker
        running and answering on its own port, registered, and every partition of the internal
        topics (and of `topics`) led and with its full replica set in sync."""
        problems = []
        for node in self.brokers.values():
            if not node.running():
                problems.append(f"{node.name} is not running")
            elif why := self._probe_client(node, ADMIN_USER, self.admin_password):
                problems.append(f"{node.name} does not answer on {node.address}: {why}")
        if problems:
            return problems
        try:
            md = self.admin().list_topics(timeout=10)
        except KafkaException as exc:
            return [f"no metadata: {exc}"]
        alive = set(md.brokers)
        if alive != set(BROKER_IDS):
            problems.append(f"registered brokers {sorted(alive)}, expected {list(BROKER_IDS)}")
        wanted = dict(INTERNAL_TOPICS)
        wanted.update((t, 0) for t in topics)
        for name, count in wanted.items():
            tm = md.topics.get(name)
            if tm is None or tm.error is not None:
                problems.append(f"{name}: {'missing' if tm is None else tm.error}")
                continue
            if count and len(tm.partitions) != count:
                problems.append(f"{name}: {len(tm.partitions)} partitions, expected {count}")
            for p in sorted(tm.partitions.values(), key=lambda p: p.id):
                if p.leader not in alive:
                    problems.append(f"{name}-{p.id}: leader {p.leader}")
                elif set(p.isrs) != set(p.replicas):
                    problems.append(f"{name}-{p.id}: ISR {sorted(p.isrs)} of replicas "
                                    f"{sorted(p.replicas)}")
        return problems

    def wait_healthy(self, timeout_s: float = RESTART_TIMEOUT_S, *,
                     topics: Iterable[str] = ()) -> None:
        """Wait until `health_problems(topics)` is empty; raise with the last problems."""
        topics = list(topics)
        deadline = time.monotonic() + timeout_s
        while True:
            self._check_alive(*self._nodes())
            problems = self.health_problems(topics)
            if not problems:
                return
            if time.monotonic() > deadline:
                tails = "".join(f"\n--- {n.name} ({n.log_file}):\n{n.tail()}"
                                for n in self.brokers.values() if n.name in " ".join(problems))
                raise SecuredClusterError(f"not healthy after {timeout_s:.0f}s: "
                                          + "; ".join(problems[:10]) + tails)
            time.sleep(0.5)

    def kill_broker(self, node_id: int) -> None:
        """SIGKILL one node (a broker, or the controller with CONTROLLER_ID): no clean shutdown,
        its data stays for `start_broker`."""
        node = self._node(node_id)
        if not node.running():
            raise SecuredClusterError(f"{node.name} is not running")
        node.signal(signal.SIGKILL)
        if not node.wait_exit(30):
            raise SecuredClusterError(f"{node.name} survived SIGKILL")

    def start_broker(self, node_id: int, *, wait: bool = True,
                     timeout_s: float = RESTART_TIMEOUT_S) -> None:
        """Restart a node killed (or stopped) before, on the same port with the same data. With
        `wait`, return once it answers (registered, caught up, unfenced); its replicas may still
        be catching up: `wait_healthy()` waits for those."""
        node = self._node(node_id)
        self._launch(node)
        if wait and node.node_id != CONTROLLER_ID:
            self._wait_answers(node, time.monotonic() + timeout_s)

    def stop_broker(self, node_id: int, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (a controlled shutdown), then SIGKILL after `timeout_s`."""
        node = self._node(node_id)
        node.signal(signal.SIGTERM)
        if not node.wait_exit(timeout_s):
            node.signal(signal.SIGKILL)
            node.wait_exit(30)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Stop everything: brokers first (their controlled shutdown needs the controller), then
        the controller; SIGKILL whatever outlives `timeout_s`. Idempotent; never leaves a node
        running."""
        with self._lock:
            self._admin = None
        try:
            for group in (list(self.brokers.values()),
                          [self.controller] if self.controller else []):
                running = [n for n in group if n.running()]
                for node in running:
                    node.signal(signal.SIGTERM)
                deadline = time.monotonic() + timeout_s
                for node in running:
                    if not node.wait_exit(max(0.0, deadline - time.monotonic())):
                        log.warning("%s: no exit %ss after SIGTERM, SIGKILL", node.name,
                                    timeout_s)
                        node.signal(signal.SIGKILL)
                        node.wait_exit(30)
        finally:
            self._kill_all()
            atexit.unregister(self._kill_all)

    def _kill_all(self) -> None:
        for node in self._nodes():
            node.signal(signal.SIGKILL)
            node.wait_exit(30)

    def running_pids(self) -> dict[int, int]:
        """node id -> pid of every node process still running."""
        return {n.node_id: n.proc.pid for n in self._nodes() if n.running() and n.proc}

    def __enter__(self) -> SecuredCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- users and ACLs (as admin) --

    def _upsert_user(self, name: str, password: str) -> None:
        _check_credential("user", name)
        _check_credential("password", password)
        upsert = UserScramCredentialUpsertion(
            name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode())
        for f in self.admin().alter_user_scram_credentials([upsert],
                                                           request_timeout=30).values():
            f.result()

    def add_user(self, name: str, password: str) -> None:
        """Create (or re-password) a SCRAM-SHA-512 user; returns once every running broker
        accepts its login."""
        self._upsert_user(name, password)
        self.metadata_barrier()

    def disable_user(self, name: str) -> None:
        """Lock a user out by giving it a random password nobody knows.

        Not a SCRAM credential deletion, on purpose: Kafka 4.3.1's ScramDelta.apply() drops a
        whole mechanism's users when a removal empties its (partly built) user map, so a broker
        restarted later, replaying the metadata log from scratch, can come back with NO
        SCRAM-SHA-512 users at all - every login, `admin`'s and the brokers' own included,
        then fails with "invalid credentials" (seen here: delete user `mallory`, SIGKILL and
        restart a broker). Whether it happens depends on the HashMap order of the user names.
        Tests that restart brokers must not delete SCRAM users on this cluster."""
        self.add_user(name, secrets.token_hex(16))

    def add_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Create ACLs; returns once every running broker enforces them."""
        bindings = list(bindings)
        for f in self.admin().create_acls(bindings, request_timeout=30).values():
            f.result()
        self.metadata_barrier()

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
        """Delete the ACLs matching `filters`; returns the deleted bindings once every running
        broker has dropped them."""
        deleted: list[AclBinding] = []
        for f in self.admin().delete_acls(list(filters), request_timeout=30).values():
            deleted += f.result()
        self.metadata_barrier()
        return deleted

    def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        acl_filter = acl_filter or AclBindingFilter(
            ResourceType.ANY, ANY_NAME, ResourcePatternType.ANY, ANY_NAME, ANY_NAME,
            AclOperation.ANY, AclPermissionType.ANY)
        return list(self.admin().describe_acls(acl_filter, request_timeout=30).result())

    def metadata_barrier(self, timeout_s: float = 60.0) -> None:
        """Return once every running broker has applied the cluster metadata written so far.

        ACLs and SCRAM users are records in the controller's metadata log that each broker
        applies on its own, a moment later: a client can meet a broker that does not know them
        yet. So change a throwaway user's password (a record after them) and wait until each
        broker accepts a login with the new one."""
        password = secrets.token_hex(12)
        self._upsert_user(BARRIER_USER, password)
        deadline = time.monotonic() + timeout_s
        for node in self.brokers.values():
            while node.running() and self._probe_client(node, BARRIER_USER, password):
                if time.monotonic() > deadline:
                    raise SecuredClusterError(f"{node.name} did not apply the metadata in "
                                              f"{timeout_s:.0f}s")
                time.sleep(0.1)

    # -- where things are --

    def partition_leader(self, topic: str, partition: int, timeout_s: float = 30.0) -> int:
        """The node id leading `topic`-`partition` in the cluster metadata now (as admin)."""
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(KafkaException):
                tm = self.admin().list_topics(topic, timeout=10).topics.get(topic)
                if tm is not None and tm.error is None and partition in tm.partitions:
                    leader = tm.partitions[partition].leader
                    if leader >= 0:
                        return leader
            if time.monotonic() > deadline:
                raise SecuredClusterError(f"{topic}-{partition} has no leader")
            time.sleep(0.2)

    def partition_isr(self, topic: str, partition: int) -> list[int]:
        tm = self.admin().list_topics(topic, timeout=10).topics[topic]
        return sorted(tm.partitions[partition].isrs)

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The broker coordinating `transactional_id`: the leader of its __transaction_state
        partition (no FindCoordinator call in confluent-kafka's API; the formula is Kafka's)."""
        return self.partition_leader("__transaction_state",
                                     coordinator_partition(transactional_id, TXN_PARTITIONS))

    def group_coordinator(self, group_id: str) -> int:
        """The broker coordinating `group_id`: the leader of its __consumer_offsets partition
        (the same answer as describe_consumer_groups' coordinator, without needing the group
        to exist or DESCRIBE on it)."""
        return self.partition_leader("__consumer_offsets",
                                     coordinator_partition(group_id, OFFSETS_PARTITIONS))

    def elect_preferred_leaders(self) -> None:
        """Move leadership back to the preferred replicas (after a restart, the restarted
        broker leads nothing until this or the periodic rebalance, every 5 min by default)."""
        # No request_timeout/operation_timeout: confluent-kafka 2.16.1's elect_leaders raises
        # SystemError ("more argument specifiers than keyword list entries") with either.
        future = self.admin().elect_leaders(ElectionType.PREFERRED, None)
        with contextlib.suppress(KafkaException):
            future.result(timeout=60)  # per partition: None or ELECTION_NOT_NEEDED

    # -- the Java tools --

    def run_java_tool(self, main_class: str, *args: str,
                      timeout_s: float = 90.0) -> subprocess.CompletedProcess[str]:
        """Run a class from the broker jars (e.g. org.apache.kafka.tools.consumer.ConsoleConsumer)
        with a small heap; output captured, log4j at WARN on stderr."""
        self._need_started()
        cmd = ["java", *TOOL_JVM, f"-Dlog4j2.configurationFile={self._tools_log4j()}",
               "-cp", self._classpath(), main_class, *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)

    def node_ids(self) -> Iterator[int]:
        yield from BROKER_IDS
        yield CONTROLLER_ID
