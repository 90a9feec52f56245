#!/usr/bin/env bash
# Render benchmark: synthetic fleets of N Kustomizations x M objects, cold and warm cache (medians
# of 3 runs each), peak memory, and the warm plan of the change. The fleet is packed (git gc), as a clone is. Writes bench/out/render.md (bench/out/render-binary.md with
# FLUXPLAN_KUSTOMIZE_LIB=off: the kustomize binary per build). Usage: [FLUXPLAN_BIN=PATH]
# [BENCH_OUT=FILE] bench/render.sh [M] [N ...]
set -euo pipefail
cd "$(dirname "$0")/.."
objects=${1:-20}
shift || true
sizes=("${@:-10 100 500}")
sizes=(${sizes[@]})
# FLUXPLAN_BIN=PATH measures that binary (another commit's, for a before/after) instead of this
# checkout's release build.
if [ -z "${FLUXPLAN_BIN:-}" ]; then
  cargo build --release --quiet
fi
bin=${FLUXPLAN_BIN:-target/release/fluxplan}
# The in-process floor (bench/library-floor.py): the apps' kustomizations built through the
# library in one process, 2 threads, in the same minute (this VM's CPU speed moves a lot).
lib=$(scripts/fetch-kustomize-lib.sh)
out=bench/out
mkdir -p "$out"
report="$out/render.md"
[ "${FLUXPLAN_KUSTOMIZE_LIB:-}" = off ] && report="$out/render-binary.md"
report=${BENCH_OUT:-$report}
# Which kustomize runs the builds (the library's workers, else the binary).
engine=$(FLUXPLAN_LOG=fluxplan=info "$bin" build --repo examples/fleet --no-cache --format ids 2>&1 >/dev/null \
  | grep -o 'kustomize=.*' | tail -1 | cut -d= -f2-)
{
  echo "# Render benchmark ($(date -u +%F), $(nproc) cores, $($bin --version), objects per Kustomization: $objects)"
  echo
  echo "kustomize: $engine. Reproduce: \`${FLUXPLAN_KUSTOMIZE_LIB:+FLUXPLAN_KUSTOMIZE_LIB=$FLUXPLAN_KUSTOMIZE_LIB }bench/render.sh $objects ${sizes[*]}\`"
  echo
  echo "| Kustomizations | objects | cold (s) | cold peak RSS, largest process (MiB) | cold peak memory with workers, PSS (MiB) | in-process floor, apps only (s) | warm, 1 changed (s) | kustomize runs warm | warm plan of the change (s) | warm plan peak RSS (MiB) |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
} > "$report"
for n in "${sizes[@]}"; do
  fleet=$(mktemp -d)
  cache=$(mktemp -d)
  # No automatic gc in the background while measuring (10,000 loose objects start one): packed
  # once, here.
  GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=gc.auto GIT_CONFIG_VALUE_0=0 python3 bench/gen-fleet.py "$fleet" "$n" "$objects"
  git -C "$fleet" config gc.auto 0
  git -C "$fleet" gc --quiet
  # Cold: each run with an empty cache directory and an empty scratch directory (no export kept
  # from the run before); the last run's cache and kept export stay for the warm runs.
  scratch=""
  for _ in 1 2 3; do
    rm -rf "$cache" "$scratch"
    scratch=$(mktemp -d -p "${XDG_RUNTIME_DIR:-/dev/shm}")
    FLUXPLAN_WORKDIR=$scratch /usr/bin/time -o "$out/time" -f "%e %M" "$bin" build --repo "$fleet" --rev HEAD --format ids --cache-dir "$cache" > "$out/ids-$n.txt" 2>/dev/null || true
    tail -1 "$out/time"
  done > "$out/cold"
  cold=$(sort -n "$out/cold" | sed -n 2p)
  export FLUXPLAN_WORKDIR=$scratch
  # fluxplan and its workers together, by PSS (a separate cold run: sampling slows the timed one).
  summed=$(python3 bench/peak-rss.py "$bin" build --repo "$fleet" --rev HEAD --format ids --no-cache || echo "?")
  (cd "$fleet" && ls -d apps/app-* | sed 's|^|./|') > "$out/paths.txt"
  floor=$( (/usr/bin/time -f "%e" -o "$out/floor" python3 bench/library-floor.py "$lib" "$fleet" "$out/paths.txt" 2 >/dev/null 2>&1 && tail -1 "$out/floor") || echo "?")
  # Change one Kustomization's content, commit, and re-render with the warm cache (3 times).
  warm=$(for run in 1 2 3; do
    sed -i "s/index: \"[^\"]*\"/index: \"changed-$run\"/" "$fleet/apps/app-0/obj-0.yaml"
    git -C "$fleet" -c user.email=b@example.com -c user.name=bench commit -qam "change app-0 ($run)"
    FLUXPLAN_LOG=fluxplan=info /usr/bin/time -o "$out/time" -f "%e %M" "$bin" build --repo "$fleet" --rev HEAD --format ids --cache-dir "$cache" > /dev/null 2> "$out/warm.log" || true
    tail -1 "$out/time"
  done | sort -n | sed -n 2p)
  # The plan of the last change (base and head both rendered before: warm on both sides).
  plan=$(for _ in 1 2 3; do
    /usr/bin/time -o "$out/time" -f "%e %M" "$bin" plan --repo "$fleet" --base HEAD~1 --head HEAD --cache-dir "$cache" > "$out/plan-$n.txt" 2>/dev/null || true
    tail -1 "$out/time"
  done | sort -n | sed -n 2p)
  runs=$(grep -o 'kustomize_runs=[0-9]*' "$out/warm.log" | tail -1 || true)
  total=$(grep -vc '^#' "$out/ids-$n.txt" || true)
  read -r cold_s cold_kb <<< "$cold"
  read -r warm_s _ <<< "$warm"
  read -r plan_s plan_kb <<< "$plan"
  echo "| $n | $total | $cold_s | $((cold_kb / 1024)) | $summed | $floor | $warm_s | ${runs#kustomize_runs=} | $plan_s | $((plan_kb / 1024)) |" >> "$report"
  unset FLUXPLAN_WORKDIR
  rm -rf "$fleet" "$cache" "$scratch"
done
echo >> "$report"
echo "Cold and warm: medians of 3 runs. Load while measured: $(cut -d' ' -f1-3 /proc/loadavg)." >> "$report"
cat "$report"
