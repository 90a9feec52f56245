#!/usr/bin/env bash
# Offline chart hosts: a fleet of RELEASES HelmReleases whose charts live on HOSTS hosts that do
# not resolve (`.invalid`; half Helm repositories, half OCI registries, every release its own
# chart), built cold with chart fetching on and with --no-chart-fetch. A host that failed is asked
# once per plan, so the two should be close (target: fetching ≤ 1.5× --no-chart-fetch). Medians
# of RUNS runs. Writes bench/out/chart-hosts.md.
# Usage: bench/chart-hosts.sh [RELEASES] [HOSTS] [RUNS]
# FLUXPLAN_BIN: the binary to measure (default: a release build); BEFORE_BIN: another binary
# measured the same way, for comparison (an older build).
set -euo pipefail
cd "$(dirname "$0")/.."
releases=${1:-68}
hosts=${2:-10}
runs=${3:-5}
bin=${FLUXPLAN_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet
  bin=target/release/fluxplan
fi
bin=$(realpath "$bin")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fleet=$work/fleet
mkdir -p "$fleet/clusters/prod" "$fleet/apps"
cat > "$fleet/clusters/prod/apps.yaml" <<'EOF'
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m
  path: ./apps
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
EOF
for i in $(seq 0 $((releases - 1))); do
  host=$((i % hosts))
  if [ $((host % 2)) = 0 ]; then
    source="apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata:
  name: app-$i
  namespace: apps
spec:
  url: https://charts-$host.fluxplan.invalid/stable"
    chart="  chart:
    spec:
      chart: app-$i
      version: 1.x
      sourceRef:
        kind: HelmRepository
        name: app-$i"
  else
    source="apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: app-$i
  namespace: apps
spec:
  url: oci://registry-$host.fluxplan.invalid/charts/app-$i
  ref:
    tag: 1.0.0"
    chart="  chartRef:
    kind: OCIRepository
    name: app-$i"
  fi
  cat > "$fleet/apps/app-$i.yaml" <<EOF
$source
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: app-$i
  namespace: apps
spec:
  interval: 10m
$chart
  values:
    replicaCount: 1
EOF
done
git -C "$fleet" init -q
git -C "$fleet" add -A
git -C "$fleet" -c user.email=b@example.com -c user.name=bench commit -qm fleet

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
timed() { /usr/bin/time -f "%e" -o "$work/time" "$@" > /dev/null 2>&1 || true; tail -1 "$work/time"; }
# Every release must be there and unavailable for the host's own reason (never a zero measured
# for a build that failed early).
check() {
  local program=$1
  local external
  external=$("$program" build --repo "$fleet" --rev HEAD --format json --no-cache 2>/dev/null | python3 -c '
import json, sys
render = json.load(sys.stdin)
units = [k for c in render["clusters"] for k in c["kustomizations"] if k["kind"] == "HelmRelease"]
print(sum(1 for k in units if k["status"] == "external"))')
  [ "$external" = "$releases" ] || { echo "$program: $external of $releases releases external" >&2; exit 1; }
}
measure() {
  local program=$1
  shift
  for _ in $(seq "$runs"); do timed "$program" build --repo "$fleet" --rev HEAD --format ids --no-cache "$@"; done | median
}
check "$bin"
offline=$(measure "$bin" --no-chart-fetch)
fetching=$(measure "$bin")
ratio=$(awk -v a="$fetching" -v b="$offline" 'BEGIN { printf "%.2f", a / b }')
before=""
if [ -n "${BEFORE_BIN:-}" ]; then
  check "$BEFORE_BIN"
  before_offline=$(measure "$BEFORE_BIN" --no-chart-fetch)
  before_fetching=$(measure "$BEFORE_BIN")
  before_ratio=$(awk -v a="$before_fetching" -v b="$before_offline" 'BEGIN { printf "%.2f", a / b }')
  before="| before (\`$BEFORE_BIN\`): fetching / --no-chart-fetch | $before_fetching / $before_offline = $before_ratio |"
fi

mkdir -p bench/out
cat > bench/out/chart-hosts.md <<REPORT
# Offline chart hosts ($(date -u +%F), $(nproc) cores, $("$bin" --version | head -1))

Fleet: $releases HelmReleases, each its own chart, on $hosts hosts that do not resolve (half Helm
repositories, half OCI registries), applied by one Kustomization. Command: \`${FLUXPLAN_BIN:+FLUXPLAN_BIN=$FLUXPLAN_BIN }${BEFORE_BIN:+BEFORE_BIN=$BEFORE_BIN }bench/chart-hosts.sh $releases $hosts $runs\`
(\`fluxplan build --no-cache\`, medians of $runs runs; binary: \`$bin\`).

| what | wall (s) |
|---|---|
| \`fluxplan build --no-chart-fetch\` | $offline |
| \`fluxplan build\` (each host asked once) | $fetching |
| fetching / --no-chart-fetch (target ≤ 1.5) | $ratio |
$before

Load average while measured: $(cut -d' ' -f1-3 /proc/loadavg).
REPORT
cat bench/out/chart-hosts.md
