#!/usr/bin/env bash
# schemathesis (from PyPI) in its own venv, for the OpenAPI e2e test that fuzzes the gateway.
#
#   bash deploy/local/ensure-schemathesis.sh     install it when it is missing or not the pinned one; print its version
#
# SCHEMATHESIS_VENV overrides the venv (default .stack/opt/schemathesis-venv); the test reads the same variable.
# SCHEMATHESIS_PYTHON overrides the interpreter the venv is made from.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${SCHEMATHESIS_VENV:-$REPO_ROOT/.stack/opt/schemathesis-venv}"
# Pinned: the test passes this version's CLI flags, reads its JSON and NDJSON reports, and runs its
# coverage and stateful phases, whose output changes from release to release.
VERSION='4.32.5'
SPEC="schemathesis==$VERSION"
say() { printf '[schemathesis] %s\n' "$*"; }
die() { printf '[schemathesis] ERROR: %s\n' "$*" >&2; exit 1; }

# The newest Python here, 3.13 first: under CPython 3.11 (3.11.7 tested) the coverage phase's workers race in
# ast.parse (Hypothesis describing a filter) and the run stops with "SystemError: AST constructor recursion
# depth mismatch". 3.13.0 ran it cleanly with four workers; an older one is taken only when nothing newer is here.
pick_python() {
  if [ -n "${SCHEMATHESIS_PYTHON:-}" ]; then echo "$SCHEMATHESIS_PYTHON"; return; fi
  local candidate
  # pyenv's shims answer only for its selected versions, so its installed ones are named by path too.
  for candidate in python3.13 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python3.13 python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys, venv; sys.exit(sys.version_info < (3, 9))' >/dev/null 2>&1; then
      echo "$candidate"
      return
    fi
  done
  die "no python3 (3.9 or newer) found: install Python 3.13 (or 3.9 or newer)"
}
PYTHON="$(pick_python)"
WANT_PY="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

installed() {
  "$VENV/bin/st" --version 2>/dev/null | grep -qx "st, version $VERSION" || return 1
  [ "$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$WANT_PY" ]
}

if ! installed; then
  if [ -d "$VENV" ]; then
    say "replacing $VENV (not schemathesis $VERSION on Python $WANT_PY)"
    rm -rf "$VENV"
  fi
  say "creating $VENV with $PYTHON (Python $WANT_PY)"
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV" || die "$PYTHON -m venv failed (Debian: apt-get install python3-venv)"
  say "pip install $SPEC"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "$SPEC" || die "pip could not install $SPEC"
  installed || die "$VENV/bin/st does not run as schemathesis $VERSION after the install"
fi
say "$("$VENV/bin/st" --version) on Python $("$VENV/bin/python" -c 'import platform; print(platform.python_version())')"
