#!/usr/bin/env bash
# Benchmark 5 of docs/benchmarks.md: Puppet Server's CA and `vouch serve` under the same
# load tool (`vouch bench serve`: N agents, each PUT certificate_request + GET certificate
# over kept-alive TLS, RSA-2048 agent keys), with the same CA key type (RSA-4096), one after
# the other. Not part of `cargo test`.
#
#   cargo build --release --features bench    # `vouch bench` is only in a build with it
#   examples/side_by_side.sh                     # AGENTS=1,8,64 PER_AGENT=8
#   AGENTS=1,8,64,256 PER_AGENT=16 examples/side_by_side.sh
#
# Puppet Server: Debian's puppetserver 7.9 laid out by tests/support/puppetserver/setup.sh,
# `autosign = true` (no hook: its best case), its own RSA-4096 CA, 512 MB heap, warmed up
# with 80 certificates (JIT). vouch: `vouch serve --key-type rsa4096`, default policy
# (replay journal and audit log on), warmed up likewise. The CSRs are vouched (version 2
# attributes): Puppet Server ignores them, vouch checks them.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
AGENTS=${AGENTS:-1,8,64}
PER_AGENT=${PER_AGENT:-8}
PS_PORT=${PS_PORT:-18160}
V_PORT=${V_PORT:-18161}
VOUCH=${VOUCH:-${CARGO_TARGET_DIR:-$here/target}/release/vouch}
[ -x "$VOUCH" ] || { echo "no $VOUCH: run cargo build --release --features bench (or set VOUCH)" >&2; exit 2; }
"$VOUCH" bench --help >/dev/null 2>&1 ||
  { echo "$VOUCH has no bench command: run cargo build --release --features bench" >&2; exit 2; }
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
bench() { # ADDR CA_BUNDLE PID AGENTS PER_AGENT
  "$VOUCH" bench serve --addr "$1" --ca-bundle "$2" --conductor-cert "$work/c.pem" --conductor-key "$work/c.key" \
    --agents "$4" --per-agent "$5" --server-pid "$3"
}
echo "== Puppet Server warm-up (80 certificates, not counted)"
bench "127.0.0.1:$PS_PORT" "$ps/etc/puppetserver/ca/ca_crt.pem" "$ps_pid" 8 10 >/dev/null
echo "== Puppet Server 7.9 (RSA-4096 CA, autosign = true)"
bench "127.0.0.1:$PS_PORT" "$ps/etc/puppetserver/ca/ca_crt.pem" "$ps_pid" "$AGENTS" "$PER_AGENT"
kill -TERM "$ps_pid"; wait "$ps_pid" 2>/dev/null || true

# --- vouch serve
"$VOUCH" --dir "$work/vouch" serve --key-type rsa4096 --listen "127.0.0.1:$V_PORT" >"$work/vouch.out" 2>&1 &
pids+=($!)
v_pid=$!
for _ in $(seq 120); do grep -q '"event":"listening"' "$work/vouch.out" && break; sleep 0.5; done
echo "== vouch serve warm-up (80 certificates, not counted)"
bench "127.0.0.1:$V_PORT" "$work/vouch/ca/ca_bundle.pem" "$v_pid" 8 10 >/dev/null
echo "== vouch serve (RSA-4096 CA, default policy)"
"$VOUCH" bench serve --addr "127.0.0.1:$V_PORT" --dir "$work/vouch" --agents "$AGENTS" --per-agent "$PER_AGENT" \
  --server-pid "$v_pid"
