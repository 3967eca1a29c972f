#!/usr/bin/env bash
# Debian's kcat, for the README's signed-command example (tests/e2e/command-auth.e2e.ts runs it as printed).
#
#   bash deploy/local/ensure-kcat.sh     install it with apt-get when it is missing; print its version
set -euo pipefail

say() { printf '[kcat] %s\n' "$*"; }
die() { printf '[kcat] ERROR: %s\n' "$*" >&2; exit 1; }

# shellcheck source=deploy/local/apt-package.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt-package.sh"

if ! command -v kcat >/dev/null 2>&1; then
  apt_install_for kcat kcat kcat
  command -v kcat >/dev/null 2>&1 || die "apt-get installed kcat but it is still not on PATH"
fi
say "$(kcat -V 2>&1 | head -n 1)"
