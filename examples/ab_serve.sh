#!/usr/bin/env bash
# Two or more builds of vouch side by side under the same load, alternating, in one sitting:
# each build serves a fresh store (P-256 and/or RSA-4096 CA) and `vouch bench serve` (the
# load tool of the current build) runs PUT + GET at 64 agents against it, twice per build.
# Not part of `cargo test`. Stores are kept until the end: on ext4, creating files right
# after deleting many is several times slower (the inode allocator skips recently freed
# inodes), so deleting one run's store before the next would slow the next.
#
#   cargo build --release --features bench --bin vouch
#   cp target/release/vouch /tmp/vouch-after        # and a /tmp/vouch-before from another commit
#   KEYS="p256 rsa4096" examples/ab_serve.sh /tmp/vouch-before /tmp/vouch-after
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
LOAD=${LOAD:-${CARGO_TARGET_DIR:-$here/target}/release/vouch}
KEYS=${KEYS:-p256}
ROUNDS=${ROUNDS:-2}
PORT=${PORT:-18400}
[ "$#" -ge 1 ] || { echo "usage: $0 VOUCH_BINARY..." >&2; exit 2; }
"$LOAD" bench --help >/dev/null 2>&1 || { echo "$LOAD has no bench command: cargo build --release --features bench" >&2; exit 2; }
work=$(mktemp -d /var/tmp/vouch-ab.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
echo "machine: $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
port=$PORT
for round in $(seq "$ROUNDS"); do
  for bin in "$@"; do
    for key in $KEYS; do
      d=$work/$(basename "$bin")-$key-$round
      port=$((port + 1))
      "$bin" --dir "$d" serve --key-type "$key" --listen "127.0.0.1:$port" >"$d.out" 2>&1 &
      pid=$!
      pids+=("$pid")
      for _ in $(seq 120); do grep -q '"event":"listening"' "$d.out" 2>/dev/null && break; sleep 0.25; done
      grep -q '"event":"listening"' "$d.out" || { cat "$d.out" >&2; exit 1; }
      "$LOAD" bench serve --addr "127.0.0.1:$port" --dir "$d" --agents 8 --per-agent 10 >/dev/null
      per=32
      [ "$key" = rsa4096 ] && per=12
      line=$("$LOAD" bench serve --addr "127.0.0.1:$port" --dir "$d" --agents 64 --per-agent "$per" --server-pid "$pid" | tail -1)
      echo "round $round  $(basename "$bin")  $key  $line"
      kill -TERM "$pid"
      wait "$pid" 2>/dev/null || true
    done
  done
done
echo "columns: agents certs failed seconds certs/s p50_ms p99_ms peak_RSS server_CPU/cert client_CPU/cert bytes/cert"
