#!/usr/bin/env bash
# ResourceSet benchmark: a d2-fleet-shaped fleet (bench/gen-tenant-fleet.py) of TENANTS tenants in
# 4 ResourceSets synced by 3 clusters. Measures a cold build (every template rendered for every
# input, every generated Kustomization walked), a warm plan of a template change (every tenant's
# RoleBinding updated) and a warm plan of one tenant removed. Medians of RUNS runs.
# Writes bench/out/resourceset.md. Usage: bench/resourceset.sh [TENANTS] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
tenants=${1:-200}
runs=${2:-5}
cargo build --release --quiet
bin=$PWD/target/release/fluxplan
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fleet=$work/fleet
python3 bench/gen-tenant-fleet.py "$fleet" "$tenants"

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
# A non-zero exit (plan: 1 for changes, 2 blocked) adds a line before the times: the last is kept.
timed() { /usr/bin/time -f "%e %M" -o "$work/time" "$@" > /dev/null 2>&1 || true; tail -1 "$work/time"; }
commit() { git -C "$fleet" -c user.email=b@example.com -c user.name=bench commit -qam "$1"; }

cold=$(for _ in $(seq "$runs"); do timed "$bin" build --repo "$fleet" --rev HEAD --format ids --no-cache; done | median)
objects=$("$bin" build --repo "$fleet" --rev HEAD --format json --no-cache 2>/dev/null \
  | python3 -c 'import json,sys; r=json.load(sys.stdin); print(sum(len(k["objects"]) for c in r["clusters"] for k in c["kustomizations"] if k["kind"]=="ResourceSet"))')

base=$(git -C "$fleet" rev-parse HEAD)
"$bin" build --repo "$fleet" --rev HEAD --format ids --cache-dir "$work/cache" > /dev/null 2>&1
sed -i 's/name: admin$/name: edit/' "$fleet"/tenants/set-*.yaml
commit "tenants may only edit"
template_head=$(git -C "$fleet" rev-parse HEAD)
"$bin" plan --repo "$fleet" --base "$base" --head HEAD --cache-dir "$work/cache" --format json > /dev/null 2>&1 || true
template=$(for _ in $(seq "$runs"); do timed "$bin" plan --repo "$fleet" --base "$base" --head HEAD --cache-dir "$work/cache" --format json; done | median)
python3 - "$fleet/tenants/set-0.yaml" <<'PY'
import sys
text = open(sys.argv[1]).read()
open(sys.argv[1], "w").write(text.replace("    - tenant: team-0-0\n      replicas: 1\n", "", 1))
PY
commit "offboard team-0-0"
"$bin" plan --repo "$fleet" --base "$template_head" --head HEAD --cache-dir "$work/cache" --format json > /dev/null 2>&1 || true
removal=$(for _ in $(seq "$runs"); do timed "$bin" plan --repo "$fleet" --base "$template_head" --head HEAD --cache-dir "$work/cache" --format json; done | median)

mkdir -p bench/out
cat > bench/out/resourceset.md <<REPORT
# ResourceSet benchmark ($(date -u +%F), $(nproc) cores, $($bin --version))

Fleet: bench/gen-tenant-fleet.py, $tenants tenants in 4 ResourceSets of 8 templates each, synced
by 3 clusters ($objects generated objects in all). Reproduce: \`bench/resourceset.sh $tenants $runs\`
(medians of $runs runs).

| what | wall (s) |
|---|---|
| \`fluxplan build --no-cache\` (cold: every template for every input, in 3 clusters) | $cold |
| \`fluxplan plan\`, a template change (every tenant updated), warm cache | $template |
| \`fluxplan plan\`, one tenant's input removed, warm cache | $removal |

Load while measured: $(cut -d' ' -f1-3 /proc/loadavg).
REPORT
cat bench/out/resourceset.md
