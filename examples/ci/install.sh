#!/bin/sh
# Puts a fluxplan binary where a CI job can run it and prints its path on standard output
# (`FLUXPLAN_BIN=$(examples/ci/install.sh)`); on GitHub Actions it also adds its directory to
# GITHUB_PATH. The first of these that applies:
#   FLUXPLAN_CI_BINARY_URL     a fluxplan binary, or a .tar.gz/.tgz holding one, to download;
#                              FLUXPLAN_CI_BINARY_SHA256 (recommended) is its checksum, checked.
#   fluxplan on PATH           used as it is.
#   a release                  the released binary of FLUXPLAN_CI_RELEASE_REF (a tag such as v0.2.0,
#                              or a commit: then the release of the version in FLUXPLAN_CI_SOURCE's
#                              Cargo.toml, used only when it was built from that commit) of
#                              FLUXPLAN_CI_RELEASE_REPO (owner/name), both read from
#                              FLUXPLAN_CI_SOURCE's path (.../_actions/OWNER/NAME/REF) when unset:
#                              downloaded from $FLUXPLAN_CI_RELEASE_URL/TAG/ (default
#                              https://github.com/OWNER/NAME/releases/download), checked against
#                              the release's SHA256SUMS, kept in the tool cache
#                              ($RUNNER_TOOL_CACHE/fluxplan/VERSION/ARCH) for later jobs.
#   FLUXPLAN_CI_SOURCE         fluxplan's source tree, built with `cargo install --locked` (the
#                              action passes its own checkout: the version is the ref it was used
#                              at), when no release matches. FLUXPLAN_CI_CARGO: the cargo to run.
# FLUXPLAN_CI_INSTALL_DIR: where a download or a build goes (default $RUNNER_TEMP/fluxplan, else
# $TMPDIR/fluxplan). A download whose checksum is not the expected one is never installed, and
# never falls back to anything else: the job fails.
set -eu

say() { printf 'fluxplan-install: %s\n' "$*" >&2; }

dir=${FLUXPLAN_CI_INSTALL_DIR:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}/fluxplan}
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
bin_dir=$dir/bin

publish() {
  if [ -n "${GITHUB_PATH:-}" ]; then
    dirname "$1" >>"$GITHUB_PATH"
  fi
  say "using $("$1" -V)"
  printf '%s\n' "$1"
}

download() {
  if command -v curl >/dev/null 2>&1; then
    curl -fsSL --retry 3 -o "$2" "$1"
  elif command -v wget >/dev/null 2>&1; then
    wget -q -O "$2" "$1"
  else
    say "cannot download $1: neither curl nor wget is installed"
    return 1
  fi
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# Unpacks the file named fluxplan from the archive $1 to $2.
unpack() {
  unpacked=$dir/unpacked
  rm -rf "$unpacked" && mkdir -p "$unpacked"
  tar -xzf "$1" -C "$unpacked"
  found=$(find "$unpacked" -type f -name fluxplan | head -n 1)
  [ -n "$found" ] || { say "$1 holds no file named fluxplan"; exit 3; }
  mkdir -p "$(dirname "$2")"
  mv "$found" "$2"
  chmod 755 "$2"
  rm -rf "$unpacked"
}

if [ -n "${FLUXPLAN_CI_BINARY_URL:-}" ]; then
  url=$FLUXPLAN_CI_BINARY_URL
  mkdir -p "$bin_dir"
  fetched=$dir/download
  download "$url" "$fetched" || { say "cannot download $url"; exit 3; }
  if [ -n "${FLUXPLAN_CI_BINARY_SHA256:-}" ]; then
    actual=$(sha256_of "$fetched")
    if [ "$actual" != "$FLUXPLAN_CI_BINARY_SHA256" ]; then
      rm -f "$fetched"
      say "$url has SHA-256 $actual, not the $FLUXPLAN_CI_BINARY_SHA256 expected: not installed"
      exit 3
    fi
  else
    say "no FLUXPLAN_CI_BINARY_SHA256: $url is not checked"
  fi
  case $url in
    *.tar.gz | *.tgz) unpack "$fetched" "$bin_dir/fluxplan" && rm -f "$fetched" ;;
    *) mv "$fetched" "$bin_dir/fluxplan" && chmod 755 "$bin_dir/fluxplan" ;;
  esac
  publish "$bin_dir/fluxplan"
  exit 0
fi

if found=$(command -v fluxplan); then
  publish "$found"
  exit 0
fi

source_dir=${FLUXPLAN_CI_SOURCE:-}

