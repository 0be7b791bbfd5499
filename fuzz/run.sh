#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 20: the CI smoke run), seeded from fixtures/.
#   fuzz/run.sh 600            # ten minutes per target
#   JOBS=2 fuzz/run.sh 600     # two targets at a time
# cargo-fuzz needs nightly features; RUSTC_BOOTSTRAP=1 enables them on the stable toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-20}
JOBS=${JOBS:-1}
export RUSTC_BOOTSTRAP=1
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
targets="csr_parse decide attributes_file policy_file classification"
seed() {
  local t=$1 c=fuzz/corpus/$1
  mkdir -p "$c"
  case $t in
    csr_parse|decide) cp fixtures/csr/* "$c"/ ; cp fixtures/puppet7/*.pem "$c"/ ;;
    attributes_file) cp fixtures/puppet7/csr_attributes.example.yaml "$c"/
                     for v in fixtures/vectors/*.json; do cp "$v" "$c"/; done ;;
    policy_file) cp fixtures/policy*.toml policy/*.toml "$c"/ ;;
    classification) cp fixtures/classification.yaml "$c"/ ;;
  esac
}
cargo fuzz build -O
run() {
  local t=$1
  seed "$t"
  echo "== fuzz $t for ${SECONDS_PER_TARGET}s"
  cargo fuzz run -O "$t" "fuzz/corpus/$t" -- -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 > "fuzz/$t.log" 2>&1 || { tail -50 "fuzz/$t.log"; return 1; }
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb|Done" "fuzz/$t.log" | sed "s/^/$t: /"
}
export -f run seed
export SECONDS_PER_TARGET
echo $targets | tr ' ' '\n' | xargs -P "$JOBS" -I{} bash -c 'run {}'
