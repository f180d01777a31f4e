"""A toxiproxy server for tests: TCP proxies whose links can be cut, blackholed, reset or slowed.

`scripts/setup.sh` builds the server into `.cache/bin/toxiproxy-server` (v2.5.0) when Go is
installed; `binary()` is None otherwise and the tests that need it skip. Toxics act on live
connections as well as new ones.

Plain Python (no pytest), stdlib only: the server's HTTP API through `urllib.request`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from logcount.core.paths import home
from tests.support.cluster import die_with_parent  # the nodes' own: killed with the tests
from tests.support.ports import free_port

HOST = "127.0.0.1"
_STREAMS = (("up", "upstream"), ("down", "downstream"))



def binary() -> Path | None:
    """The server built by scripts/setup.sh, or None when it is not there."""
    path = home() / ".cache" / "bin" / "toxiproxy-server"
    return path if path.is_file() else None


class _Api:
    """JSON over HTTP to one server; a non-2xx answer raises RuntimeError with status and body."""

    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: dict[str, Any] | None = None,
             timeout: float = 10) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
                is_json = resp.headers.get_content_type() == "application/json"
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace").strip()
            raise RuntimeError(
                f"toxiproxy: {method} {path} -> HTTP {exc.code}: {detail}") from None
        if not is_json:  # /version is plain text ("git" for a `go install` build)
            return raw.decode(errors="replace").strip() or None
        return json.loads(raw)


class Proxy:
    """One proxy: clients connect to `listen` (host:port actually bound), it forwards to
    `upstream`. "upstream" is the client-to-server direction, "downstream" the way back."""

    def __init__(self, api: _Api, name: str, listen: str, upstream: str) -> None:
        self._api = api
        self.name = name
        self.listen = listen
        self.upstream = upstream

    def __repr__(self) -> str:
        return f"Proxy({self.name!r}, listen={self.listen!r}, upstream={self.upstream!r})"

    def _toxic(self, name: str, kind: str, stream: str, **attributes: int) -> None:
        self._api.call("POST", f"/proxies/{self.name}/toxics",
                       {"name": name, "type": kind, "stream": stream, "attributes": attributes})

    def blackhole(self) -> None:
        """A partition as a client sees it: data both ways is dropped (discarded, not held back),
        connections stay open, new ones are accepted but carry nothing. Removing these toxics
        (`heal`, `heal_all`) closes every connection that lived under them (FIN both ways):
        toxiproxy 2.5.0's `timeout` toxic closes its stub on clean-up, so no stream resumes
        with a gap; clients must reconnect."""
        for short, stream in _STREAMS:
            self._toxic(f"blackhole-{short}", "timeout", stream, timeout=0)

    def reset(self) -> None:
        """Connections are reset (RST) as soon as data flows either way."""
        for short, stream in _STREAMS:
            self._toxic(f"reset-{short}", "reset_peer", stream, timeout=0)

    def latency(self, ms: int, jitter: int = 0) -> None:
        """Delay data on its way back (downstream) by `ms` (+/- `jitter`) ms, so each request/
        response round trip takes `ms` longer; the upstream direction is not slowed."""
        self._toxic("latency", "latency", "downstream", latency=ms, jitter=jitter)

    def heal(self) -> None:
        """Remove every toxic of this proxy: new connections work again; those that lived under
        a `blackhole` are closed (see there)."""
        for toxic in self._api.call("GET", f"/proxies/{self.name}/toxics"):
            self._api.call("DELETE", f"/proxies/{self.name}/toxics/{toxic['name']}")

    def disable(self) -> None:
        """Close every connection through the proxy and refuse new ones (a cut cable)."""
        self._api.call("POST", f"/proxies/{self.name}", {"enabled": False})

    def enable(self) -> None:
        """Listen again, on the same address."""
        self._api.call("POST", f"/proxies/{self.name}", {"enabled": True})


class Toxiproxy:
    """A toxiproxy server on 127.0.0.1, started by `start` in its own process group and killed
    by `stop` (or at exit; with PR_SET_PDEATHSIG too, when started from the main thread)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._api = _Api("")

    @property
    def url(self) -> str:
        return self._api.url

    def start(self, workdir: Path, timeout: float = 30) -> None:
        """Start the server (output to workdir/toxiproxy.log); return once its API answers."""
        exe = binary()
        if exe is None:
            raise RuntimeError("toxiproxy-server not built: run scripts/setup.sh (needs Go)")
        if self.proc is not None:
            raise RuntimeError("toxiproxy already started")
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port(HOST)
        self._api = _Api(f"http://{HOST}:{self.port}")
        in_main = threading.current_thread() is threading.main_thread()
        with open(workdir / "toxiproxy.log", "ab") as log:
            self.proc = subprocess.Popen(
                [str(exe), "-host", HOST, "-port", str(self.port)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=die_with_parent if in_main else None)
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.stop()
                raise RuntimeError(f"toxiproxy exited with {code}: see {workdir}/toxiproxy.log")
            try:
                self._api.call("GET", "/version", timeout=1)
                return
            except (OSError, RuntimeError):
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"toxiproxy API not up on {self.url} after {timeout} s: "
                                       f"see {workdir}/toxiproxy.log") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM the server's process group, SIGKILL after 5 s. Idempotent."""
        proc, self.proc = self.proc, None
        atexit.unregister(self.stop)
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def create(self, name: str, listen: str, upstream: str) -> Proxy:
        """A new enabled proxy. `listen` may have port 0: the server binds a free port, and the
        returned Proxy's `listen` is the address actually bound (it keeps that port when
        disabled and enabled again)."""
        got = self._api.call("POST", "/proxies", {"name": name, "listen": listen,
                                                  "upstream": upstream, "enabled": True})
        return Proxy(self._api, name, got["listen"], got["upstream"])

    def heal_all(self) -> None:
        """Remove every toxic of every proxy and enable them all (closes blackholed connections
        as `Proxy.heal` does)."""
        self._api.call("POST", "/reset")
