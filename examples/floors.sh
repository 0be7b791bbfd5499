#!/usr/bin/env bash
# Where a certificate's server CPU goes, part by part, in one sitting: for each CA key type
# and round, three runs of 64 agents on new stores, each warmed up with 80 certificates that
# are not counted, then `vouch bench decide` on one core:
#   shipped    the build as shipped, PUT + GET (the figure of examples/cpu_per_cert.sh)
#   transport  the same build, `vouch bench serve --transport-only`: two GETs of the CA
#              certificate instead of PUT + GET (TLS, HTTP, the request log, the threads;
#              no CSR, no decision, no signature, no store)
#   nostore    the measuring build of examples/ceiling.patch with VOUCH_CEILING set: PUT +
#              GET with every check and signature, nothing stored (never a CA)
#   decide     the decision and issuance alone on one core: no network, no store, no threads
# So: shipped - nostore is what the durable store costs, nostore - transport - decide what
# the request path costs beside its signatures, and decide + transport is the floor of a
# service that keeps every check. Not part of `cargo test`.
#
#   cargo build --release --features bench --bin vouch
#   examples/floors.sh                          # ROUNDS=3 KEYS="p256 rsa4096"
#   NOSTORE=/tmp/vouch-ceil ROUNDS=1 examples/floors.sh   # a ceiling build made before
#
# Settings: ROUNDS (1-20, default 3), KEYS (default "p256 rsa4096"), VOUCH (default
# target/release/vouch, built with the `bench` feature), NOSTORE (a build with
# examples/ceiling.patch; built here from HEAD as examples/ceiling.sh does if unset; a
# build that stores what it serves is refused after its first run), PORT (the first of the
# ports used, one per run; default 18700), KEEP=1 (keep the stores). Started within minutes
# of another run's end (which deletes its stores), a run measures the slow inode allocation
# after a deletion (docs/benchmarks.md, section 9): wait five minutes, or use KEEP=1. Certificates per run: 4,096 P-256 (64 x 64),
# 1,024 RSA (64 x 16), 4,096 transport pairs.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in
  '') ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: $0 (no arguments; settings in the environment: see $0 --help)" >&2; exit 2 ;;
esac
VOUCH=${VOUCH:-${CARGO_TARGET_DIR:-$here/target}/release/vouch}
KEYS=${KEYS:-p256 rsa4096}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-18700}
"$VOUCH" bench serve --help 2>/dev/null | grep -q transport-only ||
  { echo "$VOUCH has no 'bench serve --transport-only': cargo build --release --features bench --bin vouch (or set VOUCH)" >&2; exit 2; }
[ -n "${KEYS// /}" ] || { echo "KEYS: one key type or more (p256 p384 ed25519 rsa2048 rsa3072 rsa4096), not empty" >&2; exit 2; }
for key in $KEYS; do
  case $key in p256 | p384 | ed25519 | rsa2048 | rsa3072 | rsa4096) ;;
    *) echo "KEYS: unknown key type '$key' (p256 p384 ed25519 rsa2048 rsa3072 rsa4096)" >&2; exit 2 ;;
  esac
