#!/usr/bin/env bash
# Builds fluxplan's container image here, offline, with buildah (vfs storage, no daemon, no
# registry): FROM scratch, holding fluxplan, git and the shared libraries both load, CA
# certificates, kustomize's library and the pinned Helm v4 and v3 (installed and checked by
# scripts/fetch-kustomize-lib.sh and scripts/fetch-helm.sh), a /tmp and an unprivileged user,
# and for CI jobs (examples/ci/gitlab-ci.yml) Debian's static busybox as /bin/sh and
# examples/ci/fluxplan-ci.sh.
#   scripts/build-image.sh [--tag NAME] [--root DIR --runroot DIR] [FLUXPLAN]
#       commits the image (default name localhost/fluxplan:VERSION) and prints its name;
#       --root/--runroot: buildah's storage (default: buildah's own).
#   scripts/build-image.sh --rootfs DIR [FLUXPLAN]
#       only writes the image's file tree into DIR (deploy/Containerfile builds this way).
# FLUXPLAN is the binary to put in (default target/release/fluxplan; it is stripped on the way).
# Needs root (or `buildah unshare`) for the file ownership, Debian's git at /usr/bin/git, and
# Debian's busybox-static at /bin/busybox (installed with apt-get when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "build-image.sh: $*" >&2; exit 1; }

# What the image runs with. deploy/Containerfile repeats it: tests/integration/image.rs fails
# when the two differ.
LIB_DIR=/usr/local/lib/fluxplan
KUSTOMIZE_LIB=$LIB_DIR/libpykustomize-0.1.4.so
USER_ID=65532
IMAGE_ENV=(
  PATH=/usr/local/bin:/usr/bin:/bin
  HOME=/home/fluxplan
  "FLUXPLAN_KUSTOMIZE_LIB=$KUSTOMIZE_LIB"
  "FLUXPLAN_HELM_DIR=$LIB_DIR/helm"
  FLUXPLAN_DATA_DIR=/var/lib/fluxplan
  FLUXPLAN_WORKDIR=/tmp
  FLUXPLAN_LISTEN=0.0.0.0:8080
)

tag='' rootfs='' storage_root='' storage_runroot='' binary=target/release/fluxplan
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag=${2:?--tag needs a name}; shift 2 ;;
    --rootfs) rootfs=${2:?--rootfs needs a directory}; shift 2 ;;
    --root) storage_root=${2:?--root needs a directory}; shift 2 ;;
    --runroot) storage_runroot=${2:?--runroot needs a directory}; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) binary=$1; shift ;;
  esac
done

[ -x "$binary" ] || die "$binary does not exist: build it first (cargo build --release --locked)"
[ "$(id -u)" = 0 ] \
  || die "the image's files must be owned by root: run as root, or under \`buildah unshare $0\`"

# Installs Debian packages (this runs as root), updating the package lists when they are stale.
apt_install() {
  local install=(apt-get install -y -q --no-install-recommends "$@")
  command -v apt-get >/dev/null 2>&1 || die "$* is required (apt-get install $*)"
  DEBIAN_FRONTEND=noninteractive "${install[@]}" >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive "${install[@]}" >/dev/null; } \
    || die "$* is required and could not be installed (apt-get install $*)"
}

# The libraries `$1` loads, as ldd names them (the loader included); nothing for a static binary.
libraries_of() {
  local out
  if ! out=$(ldd "$1" 2>&1); then
    case "$out" in *"not a dynamic executable"*) return 0 ;; esac
    die "ldd $1 failed: $out"
  fi
  if grep -q 'not found' <<<"$out"; then
    die "$1 needs libraries this machine lacks: $(grep 'not found' <<<"$out" | tr -s ' \t\n' ' ')"
  fi
  grep -o '/[^ ]*' <<<"$out" || true
}

# Copies the libraries `$1` loads under the root `$2`. (Assigned first: a failure inside `$(…)`
# in a `for` list would go unnoticed.)
copy_libraries_of() {
  local libraries library
  libraries=$(libraries_of "$1")
  for library in $libraries; do copy_same_path "$library" "$2"; done
}

