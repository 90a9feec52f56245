#!/usr/bin/env bash
# Load run: the real `fluxplan serve` (debug build) against the fake GitHub of the integration
# tests, PULLS pull requests (default 40) each delivered 4 times (opened, its redelivery with the
# same id, a push, a second delivery of the push) from 8 senders at once. Reports deliveries
# accepted, webhook latency (p50/p95/max), time from the first delivery to the last pull
# request's final status, and the peak memory of serve (VmHWM). Writes bench/out/load.md
# (bench/out/load-postgres.md for PostgreSQL).
# Usage: bench/load.sh [PULLS] [sqlite|postgres]   (postgres: the one at 127.0.0.1:5432)
set -euo pipefail
cd "$(dirname "$0")/.."
pulls=${1:-40}
database=${2:-sqlite}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
out=bench/out/load.md
[ "$database" = postgres ] && out=bench/out/load-postgres.md
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
FLUXPLAN_LOAD_OUT=$work/figures.md FLUXPLAN_LOAD_PULLS=$pulls FLUXPLAN_LOAD_DATABASE=$database \
  cargo test --quiet --test integration -- --ignored --exact load::load_run >&2
{
  echo "# Load run"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC') · \`bench/load.sh $pulls $database\` · debug build · $(nproc) cores ·"
  echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other work shares the machine)"
  echo
  cat "$work/figures.md"
} > "$out"
cat "$out"
