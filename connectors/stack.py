"""The embedded stack for machines without Docker: a real Kafka broker, MariaDB, optional Spark.

Every process is started by us with `java`/`mariadbd`/`spark-class`, in its own session, with its
pid in `.stack/<name>/pid` and its output in `.stack/<name>/out.log`. `down` stops only processes
whose pid file we wrote and whose command line still carries our state directory, so a recycled
pid is never killed. `up` is idempotent: a service that answers is left alone.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from logcount.core.backoff import Backoff
from logcount.core.errors import DependencyError, StackError
from logcount.core.paths import jars_dir, state_dir
from logcount.core.retry import Retry, poll, retry

KAFKA_PORT = 9092
KAFKA_CONTROLLER_PORT = 9093
MYSQL_PORT = 3306
SPARK_MASTER_PORT = 7077
HOST = "127.0.0.1"
BOOTSTRAP = f"{HOST}:{KAFKA_PORT}"
SPARK_MASTER_URL = f"spark://{HOST}:{SPARK_MASTER_PORT}"

# Why these timeouts: a cold JVM broker formats and elects itself in 5-15 s on 2 cores; MariaDB's
# first start (after install-db) takes a few seconds. 120 s leaves room for a loaded CI machine
# while still failing a broken start within one test-suite minute budget.
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
# A starting service is probed every half second, a stopping one looked for every 0.2 s.
READY_POLL_S = 0.5
STOP_POLL_S = 0.2


def port_open(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


@dataclass
class Service:
    """One process of the stack; subclasses say how to prepare, start and probe it."""

    name: str
    ports: tuple[int, ...]

    @property
    def dir(self) -> Path:
        return state_dir() / self.name

    @property
    def pid_file(self) -> Path:
        return self.dir / "pid"

    @property
    def log_file(self) -> Path:
        return self.dir / "out.log"

    def pid(self) -> int | None:
        """Our process's pid if it is alive and still ours (command line names our state dir)."""
        try:
            pid = int(self.pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, ValueError):
            return None
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1]
            threads = len(os.listdir(f"/proc/{pid}/task"))
        except (OSError, IndexError):
            return None
        # A zombie (exited, not reaped) is not running; but a JVM whose main thread ended before
        # its other threads shows Z as well, and holds its ports until they end.
        if state == "Z" and threads <= 1:
            return None
        return pid if str(self.dir).encode() in cmdline else None

    # -- to override --
    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """One-time initialisation of the state directory (format storage, install-db)."""

    def probe(self) -> None:
        """Raise unless the service really answers."""
        raise NotImplementedError

    def after_ready(self) -> None:
        """Idempotent configuration once it answers."""

    def check_tools(self) -> None:
        """Raise StackError when a tool or jar the service needs is missing."""

    # -- lifecycle --
    def answers(self) -> bool:
        try:
            self.probe()
        except Exception:
            return False
        return True

    def up(self, log: Callable[[str], None]) -> None:
        if self.pid() is not None and self.answers():
            log(f"{self.name}: already running (pid {self.pid()})")
            return
        if self.pid() is None:
            taken = [p for p in self.ports if port_open(p)]
            if taken:
                raise StackError(
                    f"{self.name}: port {taken[0]} on {HOST} is taken by a process the stack did "
                    f"not start; stop it or free the port"
                )
            self.check_tools()
            self.dir.mkdir(parents=True, exist_ok=True)
            self.prepare()
            with open(self.log_file, "ab") as out:
                proc = subprocess.Popen(
                    self.command(), stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.dir,
                )
            self.pid_file.write_text(str(proc.pid))
            log(f"{self.name}: started (pid {proc.pid}), waiting until it answers")
            self._wait_ready(proc.poll)
        else:
            self._wait_ready(lambda: None if self.pid() is not None else 1)
        self.after_ready()
        log(f"{self.name}: ready")

    def _wait_ready(self, exited: Callable[[], int | None]) -> None:
        gone = StackError(f"{self.name}: exited during start; see {self.log_file}")

        def attempt() -> None:
            if exited() is not None:
                raise gone
            self.probe()

        def verdict(exc: Exception) -> Retry | BaseException:
            if exc is gone:
                return exc
            # any other failure means "not yet"
            return Retry(StackError(f"{self.name}: not answering after {START_TIMEOUT_S:.0f}s "
                                    f"({exc}); see {self.log_file}"))

        retry(attempt, Backoff(READY_POLL_S, give_up_s=START_TIMEOUT_S).begin(), verdict)

    def down(self, log: Callable[[str], None], sig: int = signal.SIGTERM) -> None:
        pid = self.pid()
        if pid is None:
            log(f"{self.name}: not running")
            self.pid_file.unlink(missing_ok=True)
            return
        os.kill(pid, sig)
        poll(lambda: True if self.pid() is None else None,
             Backoff(STOP_POLL_S, give_up_s=STOP_TIMEOUT_S).begin())
        if self.pid() is not None:
            os.kill(pid, signal.SIGKILL)
            while self.pid() is not None:
                time.sleep(0.1)
        self._wait_ports_free()
        self.pid_file.unlink(missing_ok=True)
        log(f"{self.name}: stopped")

    def kill(self) -> None:
        """SIGKILL, for fault tests: no clean shutdown."""
        pid = self.pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            while self.pid() is not None:
                time.sleep(0.05)
            self._wait_ports_free()

    def _wait_ports_free(self) -> None:
        """Until no port of the service answers (at most STOP_TIMEOUT_S): an exiting process's
        command line reads empty, so pid() says it is gone, before its sockets close; a check or
        an `up` right after would find the port still held (seen with the Spark master)."""
        poll(lambda: True if not any(port_open(p) for p in self.ports) else None,
             Backoff(STOP_POLL_S, give_up_s=STOP_TIMEOUT_S).begin())

    def status(self) -> str:
        pid = self.pid()
        if pid is None:
            return f"{self.name}: stopped"
        return f"{self.name}: {'ready' if self.answers() else 'not answering'} (pid {pid})"


