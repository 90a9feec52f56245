#!/usr/bin/env bash
# Lays out the files of a release (.github/workflows/release.yml publishes them with the tag):
#   scripts/release.sh --tag vX.Y.Z --out DIR [--image NAME] [--sbom FILE] linux-ARCH=BINARY...
#   DIR/fluxplan-vX.Y.Z-linux-ARCH.tar.gz   each binary, as `fluxplan` (ARCH: amd64, arm64)
#   DIR/fluxplan-vX.Y.Z.cdx.json            the SBOM (--sbom: CycloneDX, cargo cyclonedx)
#   DIR/gitlab-ci.yml                       examples/ci/gitlab-ci.yml using the image --image names
#   DIR/SHA256SUMS                          the checksum of each file above (sha256sum's format)
# examples/ci/install.sh finds a binary by these names and checks it against SHA256SUMS. The tag
# must be the crate's version (Cargo.toml). The archives are reproducible: sorted, owned by root,
# dated $SOURCE_DATE_EPOCH (default: the last commit's date), gzip without a name or time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "release.sh: $*" >&2; exit 1; }

tag='' out='' image='' sbom=''
binaries=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag=${2:?--tag needs vX.Y.Z}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --image) image=${2:?--image needs a name}; shift 2 ;;
    --sbom) sbom=${2:?--sbom needs a file}; shift 2 ;;
    -h | --help) sed -n '2,10p' "$0"; exit 0 ;;
    linux-amd64=* | linux-arm64=*) binaries+=("$1"); shift ;;
    *) die "unknown argument $1 (see --help; binaries are linux-amd64=FILE or linux-arm64=FILE)" ;;
  esac
done

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
if [ -z "$tag" ] || [ -z "$out" ]; then die "--tag and --out are required (see --help)"; fi
[ "$tag" = "v$version" ] || die "the tag $tag is not v$version, the version in Cargo.toml: bump it first"
[ ${#binaries[@]} -gt 0 ] || die "no binary given (linux-amd64=FILE, linux-arm64=FILE)"
case $image in *[!A-Za-z0-9./:@_-]*) die "'$image' is not an image name" ;; esac

mkdir -p "$out"
[ -z "$(ls -A "$out")" ] || die "$out is not empty"
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}

for given in "${binaries[@]}"; do
  platform=${given%%=*} binary=${given#*=}
  [ -x "$binary" ] || die "$binary is not an executable file"
  stage=$(mktemp -d)
  install -m 0755 "$binary" "$stage/fluxplan"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$stage" -cf - fluxplan \
    | gzip -9 -n >"$out/fluxplan-$tag-$platform.tar.gz"
  rm -rf "$stage"
done

if [ -n "$sbom" ]; then
  [ -s "$sbom" ] || die "$sbom is empty or missing"
  cp "$sbom" "$out/fluxplan-$tag.cdx.json"
fi

# The GitLab template, its job's image the release's (the template names the image the project
# publishes; a fork's release names its own): `include: remote:` it by URL.
template=$root/examples/ci/gitlab-ci.yml
if [ -n "$image" ]; then
  [ "$(grep -c '^    FLUXPLAN_IMAGE: ' "$template")" = 1 ] || die "$template has no one FLUXPLAN_IMAGE line to set"
  sed "s|^    FLUXPLAN_IMAGE: .*\$|    FLUXPLAN_IMAGE: $image|" "$template" >"$out/gitlab-ci.yml"
fi

sums=$(cd "$out" && find . -maxdepth 1 -type f -printf '%f\n' | LC_ALL=C sort | xargs sha256sum)
printf '%s\n' "$sums" >"$out/SHA256SUMS"
echo "$out"
