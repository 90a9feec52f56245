#!/bin/sh
# Installs what fluxplan renders with on a CI runner: the pinned Helm (scripts/fetch-helm.sh:
# pinned version, checked against its pinned sha256) and, on linux-amd64, kustomize's library
# (scripts/fetch-kustomize-lib.sh, likewise pinned). Prints the settings that point fluxplan at
# them (`KEY=VALUE` lines: FLUXPLAN_HELM_DIR, FLUXPLAN_KUSTOMIZE_LIB) and, on GitHub Actions,
# appends them to GITHUB_ENV for the job's later steps.
#   FLUXPLAN_CI_HELM        the Helm major versions to install, blank-separated: 4 (default), 3,
#                           "4 3", or none.
#   FLUXPLAN_CI_TOOLS_DIR   where (default $RUNNER_TOOL_CACHE/fluxplan, else
#                           ${XDG_CACHE_HOME:-~/.cache}/fluxplan): Helm in helm/, the library in lib/.
# Helm that cannot be installed fails the job (HelmReleases would not render); the library is a
# speed-up: without it fluxplan uses the kustomize binary (GitHub's runners have one).
set -eu

say() { printf 'fluxplan-install: %s\n' "$*" >&2; }

scripts=$(cd "$(dirname "$0")/../../scripts" && pwd)
tools=${FLUXPLAN_CI_TOOLS_DIR:-${RUNNER_TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}}/fluxplan}
settings=

setting() {
  settings="$settings$1=$2
"
}

helm_dir=$tools/helm
for major in ${FLUXPLAN_CI_HELM:-4}; do
  case $major in
    none) continue ;;
    3 | 4) ;;
    *) say "FLUXPLAN_CI_HELM is '${FLUXPLAN_CI_HELM:-}': expected 4, 3, \"4 3\" or none"; exit 3 ;;
  esac
  helm=$(FLUXPLAN_HELM_DIR=$helm_dir "$scripts/fetch-helm.sh" "$major") || {
    say "Helm $major could not be installed (above: why); HelmReleases need it. Set the action's" \
      "helm input to none to plan without it (HelmReleases are then listed external)"
    exit 3
  }
  say "Helm $major: $helm"
  # fluxplan looks for helm-<pinned version> there (FLUXPLAN_HELM_DIR).
  [ -n "$settings" ] || setting FLUXPLAN_HELM_DIR "$helm_dir"
done

if library=$(FLUXPLAN_KUSTOMIZE_LIB_DIR=$tools/lib "$scripts/fetch-kustomize-lib.sh"); then
  say "kustomize's library: $library"
  setting FLUXPLAN_KUSTOMIZE_LIB "$library"
else
  say "kustomize's library could not be installed here ($(uname -m)): fluxplan uses the kustomize binary"
fi

printf '%s' "$settings"
if [ -n "${GITHUB_ENV:-}" ]; then
  printf '%s' "$settings" >>"$GITHUB_ENV"
fi
