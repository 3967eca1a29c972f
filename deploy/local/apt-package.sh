# Sourced by the deploy/local/ensure-*.sh scripts: installs Debian packages a tool needs.
#
#   apt_install_for TAG WHAT PACKAGE...   as root, `apt-get update` and install the packages (without
#                                         recommends), saying so under [TAG]; anywhere else, exit 1 with
#                                         the command to run (WHAT names what was found missing)
apt_install_for() {
  local tag="$1" what="$2"
  shift 2
  if ! command -v apt-get >/dev/null 2>&1; then
    printf '[%s] ERROR: %s is missing and there is no apt-get: install %s by hand\n' "$tag" "$what" "$*" >&2
    exit 1
  fi
  if [ "$(id -u)" != 0 ]; then
    printf "[%s] ERROR: %s is missing: run 'apt-get install -y %s' as root\n" "$tag" "$what" "$*" >&2
    exit 1
  fi
  printf '[%s] apt-get update\n' "$tag"
  apt-get update -qq >/dev/null
  printf '[%s] installing Debian package(s): %s\n' "$tag" "$*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
