#!/usr/bin/env bash
# Benchmark 5 of docs/benchmarks.md: Puppet Server's CA and `vouch serve` under the same
# load tool (`vouch bench serve`: N agents, each PUT certificate_request + GET certificate
# over kept-alive TLS, RSA-2048 agent keys), in one sitting, one after the other:
#   1. the signature ceiling of this machine, measured now: two `vouch bench decide` at once
#      (one per core; "floor/s" is what the signatures alone allow, "issue/s" decision + signing);
#   2. Puppet Server 7.9 (its own RSA-4096 CA, `autosign = true`): PUT + GET, then the whole
#      bootstrap (`--bootstrap`: a new TLS connection, GET CA bundle, GET CRLs, PUT, GET);
#   3. vouch serve with an RSA-4096 CA, then with a P-256 CA, the same two loads;
#   4. vouch serve (P-256) on a store with 100,000 revoked certificates (6.6 MB of CRLs):
#      the bootstrap with gzip (as Puppet's agents ask) and without.
# The load tool runs on the same cores; its own CPU per certificate is in every row.
# Not part of `cargo test`.
#
#   cargo build --release --features bench --bin vouch --example bench_store
#   examples/side_by_side.sh                     # AGENTS=1,8,64 PER_AGENT=8
#   AGENTS=1,8,64,256 PER_AGENT=16 examples/side_by_side.sh
#
# Puppet Server: Debian's puppetserver 7.9 laid out by tests/support/puppetserver/setup.sh,
# `autosign = true` (no hook: its best case), 512 MB heap, warmed up with 80 certificates
# (JIT). vouch: default policy (replay journal and audit log on), warmed up likewise. The CSRs
# are vouched (version 2 attributes): Puppet Server ignores them, vouch checks them.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
AGENTS=${AGENTS:-1,8,64}
PER_AGENT=${PER_AGENT:-8}
PS_PORT=${PS_PORT:-18160}
V_PORT=${V_PORT:-18161}
VOUCH=${VOUCH:-${CARGO_TARGET_DIR:-$here/target}/release/vouch}
BENCH_STORE=${BENCH_STORE:-${CARGO_TARGET_DIR:-$here/target}/release/examples/bench_store}
BOOT_AGENTS=${BOOT_AGENTS:-8,64}
REVOKED=${REVOKED:-100000}
[ -x "$VOUCH" ] || { echo "no $VOUCH: run cargo build --release --features bench (or set VOUCH)" >&2; exit 2; }
"$VOUCH" bench --help >/dev/null 2>&1 ||
  { echo "$VOUCH has no bench command: run cargo build --release --features bench" >&2; exit 2; }
[ -x "$BENCH_STORE" ] || { echo "no $BENCH_STORE: run cargo build --release --features bench --example bench_store" >&2; exit 2; }
[ -f /usr/share/puppetserver/puppetserver.jar ] || { echo "apt-get install -y puppetserver" >&2; exit 2; }

