#!/usr/bin/env bash
# HelmRelease benchmark on real-shaped charts (bench/gen-helm-library.py): RELEASES releases of
# one chart whose vendored library chart holds LIBRARY template files, plus two CRD-heavy charts
# (one 1 MB CRD; 20 CRDs from templates), fetched from a Helm repository served on loopback.
# Measures in one run: fluxplan's cold build (every chart fetched, prepared and rendered), the
# floor of one `helm template` per release of its archive run 2 at a time, a warm `fluxplan plan`
# of a one-release values change, and the peak memory of the cold build (bench/peak-rss.py).
# Medians of RUNS runs. Writes bench/out/helm.md (section "Real-shaped charts").
# Usage: bench/helm-library.sh [RELEASES] [LIBRARY] [RUNS]
# FLUXPLAN_BIN=PATH measures that binary instead of building the release one.
set -euo pipefail
cd "$(dirname "$0")/.."
releases=${1:-40}
library=${2:-100}
runs=${3:-5}
if [ -n "${FLUXPLAN_BIN:-}" ]; then
  bin=$FLUXPLAN_BIN
else
  cargo build --release --quiet
  bin=$PWD/target/release/fluxplan
fi
helm=$(scripts/fetch-helm.sh 4)
work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 bench/gen-helm-library.py "$helm" "$work/fleet" "$work/repo" "http://127.0.0.1:$port" \
  "$releases" "$library" "$work/floor.txt"
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/repo" > /dev/null 2>&1 &
server=$!
trap 'kill $server; rm -rf "$work"' EXIT
fleet=$work/fleet
hosts=(--chart-hosts "127.0.0.1:$port")

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
# A non-zero exit (plan: 1 for changes) adds a line before the times: the last line is kept.
# Wall seconds, then CPU seconds (user + system, children included: every helm run).
timed() {
  /usr/bin/time -f "%e %U %S" -o "$work/time" "$@" > /dev/null 2>&1 || true
  tail -1 "$work/time" | awk '{ printf "%s %.2f\n", $1, $2 + $3 }'
}
cpu() { awk '{ print $2 }' | median; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

load_before=$(load)
cold=$(for _ in $(seq "$runs"); do timed "$bin" build --repo "$fleet" --rev HEAD --format ids --no-cache "${hosts[@]}"; done)
cold_s=$(echo "$cold" | median)
cold_cpu=$(echo "$cold" | cpu)
floors=$(for _ in $(seq "$runs"); do
  timed xargs -P2 -L1 sh -c 'HOME=/nonexistent "$0" template "$1" "$2" --namespace "$3" --values "$4" --include-crds' "$helm" < "$work/floor.txt"
done)
floor=$(echo "$floors" | median)
floor_cpu=$(echo "$floors" | cpu)
peak=$(python3 bench/peak-rss.py "$bin" build --repo "$fleet" --rev HEAD --format ids --no-cache "${hosts[@]}")
units=$("$bin" build --repo "$fleet" --rev HEAD --format json --no-cache "${hosts[@]}" 2>/dev/null \
  | python3 -c 'import json,sys; r=json.load(sys.stdin); print(sum(1 for c in r["clusters"] for k in c["kustomizations"] if k["kind"]=="HelmRelease" and k["status"]=="rendered"))')

# One release's values change, as in a typical PR; the cache holds the base.
base=$(git -C "$fleet" rev-parse HEAD)
"$bin" build --repo "$fleet" --rev HEAD --format ids --cache-dir "$work/cache" "${hosts[@]}" > /dev/null 2>&1
sed -i 's/replicas: 1$/replicas: 9/' "$fleet/apps/app-0.yaml"
git -C "$fleet" -c user.email=b@example.com -c user.name=bench commit -qam "app-0: 9 replicas"
plan=("$bin" plan --repo "$fleet" --base "$base" --head HEAD --cache-dir "$work/cache" --format json "${hosts[@]}")
"${plan[@]}" > /dev/null 2>&1 || true
store() { { find "$work/cache/unpacked" -mindepth 2 -maxdepth 2 2> /dev/null || true; } | sort | md5sum; }
entries=$(store)
warm=$(for _ in $(seq "$runs"); do timed "${plan[@]}"; done | awk '{ print $1 }' | median)
unchanged=$([ "$entries" = "$(store)" ] && echo yes || echo no)
load_after=$(load)

ratio=$(awk -v a="$cold_s" -v b="$floor" 'BEGIN { printf "%.2f", a / b }')
cpu_ratio=$(awk -v a="$cold_cpu" -v b="$floor_cpu" 'BEGIN { printf "%.2f", a / b }')
mkdir -p bench/out
report=$(cat <<REPORT
## Real-shaped charts ($(date -u +%F), $(nproc) cores, $($bin --version | head -1), $($helm version --template '{{.Version}}'))

Fleet: bench/gen-helm-library.py, $releases HelmReleases of one chart whose library subchart holds
$library template files, with different values, plus a chart with a 1 MB CRD and one of 20 CRDs
from templates, fetched from a Helm repository on loopback ($units rendered). Reproduce:
\`bench/helm-library.sh $releases $library $runs\` (medians of $runs runs; binary: $(realpath --relative-to="$PWD" "$bin")).

| what | wall (s) | CPU (s, helm included) |
|---|---|---|
| \`fluxplan build --no-cache\` (cold: every chart fetched, prepared, rendered) | $cold_s | $cold_cpu |
| \`helm template\` of each release's archive, 2 in parallel (floor) | $floor | $floor_cpu |
| cold / floor (target ≤ 1.0) | $ratio | $cpu_ratio |
| \`fluxplan plan\` of a one-release values change, warm cache (target < 0.3) | $warm | |

Peak memory of the cold build, whole process tree (bench/peak-rss.py): $peak MiB. Chart store
unchanged by the warm plans: $unchanged.

Load average (1, 5, 15 min) before: $load_before; after: $load_after. The machine is shared with
other engineers' builds while measured: the figures move with the load.
REPORT
)
python3 - "$report" <<'PY'
import re, sys
path = "bench/out/helm.md"
text = open(path).read() if __import__("os").path.exists(path) else ""
section = sys.argv[1].rstrip() + "\n"
# Replace the section this script wrote before, keep everything else.
text = re.sub(r"## Real-shaped charts .*?(?=\n## |\Z)", "", text, flags=re.S).rstrip() + "\n\n"
open(path, "w").write(text + section)
PY
echo "$report"
