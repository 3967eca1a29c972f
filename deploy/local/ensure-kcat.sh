#!/usr/bin/env bash
# Debian's kcat, for the README's signed-command example (tests/e2e/command-auth.e2e.ts runs it as printed).
#
#   bash deploy/local/ensure-kcat.sh     install it with apt-get when it is missing; print its version
set -euo pipefail

say() { printf '[kcat] %s\n' "$*"; }
die() { printf '[kcat] ERROR: %s\n' "$*" >&2; exit 1; }

if ! command -v kcat >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || die "kcat is missing and there is no apt-get: install kcat by hand"
  [ "$(id -u)" = 0 ] || die "kcat is missing: run 'apt-get install -y kcat' as root"
  say "apt-get update"
  apt-get update -qq >/dev/null
  say "installing Debian package: kcat"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kcat >/dev/null
  command -v kcat >/dev/null 2>&1 || die "apt-get installed kcat but it is still not on PATH"
fi
say "$(kcat -V 2>&1 | head -n 1)"
