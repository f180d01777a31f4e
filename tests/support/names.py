"""Unique names, so tests share one broker and one MySQL without meeting."""

from __future__ import annotations

import uuid
from dataclasses import dataclass


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Names:
    """Unique topic, group, transactional id and database names for one test."""

    prefix: str

    @classmethod
    def unique(cls, tag: str) -> Names:
        return cls(unique(f"t-{tag}"))

    def topic(self, role: str) -> str:
        return f"{self.prefix}-{role}"

    @property
    def group(self) -> str:
        return f"{self.prefix}-group"

    @property
    def txn_id(self) -> str:
        return f"{self.prefix}-txn"

    @property
    def database(self) -> str:
        return self.prefix.replace("-", "_")