# Copies `$1` (followed through symlinks) to the same path under the root `$2`, once.
copy_same_path() {
  [ -e "$2$1" ] && return 0
  mkdir -p "$2$(dirname "$1")"
  cp -L --preserve=mode "$1" "$2$1"
}

# Debian's git: the command, its helpers for https remotes and local transports, its templates.
# Every builtin is the `git` binary itself, which git runs from its exec path.
add_git() {
  local root=$1 git=/usr/bin/git exec_path
  [ -x "$git" ] || die "Debian's git is needed at $git (apt-get install git)"
  exec_path=$(env -u GIT_EXEC_PATH "$git" --exec-path)
  [ -x "$exec_path/git-remote-https" ] \
    || die "$exec_path/git-remote-https is missing (apt-get install git)"
  copy_same_path "$git" "$root"
  mkdir -p "$root$exec_path"
  ln -f "$root$git" "$root$exec_path/git"
  for builtin in git-upload-pack git-receive-pack git-upload-archive; do
    ln -f "$root$git" "$root$exec_path/$builtin"
  done
  copy_same_path "$exec_path/git-remote-https" "$root"
  ln -f "$root$exec_path/git-remote-https" "$root$exec_path/git-remote-http"
  if [ -d /usr/share/git-core/templates ]; then
    mkdir -p "$root/usr/share/git-core"
    cp -r /usr/share/git-core/templates "$root/usr/share/git-core/"
  fi
  copy_libraries_of "$git" "$root"
  copy_libraries_of "$exec_path/git-remote-https" "$root"
  # git works in repositories other users own (safe.directory): a CI runner checks the job's
  # repository out as its own user (GitLab's as root), a checkout mounted with `docker run -v` is
  # the host user's. The check guards against a repository planted by another user of the machine;
  # the image has one user, and the repositories of others in it are the ones handed to it. In the
  # system file, not GIT_CONFIG_COUNT: whoever sets that (to pass a token) replaces the entry, and
  # git drops it for the upload-pack of a local remote.
  mkdir -p "$root/etc"
  printf '# Repositories other users own are trusted: see docs/ci.md.\n[safe]\n\tdirectory = *\n' \
    >"$root/etc/gitconfig"
}

# The renderers, each installed and checked against its pinned sha256 by its fetch script.
add_engines() {
  local root=$1 library helm
  library=$(scripts/fetch-kustomize-lib.sh) \
    || die "kustomize's library could not be installed (scripts/fetch-kustomize-lib.sh, above, says why)"
  [ "$(basename "$library")" = "$(basename "$KUSTOMIZE_LIB")" ] \
    || die "scripts/fetch-kustomize-lib.sh installs $(basename "$library"): update KUSTOMIZE_LIB here" \
      "and FLUXPLAN_KUSTOMIZE_LIB in deploy/Containerfile"
  mkdir -p "$root$LIB_DIR/helm"
  install -m 0644 "$library" "$root$KUSTOMIZE_LIB"
  copy_libraries_of "$library" "$root"
  for major in 4 3; do
    helm=$(scripts/fetch-helm.sh "$major") \
      || die "Helm $major could not be installed (scripts/fetch-helm.sh $major, above, says why)"
    # Named as the fetch script names it: fluxplan looks for helm-<version> in FLUXPLAN_HELM_DIR.
    install -m 0755 "$helm" "$root$LIB_DIR/helm/$(basename "$helm")"
  done
}

# The user, the writable directories, and what glibc and TLS read in /etc.
add_system_files() {
  local root=$1 bundle=/etc/ssl/certs/ca-certificates.crt
  [ -f "$bundle" ] || die "$bundle is missing (apt-get install ca-certificates)"
  mkdir -p "$root/etc/ssl/certs"
  cp -L "$bundle" "$root$bundle"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nfluxplan:x:%s:%s:fluxplan:/home/fluxplan:/sbin/nologin\n' \
    "$USER_ID" "$USER_ID" >"$root/etc/passwd"
  printf 'root:x:0:\nfluxplan:x:%s:\n' "$USER_ID" >"$root/etc/group"
  printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
  install -d -m 1777 "$root/tmp"
  install -d -m 0755 -o "$USER_ID" -g "$USER_ID" "$root/home/fluxplan" "$root/var/lib/fluxplan"
}

