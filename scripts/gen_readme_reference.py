"""Rewrite the README's configuration reference from logcount/core/settings/ (reference.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from logcount.core.settings import reference_markdown

BEGIN, END = "<!-- BEGIN CONFIG REFERENCE -->", "<!-- END CONFIG REFERENCE -->"


def render(readme: str) -> str:
    block = f"{BEGIN}\n{reference_markdown()}\n{END}"
    return re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, readme,
                  flags=re.S)


if __name__ == "__main__":
    path = Path(__file__).resolve().parents[1] / "README.md"
    path.write_text(render(path.read_text()))
    sys.exit(0)
