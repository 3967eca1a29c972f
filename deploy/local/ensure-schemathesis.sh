#!/usr/bin/env bash
# schemathesis (from PyPI) in its own venv, for the OpenAPI e2e test that fuzzes the gateway.
#
#   bash deploy/local/ensure-schemathesis.sh     install it when it is missing; print its version
#
# SCHEMATHESIS_VENV overrides the venv (default .stack/opt/schemathesis-venv); the test reads the same variable.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${SCHEMATHESIS_VENV:-$REPO_ROOT/.stack/opt/schemathesis-venv}"
# The 4.x line: its CLI flags and check names are what the test passes.
SPEC='schemathesis>=4.3,<5'
say() { printf '[schemathesis] %s\n' "$*"; }
die() { printf '[schemathesis] ERROR: %s\n' "$*" >&2; exit 1; }

if ! "$VENV/bin/st" --version >/dev/null 2>&1; then
  command -v python3 >/dev/null 2>&1 || die "python3 is missing: install Python 3.9 or newer"
  say "creating $VENV"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  say "pip install $SPEC"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "$SPEC" || die "pip could not install $SPEC"
  "$VENV/bin/st" --version >/dev/null 2>&1 || die "$VENV/bin/st does not run after the install"
fi
say "$("$VENV/bin/st" --version)"