def _java() -> str:
    java = shutil.which("java")
    if not java:
        raise StackError("java not found: install a JDK 17 "
                         "(apt-get install openjdk-17-jdk-headless)")
    return java


def _need_jars(name: str) -> Path:
    d = jars_dir() / name
    if not any(d.glob("*.jar")):
        raise StackError(f"jars missing in {d}: run scripts/setup.sh first")
    return d


class Kafka(Service):
    """A single-node KRaft Kafka broker (broker + controller in one JVM)."""

    def __init__(self) -> None:
        super().__init__("kafka", (KAFKA_PORT, KAFKA_CONTROLLER_PORT))

    def check_tools(self) -> None:
        _java()
        _need_jars("kafka")

    def _properties(self) -> str:
        return f"""\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@{HOST}:{KAFKA_CONTROLLER_PORT}
listeners=PLAINTEXT://{HOST}:{KAFKA_PORT},CONTROLLER://{HOST}:{KAFKA_CONTROLLER_PORT}
advertised.listeners=PLAINTEXT://{HOST}:{KAFKA_PORT}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={self.dir / 'data'}
num.partitions=1
# One node: internal topics default to replication factor 3 / min ISR 2 and would never be
# created, so transactions would never initialise. RF 1 means no durability across disk loss:
# production clusters want RF 3 and min ISR 2.
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
# Topics are created on purpose, with the settings the stage checks (compaction); a typo in a
# topic name should fail loudly rather than create a new empty topic.
auto.create.topics.enable=false
# No reason to wait for more members on a one-node test broker.
group.initial.rebalance.delay.ms=0
# The broker aborts a transaction left open longer than this; the stage asks for 60 s.
transaction.max.timeout.ms=900000
# Compaction of the output topic is visible quickly in tests.
log.cleaner.backoff.ms=1000
"""

    def _log4j(self) -> str:
        return """\
Configuration:
  name: logcount-kafka
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.coordinator.transaction
        level: WARN
      - name: org.apache.kafka.storage
        level: WARN
      - name: kafka.log.LogCleaner
        level: WARN
"""

    def _jvm(self) -> list[str]:
        return [
            _java(), "-Xms256m", "-Xmx1g", "-XX:+UseG1GC",
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.yaml'}",
            "-cp", str(_need_jars("kafka") / "*"),
        ]

    def prepare(self) -> None:
        (self.dir / "server.properties").write_text(self._properties())
        (self.dir / "log4j2.yaml").write_text(self._log4j())
        if not (self.dir / "data" / "meta.properties").exists():
            cluster_id = _kafka_cluster_id()
            subprocess.run(
                [*self._jvm(), "kafka.tools.StorageTool", "format", "-t", cluster_id,
                 "-c", str(self.dir / "server.properties"), "--ignore-formatted"],
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )

    def command(self) -> list[str]:
        return [*self._jvm(), "kafka.Kafka", str(self.dir / "server.properties")]

    def probe(self) -> None:
        from logcount.connectors.kafka_io import transactional_round_trip

        if not port_open(KAFKA_PORT):  # no client (and no client log noise) before the port opens
            raise DependencyError("kafka port closed")
        transactional_round_trip(BOOTSTRAP, timeout_s=10.0)


