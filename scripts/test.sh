#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: checks the tools the tests drive for real (git,
# kustomize or kubectl, kustomize's library, Helm, an OCI registry, buildah, chromium), starts
# PostgreSQL
# when it is down, then runs every test once.
set -euo pipefail
cd "$(dirname "$0")/.."

need() { command -v "$1" >/dev/null 2>&1; }
need git || { echo "git is required" >&2; exit 1; }
need kustomize || need kubectl || { echo "kustomize (or kubectl, which embeds it) is required" >&2; exit 1; }
# kustomize's library (pinned, checksummed) for the worker pool; the tests fail without it.
scripts/fetch-kustomize-lib.sh >/dev/null
# The pinned Helm binaries (v4, and v3 for clusters on Flux 2.7 or older); the tests fail without them.
scripts/fetch-helm.sh 4 >/dev/null
scripts/fetch-helm.sh 3 >/dev/null

# Debian packages the tests drive for real, installed when missing (as root, with apt-get): an OCI
# registry for chart tests (the tests start it on loopback), buildah for the image tests
# (scripts/build-image.sh; vfs storage, chroot isolation) and a real browser for the run page test
# (chromium, headless), the openssl command that makes the chart-over-TLS tests' private CA
# and certificates, and htpasswd (apache2-utils) for the logins of the registry that wants one.
apt_need() {
  local program=$1 package=$2
  need "$program" && return 0
  if [ "$(id -u)" = 0 ] && need apt-get; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$package" >/dev/null \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$package" >/dev/null; }
  else
    echo "$program is required (apt-get install $package)" >&2; exit 1
  fi
}
apt_need docker-registry docker-registry
apt_need openssl openssl
apt_need buildah buildah
apt_need chromium chromium
apt_need htpasswd apache2-utils
# yq (PyYAML's reader, with jq) parses helm's own output in the byte-exactness tests
# (tests/integration/helm_bytes.rs): an oracle that shares no code with fluxplan's YAML.
apt_need yq yq

# The release's and the CI recipes' files, validated by tests/integration/release.rs: the GitHub
# workflows and action.yml against SchemaStore's schemas (check-jsonschema, pinned, from PyPI),
# the shell they run with Debian's shellcheck.
apt_need shellcheck shellcheck
need check-jsonschema || pip install --quiet check-jsonschema==0.39.0 >/dev/null
need check-jsonschema || { echo "check-jsonschema is required (pip install check-jsonschema)" >&2; exit 1; }


# PostgreSQL on 127.0.0.1:5432 (trust auth): start the local cluster when it is not answering.
if need pg_isready && ! pg_isready -h 127.0.0.1 -p 5432 -q; then
  if need pg_ctlcluster; then
    version=$(ls /etc/postgresql | sort -V | tail -1)
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
    for _ in $(seq 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
  fi
fi

cargo fmt --all -- --check
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --profile ci
else
  cargo test --workspace
fi
