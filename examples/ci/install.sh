#!/bin/sh
# Puts a fluxplan binary where a CI job can run it and prints its path on standard output
# (`FLUXPLAN_BIN=$(examples/ci/install.sh)`); on GitHub Actions it also adds its directory to
# GITHUB_PATH. The first of these that applies:
#   FLUXPLAN_CI_BINARY_URL     a fluxplan binary, or a .tar.gz/.tgz holding one, to download;
#                              FLUXPLAN_CI_BINARY_SHA256 (recommended) is its checksum, checked.
#   fluxplan on PATH           used as it is.
#   FLUXPLAN_CI_SOURCE         fluxplan's source tree, built with `cargo install --locked` (the
#                              action passes its own checkout: the version is the ref it was used at).
# FLUXPLAN_CI_INSTALL_DIR: where it goes (default $RUNNER_TEMP/fluxplan, else $TMPDIR/fluxplan).
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

if [ -n "${FLUXPLAN_CI_BINARY_URL:-}" ]; then
  url=$FLUXPLAN_CI_BINARY_URL
  mkdir -p "$bin_dir"
  fetched=$dir/download
  download "$url" "$fetched" || { say "cannot download $url"; exit 3; }
  if [ -n "${FLUXPLAN_CI_BINARY_SHA256:-}" ]; then
    actual=$(sha256sum "$fetched" | cut -d' ' -f1)
    if [ "$actual" != "$FLUXPLAN_CI_BINARY_SHA256" ]; then
      rm -f "$fetched"
      say "$url has SHA-256 $actual, not the $FLUXPLAN_CI_BINARY_SHA256 expected: not installed"
      exit 3
    fi
  else
    say "no FLUXPLAN_CI_BINARY_SHA256: $url is not checked"
  fi
  case $url in
    *.tar.gz | *.tgz)
      unpacked=$dir/unpacked
      rm -rf "$unpacked" && mkdir -p "$unpacked"
      tar -xzf "$fetched" -C "$unpacked"
      found=$(find "$unpacked" -type f -name fluxplan | head -n 1)
      [ -n "$found" ] || { say "$url holds no file named fluxplan"; exit 3; }
      mv "$found" "$bin_dir/fluxplan"
      rm -rf "$unpacked" "$fetched"
      ;;
    *) mv "$fetched" "$bin_dir/fluxplan" ;;
  esac
  chmod 755 "$bin_dir/fluxplan"
  publish "$bin_dir/fluxplan"
  exit 0
fi

if found=$(command -v fluxplan); then
  publish "$found"
  exit 0
fi

source_dir=${FLUXPLAN_CI_SOURCE:-}
if [ -n "$source_dir" ] && [ -f "$source_dir/Cargo.toml" ]; then
  command -v cargo >/dev/null 2>&1 || { say "building fluxplan from $source_dir needs cargo (Rust)"; exit 3; }
  say "building fluxplan from $source_dir (minutes; a binary-url is faster)"
  # From fluxplan's own tree: a rust-toolchain file in the checked-out pull request must not
  # choose the compiler.
  (cd "$source_dir" && cargo install --quiet --locked --root "$dir" --path . --bin fluxplan) >&2
  publish "$bin_dir/fluxplan"
  exit 0
fi

say "no fluxplan: set FLUXPLAN_CI_BINARY_URL, put fluxplan on PATH, or set FLUXPLAN_CI_SOURCE to its source"
exit 3
