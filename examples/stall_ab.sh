#!/usr/bin/env bash
# Two or more builds of vouch under load in the two situations where a whole-store
# operation used to hold the store's lock for seconds, one build after the other:
#
#   dirty    a store of 100,000 revoked certificates written by bench_store and not
#            synced (a restore, a generated store): the checkpoint's syncfs flushes them
#            all. PUT + GET at 256 agents, 16 each.
#   prune    an expired replay-journal bucket of 200,000 entries (a busy hour, a day
#            later): the journal's prune removes it. PUT + GET at 64 agents, 100 each.
#
#   cargo build --release --features bench --bin vouch --example bench_store
#   examples/stall_ab.sh /tmp/vouch-before /tmp/vouch-after
#
# Settings: CASES (dirty prune; default both), PORT (the first port used; default 18600),
# LOAD (the load tool; default this checkout's release build), BENCH_STORE (the store
# generator), KEEP=1 (keep the stores and logs). Not part of `cargo test`. Each case waits
# 20 s after the previous one's clean-up: on ext4, creating files right after deleting
# many is several times slower, and the next run would measure that.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
LOAD=${LOAD:-${CARGO_TARGET_DIR:-$here/target}/release/vouch}
BENCH_STORE=${BENCH_STORE:-${CARGO_TARGET_DIR:-$here/target}/release/examples/bench_store}
CASES=${CASES:-dirty prune}
PORT=${PORT:-18600}
[ "$#" -ge 1 ] || { echo "usage: $0 VOUCH_BINARY... (see the comment at the top)" >&2; exit 2; }
"$LOAD" bench --help >/dev/null 2>&1 ||
  { echo "$LOAD has no bench command: cargo build --release --features bench (or set LOAD)" >&2; exit 2; }
[ -x "$BENCH_STORE" ] || { echo "no $BENCH_STORE: cargo build --release --features bench --example bench_store" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed to write the journal's entries" >&2; exit 2; }
for bin in "$@"; do
  "$bin" --version >/dev/null 2>&1 || { echo "$bin: not a vouch binary that runs" >&2; exit 2; }
done
for c in $CASES; do
  case $c in dirty | prune) ;; *) echo "CASES: unknown case '$c' (dirty prune)" >&2; exit 2 ;; esac
done
case $PORT in '' | *[!0-9]*) echo "PORT: a port number, not '$PORT'" >&2; exit 2 ;; esac
[ "$PORT" -ge 1024 ] && [ "$PORT" -le 64000 ] || { echo "PORT: from 1024 to 64000, not $PORT" >&2; exit 2; }
work=$(mktemp -d /var/tmp/vouch-stall.XXXXXX)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then echo "kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

# start BIN DIR PORT: `vouch serve` with a P-256 CA, until it listens.
start() {
  "$1" --dir "$2" serve --key-type p256 --listen "127.0.0.1:$3" >"$2.out" 2>&1 &
  pid=$!
  for _ in $(seq 240); do
    grep -q '"event":"listening"' "$2.out" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  echo "$(basename "$1") did not start on port $3 (another PORT= may help):" >&2
  cat "$2.out" >&2
  exit 1
}
stop() { kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=; }

echo "machine: $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "columns: case build | agents certs failed seconds certs/s p50_ms p99_ms peak_RSS server_CPU/cert client_CPU/cert bytes/cert"
port=$PORT
for c in $CASES; do
  for bin in "$@"; do
    d=$work/$c-$(basename "$bin")
    port=$((port + 1))
    start "$bin" "$d" "$port"
    "$LOAD" bench serve --addr "127.0.0.1:$port" --dir "$d" --agents 8 --per-agent 10 >/dev/null
    stop
    if [ "$c" = dirty ]; then
      "$BENCH_STORE" "$d" 100000 100000 >/dev/null
      "$bin" --dir "$d" crl >/dev/null
      agents=256 per=16
    else
      # Three days old: more than a day past its hour, so the journal removes it.
      sync
      python3 - "$d/replay/$(date -u -d '-3 days' +%Y%m%d%H)" <<'PY'
import os, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
entry = b'{"certname":"x.example","holder":"h","expiry":"2020-01-01T00:00:00Z","time":"2020-01-01T00:00:00Z","issued":true}'
for i in range(200000):
    with open(os.path.join(d, '%064x' % i), 'wb') as f:
        f.write(entry)
PY
      sync
      agents=64 per=100
    fi
    start "$bin" "$d" "$port"
    line=$("$LOAD" bench serve --addr "127.0.0.1:$port" --dir "$d" --agents "$agents" --per-agent "$per" --server-pid "$pid" | tail -1)
    echo "$c $(basename "$bin") | $line"
    stop
    # What the maintenance pruned during the run (its line comes when a run ends: after 10 s).
    grep '"event":"journal-pruned"' "$d.out" | head -1 || true
    sync
    sleep 20
  done
done