def _kafka_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, base64url without padding (as kafka-storage makes)."""
    import base64

    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        # The storage tool's argument parser takes an id starting with '-' for an option (one
        # random id in 64): draw again.
        if not cid.startswith("-"):
            return cid


def _mariadbd() -> str:
    path = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
    if not os.access(path, os.X_OK):
        raise StackError("mariadbd not found: run scripts/setup.sh (installs mariadb-server)")
    return path


class MariaDB(Service):
    """A MariaDB server on 127.0.0.1:3306 with its own data directory."""

    def __init__(self) -> None:
        super().__init__("mariadb", (MYSQL_PORT,))

    @property
    def socket_path(self) -> Path:
        return self.dir / "mysqld.sock"

    def check_tools(self) -> None:
        _mariadbd()
        if not shutil.which("mariadb-install-db"):
            raise StackError("mariadb-install-db not found: run scripts/setup.sh")

    def _user(self) -> list[str]:
        # mariadbd refuses to run as root unless told to; on our machines we are root.
        return ["--user=root"] if os.geteuid() == 0 else []

    def prepare(self) -> None:
        data = self.dir / "data"
        if (data / "mysql").exists():
            return
        # A bootstrap that died part way leaves a `mysql` folder the next start would trust (seen
        # once, four stacks starting at once, its reason unprinted): begin anew, twice at most.
        for _ in range(2):
            shutil.rmtree(data, ignore_errors=True)
            r = subprocess.run(
                ["mariadb-install-db", "--no-defaults", f"--datadir={data}",
                 "--auth-root-authentication-method=normal", "--skip-test-db", *self._user()],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode == 0:
                return
        shutil.rmtree(data, ignore_errors=True)
        last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise StackError(f"mariadb-install-db failed twice (exit {r.returncode}): {last[:300]}")

    def command(self) -> list[str]:
        return [
            _mariadbd(), "--no-defaults", f"--datadir={self.dir / 'data'}",
            f"--port={MYSQL_PORT}", f"--bind-address={HOST}", f"--socket={self.socket_path}",
            f"--pid-file={self.dir / 'mariadbd.pid'}", "--skip-name-resolve",
            "--character-set-server=utf8mb4", "--collation-server=utf8mb4_unicode_ci",
            "--innodb-buffer-pool-size=256M", "--max-connections=500", *self._user(),
        ]

    def probe(self) -> None:
        import pymysql

        conn = pymysql.connect(unix_socket=str(self.socket_path), user="root", password="",
                               connect_timeout=2)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT 1")
        finally:
            conn.close()

    def after_ready(self) -> None:
        import pymysql

        # Debian's MariaDB logs root in by unix socket only. The embedded stack (never a
        # production server) lets root in over TCP from loopback with an empty password, as the
        # contract's default --mysql-url expects.
        conn = pymysql.connect(unix_socket=str(self.socket_path), user="root", password="",
                               autocommit=True)
        try:
            with conn.cursor() as cur:
                for host in ("127.0.0.1", "::1"):
                    cur.execute(f"CREATE USER IF NOT EXISTS 'root'@'{host}' IDENTIFIED BY ''")
                    cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO 'root'@'{host}' WITH GRANT OPTION")
                cur.execute("CREATE DATABASE IF NOT EXISTS logcount")
        finally:
            conn.close()
        # The real check: the contract's URL works over TCP.
        conn = pymysql.connect(host=HOST, port=MYSQL_PORT, user="root", password="",
                               database="logcount", connect_timeout=5)
        conn.close()


class SparkMaster(Service):
    """A Spark standalone master from the pyspark wheel's spark-class."""

    def __init__(self) -> None:
        super().__init__("spark-master", (SPARK_MASTER_PORT, 8080))

    def check_tools(self) -> None:
        _java()
        _spark_class()

    def prepare(self) -> None:
        # Also what puts our state dir on the master's command line, which is how pid() and
        # `down` recognise the process as ours (the workers have it through --work-dir).
        (self.dir / "spark-master.conf").write_text("spark.master.rest.enabled false\n")

    def command(self) -> list[str]:
        return [_spark_class(), "org.apache.spark.deploy.master.Master", "--host", HOST,
                "--port", str(SPARK_MASTER_PORT), "--webui-port", "8080",
                "--properties-file", str(self.dir / "spark-master.conf")]

    def probe(self) -> None:
        if not port_open(SPARK_MASTER_PORT):
            raise DependencyError("spark master port closed")
        _spark_master_state(expect_workers=0)


