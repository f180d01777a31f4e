"""Free loopback ports."""

from __future__ import annotations

import random
import socket
from pathlib import Path

HOST = "127.0.0.1"


def free_port(host: str = HOST) -> int:
    """A port the kernel says is free now (from the ephemeral range)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def free_ports(n: int, host: str = HOST) -> list[int]:
    """`n` distinct loopback ports free now, picked below the kernel's ephemeral range: a broker
    restarted on its old port must not find it taken by some client's outgoing connection, which
    would get its local port from the ephemeral range (binding port 0 picks from there too)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.SystemRandom()
    held: list[socket.socket] = []
    try:
        for _ in range(2000):
            if len(held) == n:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((host, rng.randrange(20000, low) if low > 21000 else 0))
            except OSError:
                s.close()
                continue
            held.append(s)
        if len(held) < n:
            raise OSError(f"no {n} free ports on {host}")
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()
