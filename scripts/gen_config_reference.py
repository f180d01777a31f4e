"""Rewrite the configuration reference in docs/configuration.md from logcount/core/settings/
(reference.py), between its BEGIN and END markers."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from logcount.core.settings import reference_markdown

BEGIN, END = "<!-- BEGIN CONFIG REFERENCE -->", "<!-- END CONFIG REFERENCE -->"
TARGET = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def render(text: str) -> str:
    block = f"{BEGIN}\n{reference_markdown()}\n{END}"
    return re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text,
                  flags=re.S)


if __name__ == "__main__":
    text = TARGET.read_text()
    if BEGIN not in text or END not in text:
        sys.exit(f"{TARGET}: the {BEGIN} / {END} markers are missing")
    TARGET.write_text(render(text))
    sys.exit(0)
