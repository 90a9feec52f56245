#!/usr/bin/env bash
# Installs kustomize's Go library (c-shared build of sigs.k8s.io/kustomize/api) for fluxplan's
# kustomize workers: the pinned pykustomize wheel, fetched with pip (the ordinary package
# client), checked against its pinned sha256, and its .so copied to
#   ${FLUXPLAN_KUSTOMIZE_LIB:-${XDG_CACHE_HOME:-~/.cache}/fluxplan/lib/libpykustomize-0.1.4.so}
# (FLUXPLAN_KUSTOMIZE_LIB=off, which turns the library off in fluxplan, means the default place;
# FLUXPLAN_KUSTOMIZE_LIB_DIR, when set, is the directory instead of that default's)
# Idempotent: an installed library whose sha256 matches is left alone. Prints the path.
set -euo pipefail

version=0.1.4
wheel=pykustomize-${version}-py3-none-any.whl
wheel_sha256=f8da6be12fb35b56158d2f9043a67d39c1ce84eae9c8f344c7ed934709192467
# The .so inside that wheel (checked again after unpacking, and on every later run).
lib_sha256=cd8f48b55a9fd7292a45bed20800581067026db985056a4e1605ab477b924230
member=pykustomize/_lib/linux-amd64/libpykustomize.so

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "the pinned kustomize library is built for linux-amd64 only; fluxplan falls back to the kustomize binary" >&2
  exit 1
fi

target=${FLUXPLAN_KUSTOMIZE_LIB:-}
if [ -z "$target" ] || [ "$target" = off ]; then
  target=${FLUXPLAN_KUSTOMIZE_LIB_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/fluxplan/lib}/libpykustomize-${version}.so
fi
if [ -f "$target" ] && echo "$lib_sha256  $target" | sha256sum -c --quiet - 2>/dev/null; then
  echo "$target"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pip download "pykustomize==${version}" --no-deps --only-binary=:all: --python-version 3.14 \
  --quiet -d "$work" >&2
echo "$wheel_sha256  $work/$wheel" | sha256sum -c --quiet - || {
  echo "the downloaded $wheel does not have the pinned sha256: not installed" >&2
  exit 1
}
python3 -c 'import sys, zipfile; open(sys.argv[3], "wb").write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
  "$work/$wheel" "$member" "$work/lib.so"
echo "$lib_sha256  $work/lib.so" | sha256sum -c --quiet - || {
  echo "the library in $wheel does not have the pinned sha256: not installed" >&2
  exit 1
}
mkdir -p "$(dirname "$target")"
chmod 0644 "$work/lib.so"
# Renamed into place: a concurrent reader never sees half a library.
mv "$work/lib.so" "$target.tmp.$$" && mv "$target.tmp.$$" "$target"
echo "$target"