done
case $ROUNDS in [1-9] | 1[0-9] | 20) ;; *) echo "ROUNDS: a number from 1 to 20, not '$ROUNDS'" >&2; exit 2 ;; esac
case $PORT in '' | *[!0-9]*) echo "PORT: a port number, not '$PORT'" >&2; exit 2 ;; esac
[ "$PORT" -ge 1024 ] && [ "$PORT" -le 64000 ] || { echo "PORT: from 1024 to 64000, not $PORT" >&2; exit 2; }
work=$(mktemp -d /var/tmp/vouch-floors.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  git -C "$here" worktree remove --force "$work/src" 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then echo "kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
if [ -z "${NOSTORE:-}" ]; then
  git -C "$here" apply --check "$here/examples/ceiling.patch" ||
    { echo "examples/ceiling.patch no longer applies to this checkout: remake it" >&2; exit 2; }
  git -C "$here" worktree add -q --detach "$work/src" HEAD
  git -C "$work/src" apply "$here/examples/ceiling.patch"
  target=${CARGO_TARGET_DIR:-$here/target}/ceiling
  (cd "$work/src" && CARGO_TARGET_DIR=$target cargo build --release --features bench --bin vouch) >&2
  NOSTORE=$target/release/vouch
fi
"$NOSTORE" --version >/dev/null 2>&1 || { echo "NOSTORE=$NOSTORE: not a vouch binary that runs" >&2; exit 2; }
port=$((PORT - 1))
# One run: BIN KEY NAME TRANSPORT(0/1) PER_AGENT [ENV...]; prints "rate p99 rss cpu user sys".
run() {
  local bin=$1 key=$2 d=$work/$3 transport=$4 per=$5 pid t0 t1 extra=()
  shift 5
  port=$((port + 1))
  env "$@" "$bin" --dir "$d" serve --key-type "$key" --listen "127.0.0.1:$port" >"$d.out" 2>&1 &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 240); do
    grep -q '"event":"listening"' "$d.out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  grep -q '"event":"listening"' "$d.out" || { echo "$bin did not start on port $port:" >&2; cat "$d.out" >&2; exit 1; }
  "$VOUCH" bench serve --addr "127.0.0.1:$port" --dir "$d" --agents 8 --per-agent 10 >/dev/null
  [ "$transport" = 1 ] && extra=(--transport-only)
  t0=$(sed 's/.*) //' "/proc/$pid/stat" | awk '{ print $12, $13 }')
  "$VOUCH" bench serve --addr "127.0.0.1:$port" --dir "$d" --agents 64 --per-agent "$per" --server-pid "$pid" \
    "${extra[@]}" >"$d.row"
  t1=$(sed 's/.*) //' "/proc/$pid/stat" | awk '{ print $12, $13 }')
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  awk -v t="$t0 $t1" -v hz="$(getconf CLK_TCK)" '$1 ~ /^[0-9]+$/ && NF >= 14 {
    split(t, k, " ")
    if ($3 != 0) { print $3 " of " $2 + $3 " certificates failed" > "/dev/stderr" }
    printf "%s %s %s %s %.3f %.3f\n", $5, $7, $8, $10, (k[3] - k[1]) * 1000 / hz / $2, (k[4] - k[2]) * 1000 / hz / $2 }' "$d.row"
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "<!-- $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); $VOUCH at $(git -C "$here" rev-parse --short HEAD); ROUNDS=$ROUNDS -->"
echo
echo "| round | CA key | run | certs/s | p99 | peak RSS | **server CPU/cert** | user / system |"
echo "|---|---|---|---|---|---|---|---|"
: >"$work/all"
for round in $(seq "$ROUNDS"); do
  for key in $KEYS; do
    per=64
    case $key in rsa*) per=16 ;; esac
    for what in shipped transport nostore; do
      case $what in
        shipped) r=$(run "$VOUCH" "$key" "$what-$key-$round" 0 "$per") ;;
        transport) r=$(run "$VOUCH" "$key" "$what-$key-$round" 1 64) ;;
        nostore)
          r=$(run "$NOSTORE" "$key" "$what-$key-$round" 0 "$per" VOUCH_CEILING=1)
          kept=$(find "$work/$what-$key-$round/ca/signed" -type f 2>/dev/null | wc -l)
          [ "$kept" -lt 80 ] || {
            echo "NOSTORE=$NOSTORE stored $kept certificates: not a build of examples/ceiling.patch (unset NOSTORE to build one)" >&2
            exit 2
          }
          ;;
      esac
      read -r rate p99 rss cpu user sys <<<"$r"
      LC_ALL=C printf "| %s | %s | %s | %'.0f/s | %.0f ms | %.0f MB | **%.3f ms** | %.3f / %.3f ms |\n" \
        "$round" "$key" "$what" "$rate" "$p99" "$rss" "$cpu" "$user" "$sys"
      echo "$key $what $cpu" >>"$work/all"
    done
  done
  # One core, no network, no store: the decision and issuance (the CA's signature included).
  "$VOUCH" bench decide --ca-keys "$(echo "$KEYS" | tr ' ' ,)" --client-keys rsa2048 --seconds 2 |
    awk -v r="$round" '$2 == "rsa2048" && $5 > 0 {
      printf "| %s | %s | decide | %d/s | | | **%.3f ms** | one core |\n", r, $1, $5, 1000 / $5; print $1, "decide", 1000 / $5 > "/dev/stderr" }' \
    2>>"$work/all"
done
echo
echo "| CA key | shipped | nostore | transport | decide | the store (shipped - nostore) | the request path beside its signatures (nostore - transport - decide) |"
echo "|---|---|---|---|---|---|---|"
for key in $KEYS; do
  m() { awk -v k="$key" -v w="$1" '$1 == k && $2 == w { print $3 }' "$work/all" | median; }
  s=$(m shipped) n=$(m nostore) t=$(m transport) d=$(m decide)
  awk -v k="$key" -v s="$s" -v n="$n" -v t="$t" -v d="$d" 'BEGIN {
    printf "| %s | %.3f ms | %.3f ms | %.3f ms | %.3f ms | %.3f ms | %.3f ms |\n", k, s, n, t, d, s - n, n - t - d }'
done
echo
echo "Medians of server CPU per certificate (decide: one core, issue/s)."
