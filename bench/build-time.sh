#!/usr/bin/env bash
# Clean build time of what `cargo run -- demo` compiles (the dev profile, every dependency from
# an empty target directory; the registry's sources already downloaded), and the crypto crates
# in it. Writes bench/out/build-time.md. Run it on an idle machine: it says the load it saw.
#   bench/build-time.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fetch --locked >/dev/null
target=$(mktemp -d)
trap 'rm -rf "$target"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s.%N)
CARGO_TARGET_DIR="$target" cargo build --locked --bin fluxplan 2>"$target/build.log"
end=$(date +%s.%N)
seconds=$(awk -v s="$start" -v e="$end" 'BEGIN { print e - s }')
units=$(grep -c "Compiling" "$target/build.log" || true)
crypto=$(cargo tree -e normal --prefix none 2>/dev/null | grep -oE '^(ring|aws-lc-sys|aws-lc-rs|rsa|openssl-sys) v[0-9.]+' | sort -u | tr '\n' ' ')
out=bench/out/build-time.md
{
  echo "# Clean build of \`cargo run -- demo\` ($(date -u +%Y-%m-%d), $(nproc) cores, $(rustc --version | cut -d' ' -f2))"
  echo
  echo "Reproduce: \`bench/build-time.sh\` (\`cargo build --locked --bin fluxplan\` into an empty target directory, dev profile)."
  echo
  echo "| wall (s) | crates compiled | crypto crates in the build | load before |"
  echo "|---|---|---|---|"
  printf '| %.0f | %s | %s | %s |\n' "$seconds" "$units" "${crypto:-none}" "$load_before"
} >"$out"
cat "$out"
