"""The one error hierarchy of logcount, documented in one place.

    LogcountError                 every error we raise on purpose; the CLI prints one line
    ├── ConfigError               bad flag, env var or URL, a missing extra      -> exit 2
    │   └── StateRefused          the state and the cluster disagree beyond repair: nothing is
    │                             published, the line points at `logcount state show` -> exit 2
    ├── StackError                embedded stack cannot start (port taken, tool missing) -> exit 2
    ├── DependencyError           broker or MySQL unreachable / refusing us      -> exit 1
    │   └── ComputeError          the Spark job failed (its error or the JVM's): nothing was
    │                             published, the batch is planned again
    ├── TopicChangedError         the sink's topic is not the one MySQL's offsets are of -> exit 1
    └── KafkaClientError          a librdkafka error, classified as librdkafka does:
        ├── RetriableKafkaError   retriable(): call the same operation again
        ├── AbortableKafkaError   txn_requires_abort(): abort, re-plan, redo the batch
        └── FatalKafkaError       fatal(): this producer is dead               -> exit 1
            ├── FencedError       a newer instance owns the transactional.id   -> exit 1
            │   └── TakenOverError  a hung instance came back to find another one took
            │                     its transactional.id: it publishes nothing       -> exit 1
            ├── AuthorizationError  the cluster denied us (ACLs, credentials)  -> exit 1
            └── HungClientError   a librdkafka call did not return past its own timeout: the
                                  stage replaces its Kafka clients once (fencing the hung one)
                                  unless another instance took over; again -> exit 1

A counting setting the formats cannot use is a `FormatError` (logcount/formats/spec.py, a
ValueError of the floor beneath this one); the settings turn it into a ConfigError where read.

`classify()` maps a confluent_kafka.KafkaException onto the KafkaClientError branch;
`kafka_error()` finds that exception behind what confluent-kafka actually raised.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

__all__ = [
    "AbortableKafkaError",
    "AuthorizationError",
    "ComputeError",
    "ConfigError",
    "DependencyError",
    "FatalKafkaError",
    "FencedError",
    "HungClientError",
    "KafkaClientError",
    "LogcountError",
    "RetriableKafkaError",
    "SHOW_HINT",
    "StackError",
    "StateRefused",
    "TakenOverError",
    "TopicChangedError",
    "classify",
    "denied",
    "kafka_error",
]


class LogcountError(Exception):
    """Base of every error logcount raises on purpose."""

    exit_code = 1


class ConfigError(LogcountError):
    """Bad usage or configuration: a flag, an environment variable, a URL, a topic setting."""

    exit_code = 2


# Every refusal line ends pointing at the one way to look at the state itself.
SHOW_HINT = "; `logcount state show` with this run's flags shows the state"


class StateRefused(ConfigError):
    """State and cluster disagree in a way no repair makes exact: exit 2, nothing published."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason + SHOW_HINT)


class StackError(LogcountError):
    """The embedded stack cannot be started here (a port is taken, java/mvn/mariadbd missing)."""

    exit_code = 2


class DependencyError(LogcountError):
    """A dependency (Kafka broker, MySQL) is unreachable or refuses us."""


class ComputeError(DependencyError):
    """The Spark job failed (a failed or cancelled job, a Java exception, a JVM that is gone):
    raised by the Spark adapter (pipeline/compute.py) in place of pyspark's and py4j's errors."""


class TopicChangedError(LogcountError):
    """The topic's id in MySQL is not the one this sink checked: it read another incarnation."""


class KafkaClientError(LogcountError):
    """A librdkafka error, classified. `.error` is the original KafkaError."""

    def __init__(self, message: str, error: KafkaError | None = None) -> None:
        super().__init__(message)
        self.error = error


class RetriableKafkaError(KafkaClientError):
    """Transient: the same call may be repeated."""


class AbortableKafkaError(KafkaClientError):
    """The open transaction must be aborted; the batch is then re-planned and redone."""


class FatalKafkaError(KafkaClientError):
    """The producer can do nothing more; the process exits."""


class FencedError(FatalKafkaError):
    """Another instance with the same transactional.id has started: we are the zombie."""


class TakenOverError(FencedError):
    """This instance's Kafka call hung, and meanwhile another instance took the transactional
    id (its claim is in the state topic): replacing the hung clients would fence the newer one,
    so this one exits without publishing."""


class HungClientError(FatalKafkaError):
    """A librdkafka call did not return past its own timeout: nothing more can be done through
    that client, not even an abort. A new producer with the same transactional.id fences it and
    settles its transaction, as a restart's would. `.call` names the call (a metric label)."""

    def __init__(self, message: str, call: str = "") -> None:
        super().__init__(message)
        self.call = call


class AuthorizationError(FatalKafkaError):
    """The cluster refused us: a missing ACL or bad credentials. Waiting does not help: exit."""


# Denials by ACL, and failed logins: the same request would be refused again, so they are never
# retried nor turned into an aborted batch that is then re-planned in a loop.
_DENIED = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "group",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "transactional id",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "cluster",
    KafkaError.SASL_AUTHENTICATION_FAILED: "login",
    KafkaError._AUTHENTICATION: "login",
}


def denied(err: KafkaError | None, doing: str, resource: str = "") -> AuthorizationError | None:
    """An AuthorizationError naming what was denied, if `err` is a denial; else None."""
    if err is None or err.code() not in _DENIED:
        return None
    kind = _DENIED[err.code()]
    what = f"{kind} {resource}".strip() if kind != "login" else "the login (user or password)"
    hint = ("check the client's user and password" if kind == "login" else
            "grant the ACLs listed in docs/deploy.md to the client's principal")
    return AuthorizationError(f"{doing}: not authorized: {what} ({err.str()}); {hint}", err)


_FENCED_CODES = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


def kafka_error(exc: BaseException) -> KafkaException | None:
    """The KafkaException behind `exc`: itself, or the one confluent-kafka left set when a call
    returned anyway, which Python reports as a SystemError caused by it (seen with a fenced
    producer's flush). None for anything else, which is a bug to show, not a Kafka error to
    classify."""
    if isinstance(exc, KafkaException):
        return exc
    if isinstance(exc, SystemError) and isinstance(exc.__cause__, KafkaException):
        return exc.__cause__
    return None


def classify(exc: KafkaException, doing: str) -> KafkaClientError:
    """Map a KafkaException raised while `doing` something onto our hierarchy.

    Order matters: librdkafka can flag an error both retriable and abortable; abort wins,
    because retrying inside a transaction the broker has already doomed cannot succeed.
    Fenced is checked first since a fenced producer also reports fatal().
    """
    err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if err is None:
        return FatalKafkaError(f"{doing}: {exc}")
    text = f"{doing}: {err.name()}: {err.str()}"
    if err.code() in _FENCED_CODES:
        return FencedError(
            f"{doing}: this producer was fenced ({err.name()}): a newer instance with the same "
            f"transactional.id took over, or the broker aborted our transaction after "
            f"transaction.timeout.ms; restart to resume from the committed offsets",
            err,
        )
    refused = denied(err, doing)
    if refused is not None:
        return refused
    if err.fatal():
        return FatalKafkaError(text, err)
    if err.txn_requires_abort():
        return AbortableKafkaError(text, err)
    if err.retriable():
        return RetriableKafkaError(text, err)
    # Neither retriable nor abortable nor fatal (e.g. a timeout on a non-transactional call):
    # treat it as abortable, the one safe answer inside a transaction loop.
    return AbortableKafkaError(text, err)
