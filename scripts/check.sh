#!/usr/bin/env bash
# The contributor's quick check, within two minutes on two cores: lint, type check, unit tier.
# Needs the set-up once (./scripts/setup.sh); the whole suite is scripts/run_tests.py.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/python scripts/typecheck.py
.venv/bin/pytest -q -p no:cacheprovider tests/unit "$@"