work=$(mktemp -d /var/tmp/vouch-side.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$p" 2>/dev/null || true
  done
  [ -n "${KEEP:-}" ] && echo "kept: $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
nproc_=$(nproc)
echo "machine: $nproc_ cores, $(free -g | awk '/Mem:/ {print $2}') GiB; load average $(cut -d' ' -f1-3 /proc/loadavg)"

# --- The signature ceiling, now: one `vouch bench decide` per core, at once.
echo "== signature ceiling: two 'vouch bench decide' at once (sum the two rows of each key type)"
"$VOUCH" bench decide --seconds 3 --ca-keys rsa4096,p256 --client-keys rsa2048 >"$work/decide1" 2>&1 &
d1=$!
"$VOUCH" bench decide --seconds 3 --ca-keys rsa4096,p256 --client-keys rsa2048 >"$work/decide2" 2>&1
wait "$d1"
cat "$work/decide1" "$work/decide2"

# --- Puppet Server
ps=$work/puppetserver
bash "$here/tests/support/puppetserver/setup.sh" "$ps" "$PS_PORT" >/dev/null
printf '[server]\nautosign = true\n' >> "$ps/etc/puppet.conf"
"$ps/start.sh" >"$work/ps.out" 2>&1 &
pids+=($!)
ps_pid=$!
echo "== Puppet Server starting (pid $ps_pid)"
for _ in $(seq 240); do
  grep -q "Puppet Server has successfully started" "$ps/log/puppetserver.log" 2>/dev/null && break
  kill -0 "$ps_pid" 2>/dev/null || { cat "$work/ps.out" >&2; exit 1; }
  sleep 1
done
grep -q "Puppet Server has successfully started" "$ps/log/puppetserver.log" || { echo "Puppet Server did not start" >&2; exit 1; }

# Conductor credentials for the CSRs (a vouch directory that is not served).
"$VOUCH" --dir "$work/conductor" ca init >/dev/null
"$VOUCH" --dir "$work/conductor" conductor new cloud1 --cert-out "$work/c.pem" --key-out "$work/c.key" >/dev/null
bench() { # ADDR CA_BUNDLE PID AGENTS PER_AGENT [FLAGS...]
  "$VOUCH" bench serve --addr "$1" --ca-bundle "$2" --conductor-cert "$work/c.pem" --conductor-key "$work/c.key" \
    --agents "$4" --per-agent "$5" --server-pid "$3" "${@:6}"
}
echo "== Puppet Server warm-up (80 certificates, not counted)"
bench "127.0.0.1:$PS_PORT" "$ps/etc/puppetserver/ca/ca_crt.pem" "$ps_pid" 8 10 >/dev/null
echo "== Puppet Server 7.9 (RSA-4096 CA, autosign = true)"
bench "127.0.0.1:$PS_PORT" "$ps/etc/puppetserver/ca/ca_crt.pem" "$ps_pid" "$AGENTS" "$PER_AGENT"
echo "== Puppet Server 7.9: the whole bootstrap (new connection, CA bundle, CRL, PUT, GET)"
bench "127.0.0.1:$PS_PORT" "$ps/etc/puppetserver/ca/ca_crt.pem" "$ps_pid" "$BOOT_AGENTS" "$PER_AGENT" --bootstrap
kill -TERM "$ps_pid"; wait "$ps_pid" 2>/dev/null || true

# --- vouch serve: RSA-4096, then P-256; then P-256 with many revocations
vouch_run() { # LABEL KEY_TYPE DIR
  "$VOUCH" --dir "$3" serve --key-type "$2" --listen "127.0.0.1:$V_PORT" >"$work/$1.out" 2>&1 &
  pids+=($!)
  local v_pid=$!
  for _ in $(seq 120); do grep -q '"event":"listening"' "$work/$1.out" && break; sleep 0.5; done
  grep -q '"event":"listening"' "$work/$1.out" || { cat "$work/$1.out" >&2; exit 1; }
  echo "== vouch serve warm-up (80 certificates, not counted)"
  "$VOUCH" bench serve --addr "127.0.0.1:$V_PORT" --dir "$3" --agents 8 --per-agent 10 >/dev/null
  echo "== vouch serve ($1, default policy): PUT + GET"
  "$VOUCH" bench serve --addr "127.0.0.1:$V_PORT" --dir "$3" --agents "$AGENTS" --per-agent "$PER_AGENT" --server-pid "$v_pid"
  echo "== vouch serve ($1): the whole bootstrap"
  "$VOUCH" bench serve --addr "127.0.0.1:$V_PORT" --dir "$3" --agents "$BOOT_AGENTS" --per-agent "$PER_AGENT" \
    --server-pid "$v_pid" --bootstrap
  if [ "${4:-}" = revoked ]; then
    echo "== vouch serve ($1): the whole bootstrap without gzip (6.6 MB of CRLs per agent)"
    "$VOUCH" bench serve --addr "127.0.0.1:$V_PORT" --dir "$3" --agents "$BOOT_AGENTS" --per-agent "$PER_AGENT" \
      --server-pid "$v_pid" --bootstrap --no-gzip
  fi
  kill -TERM "$v_pid"; wait "$v_pid" 2>/dev/null || true
}
vouch_run "RSA-4096 CA" rsa4096 "$work/vouch-rsa"
vouch_run "P-256 CA" p256 "$work/vouch-p256"
# A store with $REVOKED revoked certificates: made by serve's first run, filled, its CRL written.
big=$work/vouch-big
"$VOUCH" --dir "$big" serve --listen "127.0.0.1:$V_PORT" >"$work/big-init.out" 2>&1 &
b_pid=$!
for _ in $(seq 120); do grep -q '"event":"listening"' "$work/big-init.out" && break; sleep 0.5; done
kill -TERM "$b_pid"; wait "$b_pid" 2>/dev/null || true
"$BENCH_STORE" "$big" "$REVOKED" "$REVOKED" >/dev/null
"$VOUCH" --dir "$big" crl >/dev/null
# The generator's files on disk before the service starts: else the service's first
# checkpoint (syncfs, under the store's lock) flushes them and the run measures that.
sync
echo "== CRLs of the store with $REVOKED revoked: $(wc -c <"$big/ca/ca_crl.pem") bytes, $(gzip -c "$big/ca/ca_crl.pem" | wc -c) gzipped"
vouch_run "P-256 CA, $REVOKED revoked" p256 "$big" revoked
