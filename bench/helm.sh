#!/usr/bin/env bash
# HelmRelease benchmark: a fleet of RELEASES HelmReleases of three charts (bench/gen-helm-fleet.py:
# the home-ops shape, one chart and many values). Measures, in one run and on the same tree:
# fluxplan's cold build (every chart rendered), the floor of one `helm template` per release run
# 2 at a time, and a warm `fluxplan plan` of a one-release values change. Medians of RUNS runs.
# Writes bench/out/helm.md. Usage: bench/helm.sh [RELEASES] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
releases=${1:-70}
runs=${2:-5}
cargo build --release --quiet
bin=$PWD/target/release/fluxplan
helm=$(scripts/fetch-helm.sh 4)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fleet=$work/fleet
python3 bench/gen-helm-fleet.py "$helm" "$fleet" "$releases" "$work/floor.txt"

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
# A non-zero exit (plan: 1 for changes) adds a line before the times: the last line is kept.
timed() { /usr/bin/time -f "%e %M" -o "$work/time" "$@" > /dev/null 2>&1 || true; tail -1 "$work/time"; }

cold=$(for _ in $(seq "$runs"); do timed "$bin" build --repo "$fleet" --rev HEAD --format ids --no-cache; done)
cold_s=$(echo "$cold" | median)
floor=$(for _ in $(seq "$runs"); do
  timed xargs -P2 -L1 sh -c 'HOME=/nonexistent "$0" template "$1" "$2" --namespace "$3" --values "$4" --include-crds' "$helm" < "$work/floor.txt"
done | median)
units=$("$bin" build --repo "$fleet" --rev HEAD --format json --no-cache 2>/dev/null \
  | python3 -c 'import json,sys; r=json.load(sys.stdin); print(sum(1 for c in r["clusters"] for k in c["kustomizations"] if k["kind"]=="HelmRelease" and k["status"]=="rendered"))')

# One release's values change, as in a typical PR; the cache holds the base.
base=$(git -C "$fleet" rev-parse HEAD)
"$bin" build --repo "$fleet" --rev HEAD --format ids --cache-dir "$work/cache" > /dev/null 2>&1
sed -i 's/replicaCount: 1$/replicaCount: 9/' "$fleet/apps/app-0.yaml"
git -C "$fleet" -c user.email=b@example.com -c user.name=bench commit -qam "app-0: 9 replicas"
"$bin" plan --repo "$fleet" --base "$base" --head HEAD --cache-dir "$work/cache" --format json > /dev/null 2>&1 || true
plan=$(for _ in $(seq "$runs"); do timed "$bin" plan --repo "$fleet" --base "$base" --head HEAD --cache-dir "$work/cache" --format json; done | median)

mkdir -p bench/out
ratio=$(awk -v a="$cold_s" -v b="$floor" 'BEGIN { printf "%.2f", a / b }')
cat > bench/out/helm.md <<REPORT
# HelmRelease benchmark ($(date -u +%F), $(nproc) cores, $($bin --version | head -1), $($helm version --template '{{.Version}}'))

Fleet: bench/gen-helm-fleet.py, $releases HelmReleases of 3 charts made by \`helm create\`, all
applied by one Kustomization ($units rendered). Reproduce: \`bench/helm.sh $releases $runs\`
(medians of $runs runs).

| what | wall (s) |
|---|---|
| \`fluxplan build --no-cache\` (cold: every chart rendered, sandboxed) | $cold_s |
| \`helm template\` per release, 2 in parallel (floor) | $floor |
| cold / floor (target ≤ 1.0) | $ratio |
| \`fluxplan plan\` of a one-release values change, warm cache (target < 0.3) | $plan |

Load while measured: $(cut -d' ' -f1-3 /proc/loadavg).
REPORT
cat bench/out/helm.md
