#!/usr/bin/env bash
# Real-layout benchmark: a Flux Operator homelab fleet (bench/gen-homelab.py; NAMESPACES x APPS
# Kustomizations, default 8 x 10 = 82 with the root and cluster-apps). Measures, in one run and
# on the same tree: fluxplan's cold build, the `kubectl kustomize` subprocess floor (one per
# Kustomization path, 2 in parallel), the in-process library floor (bench/library-floor.py, 2
# threads), a warm build after one app changed, and `fluxplan plan` of that one-app change with a
# warm cache. Medians of RUNS runs. Writes bench/out/homelab.md.
# Usage: bench/homelab.sh [NAMESPACES] [APPS] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
namespaces=${1:-8}
apps=${2:-10}
runs=${3:-5}
cargo build --release --quiet
bin=$PWD/target/release/fluxplan
# This benchmark measures kustomize: the fleet's charts (ghcr.io) are not fetched (bench/helm.sh
# measures charts).
export FLUXPLAN_NO_CHART_FETCH=true
lib=$(scripts/fetch-kustomize-lib.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fleet=$work/fleet
python3 bench/gen-homelab.py "$fleet" "$namespaces" "$apps" "$work/paths.txt"
count=$(wc -l < "$work/paths.txt")

# Median of the first field of RUNS runs of a command printing "SECONDS [REST]".
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
timed() { /usr/bin/time -f "%e %M" -o "$work/time" "$@" > /dev/null 2>&1; cat "$work/time"; }

cold=$(for _ in $(seq "$runs"); do timed "$bin" build --repo "$fleet" --rev HEAD --format ids --no-cache; done)
cold_s=$(echo "$cold" | median)
cold_rss=$(echo "$cold" | awk '{ print $2 }' | sort -n | tail -1)
summed_rss=$(python3 bench/peak-rss.py "$bin" build --repo "$fleet" --rev HEAD --format ids --no-cache)
kubectl_floor=$(for _ in $(seq "$runs"); do
  (cd "$fleet" && timed xargs -P2 -I{} kubectl kustomize --load-restrictor LoadRestrictionsNone {} < "$work/paths.txt")
done | median)
library_floor=$(for _ in $(seq "$runs"); do
  timed python3 bench/library-floor.py "$lib" "$fleet" "$work/paths.txt" 2
done | median)
runs_cold=$(FLUXPLAN_LOG=fluxplan=info "$bin" build --repo "$fleet" --rev HEAD --format ids --no-cache 2>&1 >/dev/null \
  | grep -o 'kustomize_runs=[0-9]*' | tail -1 | cut -d= -f2)

# One app changes (its image tag), as in a typical PR; the cache holds the base.
"$bin" build --repo "$fleet" --rev HEAD --format ids --cache-dir "$work/cache" > /dev/null 2>&1
base=$(git -C "$fleet" rev-parse HEAD)
sed -i 's/tag: 1.1.0/tag: 1.1.1/' "$fleet/kubernetes/apps/ns-1/ns-1-app-1/app/helmrelease.yaml"
git -C "$fleet" -c user.email=b@example.com -c user.name=bench commit -qam "ns-1-app-1: 1.1.1"
"$bin" build --repo "$fleet" --rev HEAD --format ids --cache-dir "$work/cache" > /dev/null 2>&1
warm=$(for _ in $(seq "$runs"); do timed "$bin" build --repo "$fleet" --rev HEAD --format ids --cache-dir "$work/cache"; done | median)
plan=$(for _ in $(seq "$runs"); do
  /usr/bin/time -f "%e %M" -o "$work/time" "$bin" plan --repo "$fleet" --base "$base" --head HEAD --cache-dir "$work/cache" --format json > "$work/plan.json" 2>/dev/null || true
  tail -1 "$work/time" # exit 1 (changes) adds a line before the times
done | median)
verdict=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"])' "$work/plan.json")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
report=bench/out/homelab.md
{
  echo "# Real-layout benchmark ($(date -u +%F), $(nproc) cores, $($bin --version))"
  echo
  echo "Fleet: bench/gen-homelab.py $namespaces x $apps ($count Kustomizations: a flux-instance HelmRelease root,"
  echo "cluster-apps patching every child, ks.yaml per app with components and postBuild.substitute)."
  echo "Reproduce: \`bench/homelab.sh $namespaces $apps $runs\` (medians of $runs runs)."
  echo
  echo "| what | wall (s) |"
  echo "|---|---|"
  echo "| \`fluxplan build --no-cache\` (cold; $runs_cold kustomize builds; peak RSS $((cold_rss / 1024)) MiB in the largest process; $summed_rss MiB PSS with its workers) | $cold_s |"
  echo "| \`kubectl kustomize\` per path, 2 in parallel (subprocess floor) | $kubectl_floor |"
  echo "| kustomize library in one process, 2 threads (in-process floor) | $library_floor |"
  echo "| cold / subprocess floor (target ≤ 0.5) | $(ratio "$cold_s" "$kubectl_floor") |"
  echo "| cold / in-process floor (target ≤ 2) | $(ratio "$cold_s" "$library_floor") |"
  echo "| \`fluxplan build\`, warm cache, one app changed | $warm |"
  echo "| \`fluxplan plan\` of the one-app change, warm cache (verdict: $verdict; target < 0.3) | $plan |"
  echo
  echo "The in-process floor builds each path as written; fluxplan's builds also apply what the"
  echo "Kustomizations add (components, patches, target namespace) and origin annotations."
  echo "Load while measured: $(cut -d' ' -f1-3 /proc/loadavg)."
} > "$report"
cat "$report"
