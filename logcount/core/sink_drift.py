"""The sink's drift rule: do the offsets MySQL holds belong to the output topic as it is now?

MySQL's offsets are of one incarnation of the topic, whose id is kept beside them. A recreated
topic (another id, or offsets beyond its end when no id was kept) or a truncated log (same id,
offsets beyond its end) makes them stale: kept, they would silently skip the topic's records.
"""

from __future__ import annotations

from collections.abc import Mapping


def topic_drift(stored_id: str | None, stored: Mapping[int, int], current_id: str | None,
                ends: Mapping[int, int]) -> str | None:
    """Why MySQL's offsets do not belong to the topic as it is now, or None when they do.

    `stored_id`/`stored`: the topic id and next offsets per partition in MySQL; `current_id`/
    `ends`: the topic's id and end offsets (high watermarks) per partition now. The text
    completes "topic NAME ...".
    """
    if stored_id is not None and current_id is not None and stored_id != current_id:
        return f"was recreated (id {stored_id} in MySQL, {current_id} now)"
    beyond = [f"partition {p} at {o} in MySQL, " + (f"its end is {ends[p]}" if p in ends
                                                    else "no such partition now")
              for p, o in sorted(stored.items()) if p not in ends or o > ends[p]]
    if not beyond:
        return None
    if stored_id is None:
        return (f"was recreated (no topic id in MySQL, and its offsets are beyond the topic's "
                f"end: {'; '.join(beyond)})")
    return (f"lost records (same topic id, but MySQL's offsets are beyond its end: "
            f"{'; '.join(beyond)}; was the log truncated?)")
