"""The README stays true: its test command is what CI runs, its reference is the settings'."""

import re
from pathlib import Path

from scripts.gen_readme_reference import render

ROOT = Path(__file__).resolve().parents[2]


def _commands(readme: str) -> list[str]:
    return re.findall(r"```\n(\./scripts/setup\.sh && [^\n]+)\n```", readme)


def test_readme_has_exactly_a_demo_and_a_test_command():
    cmds = _commands((ROOT / "README.md").read_text())
    assert len(cmds) == 2
    assert cmds[0].endswith("logcount demo")
    assert "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command_verbatim():
    test_cmd = _commands((ROOT / "README.md").read_text())[1]
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_cmd in ci_lines


def test_configuration_reference_is_generated_from_the_settings():
    readme = (ROOT / "README.md").read_text()
    assert render(readme) == readme, "run: .venv/bin/python scripts/gen_readme_reference.py"
