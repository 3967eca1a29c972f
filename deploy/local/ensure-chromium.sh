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

if [ ! -x "$CHROMIUM_PATH" ]; then
  command -v apt-get >/dev/null 2>&1 || die "$CHROMIUM_PATH is missing and there is no apt-get: install Chromium by hand"
  [ "$(id -u)" = 0 ] || die "$CHROMIUM_PATH is missing: run 'apt-get install -y chromium' as root"
  say "apt-get update"
  apt-get update -qq >/dev/null
  say "installing Debian package: chromium"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null
  [ -x "$CHROMIUM_PATH" ] || die "apt-get installed chromium but $CHROMIUM_PATH is still missing"
fi
say "$("$CHROMIUM_PATH" --version 2>/dev/null || echo "$CHROMIUM_PATH")"
