#!/usr/bin/env bash
# Debian's Chromium for the browser tests (playwright-core drives it; no browser download of its own).
#
#   bash deploy/local/ensure-chromium.sh     install it with apt-get when it is missing; print its version
#
# CHROMIUM_PATH overrides where it is looked for (default /usr/bin/chromium, Debian's package).
set -euo pipefail

CHROMIUM_PATH="${CHROMIUM_PATH:-/usr/bin/chromium}"
say() { printf '[chromium] %s\n' "$*"; }
die() { printf '[chromium] ERROR: %s\n' "$*" >&2; exit 1; }

# shellcheck source=deploy/local/apt-package.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt-package.sh"

if [ ! -x "$CHROMIUM_PATH" ]; then
  apt_install_for chromium "$CHROMIUM_PATH" chromium fonts-liberation
  [ -x "$CHROMIUM_PATH" ] || die "apt-get installed chromium but $CHROMIUM_PATH is still missing"
fi
say "$("$CHROMIUM_PATH" --version 2>/dev/null || echo "$CHROMIUM_PATH")"