add_fluxplan() {
  local root=$1
  mkdir -p "$root/usr/local/bin"
  # Stripped as a release image is (a debug build shrinks fourfold); copied as is without strip.
  strip -o "$root/usr/local/bin/fluxplan" "$binary" 2>/dev/null \
    || cp "$binary" "$root/usr/local/bin/fluxplan"
  chmod 0755 "$root/usr/local/bin/fluxplan"
  copy_libraries_of "$binary" "$root"
}

# A shell for CI jobs: GitLab's runner runs a job's `script:` with the image's sh. Debian's
# busybox-static: one static binary, no libraries. Every applet is linked, not only those
# fluxplan-ci.sh calls (mkdir, rm, cat, wc): the runner's own job script calls more (date, grep,
# touch, chmod, find…), which vary with its version and feature flags, the runner runs `id` in
# the image to find the job's user, and the links give nothing the binary does not (`busybox
# wget` runs anyway).
add_shell() {
  local root=$1 busybox=/bin/busybox libraries applets applet
  [ -x "$busybox" ] || apt_install busybox-static
  libraries=$(libraries_of "$busybox")
  [ -z "$libraries" ] \
    || die "$busybox is not static (Debian's busybox package?): apt-get install busybox-static"
  applets=$("$busybox" --list) || die "$busybox --list failed"
  grep -qx sh <<<"$applets" || die "$busybox has no sh applet"
  mkdir -p "$root/bin"
  install -m 0755 "$busybox" "$root/bin/busybox"
  while read -r applet; do
    [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
  done <<<"$applets"
}

# The script examples/ci/gitlab-ci.yml runs, on PATH.
add_ci_script() {
  local root=$1 script=examples/ci/fluxplan-ci.sh
  [ -f "$script" ] || die "$script is missing (deploy/Containerfile must copy it into the build)"
  install -D -m 0755 "$script" "$root/usr/local/bin/fluxplan-ci.sh"
}

assemble() {
  add_fluxplan "$1"
  add_git "$1"
  add_shell "$1"
  add_ci_script "$1"
  add_engines "$1"
  add_system_files "$1"
}

if [ -n "$rootfs" ]; then
  mkdir -p "$rootfs"
  assemble "$rootfs"
  echo "$rootfs"
  exit 0
fi

# Debian's buildah, installed when missing (this runs as root), as scripts/test.sh does.
if ! command -v buildah >/dev/null 2>&1; then
  apt_install buildah
fi

store=(--storage-driver vfs)
[ -n "$storage_root" ] && store+=(--root "$storage_root")
[ -n "$storage_runroot" ] && store+=(--runroot "$storage_runroot")
if [ -z "$tag" ]; then
  version=$("$binary" --version | head -1 | cut -d' ' -f2)
  tag=localhost/fluxplan:${version:-latest}
fi

container=$(buildah "${store[@]}" from scratch)
# Gone whatever happens: committed with --rm, or removed here (which unmounts it too).
trap 'buildah "${store[@]}" rm "$container" >/dev/null 2>&1 || true' EXIT
mountpoint=$(buildah "${store[@]}" mount "$container")
assemble "$mountpoint"
buildah "${store[@]}" umount "$container" >/dev/null
config=(--user "$USER_ID:$USER_ID" --workingdir /home/fluxplan --port 8080/tcp
  --entrypoint '["fluxplan"]' --cmd serve --label org.opencontainers.image.title=fluxplan)
for variable in "${IMAGE_ENV[@]}"; do config+=(--env "$variable"); done
buildah "${store[@]}" config "${config[@]}" "$container"
buildah "${store[@]}" commit --quiet --rm "$container" "$tag" >/dev/null
trap - EXIT
echo "$tag"
