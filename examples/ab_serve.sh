#!/usr/bin/env bash
# Two or more builds of vouch side by side under the same load, alternating, in one sitting:
# each build serves a fresh store (per key type in KEYS) and `vouch bench serve` (the load
# tool of the current build, LOAD) runs PUT + GET at 64 agents against it, ROUNDS times per
# build. Not part of `cargo test`.
#
#   cargo build --release --features bench --bin vouch
#   cp target/release/vouch /tmp/vouch-after
#   git worktree add /tmp/before COMMIT                   # the build to compare with
#   (cd /tmp/before && cargo build --release --bin vouch) && cp /tmp/before/target/release/vouch /tmp/vouch-before
#   KEYS="p256 rsa4096" examples/ab_serve.sh /tmp/vouch-before /tmp/vouch-after
#
# Settings: KEYS (p256 p384 ed25519 rsa2048 rsa3072 rsa4096; default p256), ROUNDS (1-20,
# default 2), PER (certificates per agent, 1-1000; default 32, 12 for RSA: 2,048 and 768
# certificates, too few to reach the store's 8 MiB checkpoint; 200 spans two or three of
# them), PORT (the first of the ports used, one per run; default 18400), LOAD (the load
# tool), KEEP=1 (keep the stores and the servers' logs).
#
# The stores are kept until the end and deleted then: on ext4, creating files right after
# deleting many is several times slower (the inode allocator skips recently freed inodes),
# so a run right after another one's deletion measures that; wait a few minutes between runs.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
LOAD=${LOAD:-${CARGO_TARGET_DIR:-$here/target}/release/vouch}
KEYS=${KEYS:-p256}
ROUNDS=${ROUNDS:-2}
PORT=${PORT:-18400}
[ "$#" -ge 1 ] || { echo "usage: $0 VOUCH_BINARY... (see the comment at the top)" >&2; exit 2; }
"$LOAD" bench --help >/dev/null 2>&1 ||
  { echo "$LOAD has no bench command: cargo build --release --features bench (or set LOAD)" >&2; exit 2; }
for bin in "$@"; do
  "$bin" --version >/dev/null 2>&1 || { echo "$bin: not a vouch binary that runs" >&2; exit 2; }
done
for key in $KEYS; do
  case $key in p256 | p384 | ed25519 | rsa2048 | rsa3072 | rsa4096) ;;
    *) echo "KEYS: unknown key type '$key' (p256 p384 ed25519 rsa2048 rsa3072 rsa4096)" >&2; exit 2 ;;
  esac
done
case $ROUNDS in [1-9] | 1[0-9] | 20) ;; *) echo "ROUNDS: a number from 1 to 20, not '$ROUNDS'" >&2; exit 2 ;; esac
case ${PER:-} in '' | [1-9] | [1-9][0-9] | [1-9][0-9][0-9] | 1000) ;;
  *) echo "PER: a number from 1 to 1000, not '$PER'" >&2; exit 2 ;;
esac
case $PORT in '' | *[!0-9]*) echo "PORT: a port number, not '$PORT'" >&2; exit 2 ;; esac
[ "$PORT" -ge 1024 ] && [ "$PORT" -le 64000 ] || { echo "PORT: from 1024 to 64000, not $PORT" >&2; exit 2; }
work=$(mktemp -d /var/tmp/vouch-ab.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "${KEEP:-}" ]; then echo "kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
echo "machine: $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "columns: round build key | agents certs failed seconds certs/s p50_ms p99_ms peak_RSS server_CPU/cert client_CPU/cert bytes/cert"
port=$PORT
for round in $(seq "$ROUNDS"); do
  for bin in "$@"; do
    for key in $KEYS; do
      d=$work/$(basename "$bin")-$key-$round
      port=$((port + 1))
      "$bin" --dir "$d" serve --key-type "$key" --listen "127.0.0.1:$port" >"$d.out" 2>&1 &
      pid=$!
      pids+=("$pid")
      for _ in $(seq 240); do
        grep -q '"event":"listening"' "$d.out" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
      done
      grep -q '"event":"listening"' "$d.out" ||
        { echo "$(basename "$bin") did not start on port $port (another PORT= may help):" >&2; cat "$d.out" >&2; exit 1; }
      "$LOAD" bench serve --addr "127.0.0.1:$port" --dir "$d" --agents 8 --per-agent 10 >/dev/null
      per=${PER:-32}
      case $key in rsa*) per=${PER:-12} ;; esac
      line=$("$LOAD" bench serve --addr "127.0.0.1:$port" --dir "$d" --agents 64 --per-agent "$per" --server-pid "$pid" | tail -1)
      echo "$round $(basename "$bin") $key | $line"
      kill -TERM "$pid"
      wait "$pid" 2>/dev/null || true
    done
  done
done