class SparkWorker(Service):
    """A Spark standalone worker with one core, attached to the master."""

    def __init__(self, index: int) -> None:
        self.index = index
        super().__init__(f"spark-worker-{index}", (8081 + index,))

    def check_tools(self) -> None:
        _spark_class()

    def command(self) -> list[str]:
        return [_spark_class(), "org.apache.spark.deploy.worker.Worker", SPARK_MASTER_URL,
                "--host", HOST, "--cores", "1", "--memory", "2g",
                "--webui-port", str(8081 + self.index), "--work-dir", str(self.dir / "work")]

    def probe(self) -> None:
        if not port_open(8081 + self.index):
            raise DependencyError("worker UI port closed")
        _spark_master_state(expect_workers=self.index + 1)


def _spark_class() -> str:
    import pyspark

    path = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not path.exists():
        raise StackError(f"{path} missing: is pyspark installed in .venv?")
    return str(path)


def _spark_master_state(expect_workers: int) -> None:
    import json
    import urllib.request

    with urllib.request.urlopen(f"http://{HOST}:8080/json/", timeout=2) as resp:
        state = json.load(resp)
    alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
    if len(alive) < expect_workers:
        raise DependencyError(f"{len(alive)} of {expect_workers} Spark workers alive")


def services(spark_cluster: bool = False) -> list[Service]:
    out: list[Service] = [Kafka(), MariaDB()]
    if spark_cluster:
        out += [SparkMaster(), SparkWorker(0), SparkWorker(1)]
    return out


def all_services() -> list[Service]:
    return services(spark_cluster=True)


def up(spark_cluster: bool = False, log: Callable[[str], None] = print) -> None:
    for svc in services(spark_cluster):
        svc.up(log)


def down(log: Callable[[str], None] = print) -> None:
    # Workers before the master, the broker last-but-one: reverse start order.
    for svc in reversed(all_services()):
        svc.down(log)


def status() -> list[str]:
    return [svc.status() for svc in all_services()]