# The release to install: the repository and ref the action was used at.
release_repo=${FLUXPLAN_CI_RELEASE_REPO:-}
release_ref=${FLUXPLAN_CI_RELEASE_REF:-}
if [ -z "$release_repo" ] || [ -z "$release_ref" ]; then
  # GitHub runs an action from .../_actions/OWNER/NAME/REF (and may leave its context empty).
  case $source_dir in
    */_actions/*/*/*)
      rest=${source_dir##*/_actions/}
      owner=${rest%%/*} rest=${rest#*/}
      name=${rest%%/*} ref=${rest#*/}
      case $ref in */*) ;; *) release_repo=${release_repo:-$owner/$name} release_ref=${release_ref:-$ref} ;; esac
      ;;
  esac
fi

# The version of fluxplan's source tree (`version = "0.2.0"` in its Cargo.toml).
source_version() {
  [ -f "$source_dir/Cargo.toml" ] || return 0
  sed -n 's/^version = "\([0-9A-Za-z.+-]*\)"$/\1/p' "$source_dir/Cargo.toml" | head -n 1
}

case $(uname -m) in
  x86_64 | amd64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) arch= ;;
esac

# Installs the release (prints the binary's path), or says why none matches and returns 1. A
# download that fails its checksum ends the job.
from_release() {
  expect_commit=
  case $release_ref in
    v[0-9]*) tag=$release_ref ;;
    *)
      if [ ${#release_ref} -eq 40 ] && [ -z "$(printf '%s' "$release_ref" | tr -d 0-9a-f)" ]; then
        version=$(source_version)
        [ -n "$version" ] || { say "no version in $source_dir/Cargo.toml"; return 1; }
        tag=v$version expect_commit=$release_ref
      else
        say "the action is used at '$release_ref', not a release tag (vX.Y.Z) nor a commit"
        return 1
      fi
      ;;
  esac
  case $tag in
    *[!0-9A-Za-z.+-]*) say "'$tag' is not a release tag"; return 1 ;;
  esac
  case $release_repo in
    */*/* | -* | *[!0-9A-Za-z._/-]*) say "'$release_repo' is not a GitHub repository name"; return 1 ;;
  esac
  [ -n "$arch" ] || { say "no release binary for $(uname -m)"; return 1; }
  version=${tag#v}
  asset=fluxplan-$tag-linux-$arch.tar.gz
  cache=${RUNNER_TOOL_CACHE:-$dir/tool-cache}/fluxplan/$version/$arch
  if [ ! -x "$cache/fluxplan" ] || [ ! -f "$cache.complete" ]; then
    base_url=${FLUXPLAN_CI_RELEASE_URL:-https://github.com/$release_repo/releases/download}
    command -v curl >/dev/null 2>&1 || { say "looking for a release needs curl"; return 1; }
    work=$dir/release
    rm -rf "$work" && mkdir -p "$work"
    status=$(curl -sSL --retry 3 -o "$work/SHA256SUMS" -w '%{http_code}' "$base_url/$tag/SHA256SUMS") || {
      say "cannot download $base_url/$tag/SHA256SUMS"
      exit 3
    }
    case $status in
      200) ;;
      404) say "$release_repo has no release $tag"; return 1 ;;
      *) say "$base_url/$tag/SHA256SUMS answered HTTP $status"; exit 3 ;;
    esac
    expected=$(awk -v f="$asset" '$2 == f || $2 == "*" f { print $1; exit }' "$work/SHA256SUMS")
    [ -n "$expected" ] || { say "the release $tag has no $asset"; return 1; }
    download "$base_url/$tag/$asset" "$work/$asset" || { say "cannot download $base_url/$tag/$asset"; exit 3; }
    actual=$(sha256_of "$work/$asset")
    if [ "$actual" != "$expected" ]; then
      rm -rf "$work"
      say "$asset has SHA-256 $actual, not the $expected its release's SHA256SUMS lists: not installed"
      exit 3
    fi
    rm -rf "$cache" "$cache.complete"
    unpack "$work/$asset" "$cache/fluxplan"
    rm -rf "$work"
    # As actions/tool-cache marks a complete entry.
    : >"$cache.complete"
    say "installed the release $tag of $release_repo in $cache"
  fi
  if [ -n "$expect_commit" ]; then
    built_from=$("$cache/fluxplan" --version | sed -n '1s/.*(commit \([0-9a-f]*\)).*/\1/p')
    case $expect_commit in
      "$built_from"*) [ -n "$built_from" ] || return 1 ;;
      *) say "the release $tag was built from commit ${built_from:-unknown}, not $expect_commit"; return 1 ;;
    esac
  fi
  printf '%s\n' "$cache/fluxplan"
}

if [ -n "$release_repo" ] && [ -n "$release_ref" ]; then
  # 1: no release matches (built from source below); anything else: the job fails (a tampered
  # download is never replaced by a build).
  status=0
  installed=$(from_release) || status=$?
  case $status in
    0) publish "$installed"; exit 0 ;;
    1) ;;
    *) exit "$status" ;;
  esac
fi

if [ -n "$source_dir" ] && [ -f "$source_dir/Cargo.toml" ]; then
  cargo=${FLUXPLAN_CI_CARGO:-cargo}
  command -v "$cargo" >/dev/null 2>&1 || { say "building fluxplan from $source_dir needs cargo (Rust)"; exit 3; }
  say "no release matches: building fluxplan from $source_dir (minutes)"
  # From fluxplan's own tree: a rust-toolchain file in the checked-out pull request must not
  # choose the compiler.
  (cd "$source_dir" && "$cargo" install --quiet --locked --root "$dir" --path . --bin fluxplan) >&2
  publish "$bin_dir/fluxplan"
  exit 0
fi

say "no fluxplan: set FLUXPLAN_CI_BINARY_URL, put fluxplan on PATH, or set FLUXPLAN_CI_SOURCE to its source"
exit 3
