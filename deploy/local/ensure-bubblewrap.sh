#!/usr/bin/env bash
# Debian's bubblewrap, the sandbox every `exec` tool call runs in (AGENTRUN_EXEC_SANDBOX=bwrap, the
# default), and util-linux's prlimit and setpriv beside it. `npm start` and `npm test` call this.
#
#   bash deploy/local/ensure-bubblewrap.sh     install it with apt-get when it is missing; check that it
#                                              can make a sandbox here (user namespaces); print its version
set -euo pipefail

say() { printf '[bubblewrap] %s\n' "$*"; }
die() { printf '[bubblewrap] ERROR: %s\n' "$*" >&2; exit 1; }

# shellcheck source=deploy/local/apt-package.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt-package.sh"

if ! command -v bwrap >/dev/null 2>&1; then
  apt_install_for bubblewrap bwrap bubblewrap
  command -v bwrap >/dev/null 2>&1 || die "apt-get installed bubblewrap but bwrap is still not on PATH"
fi
for tool in prlimit setpriv; do command -v "$tool" >/dev/null 2>&1 || die "$tool (util-linux) is missing"; done
# The sandbox needs a user namespace; a kernel or a container that refuses them is reported, not fatal:
# the workers then leave `exec` out and say why at startup.
if out="$(env -i PATH=/usr/bin:/bin bwrap --unshare-all --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 /usr/bin/true 2>&1)"; then
  say "$(bwrap --version) (a sandbox starts here)"
else
  say "$(bwrap --version), but it cannot make a sandbox here: $out"
fi
