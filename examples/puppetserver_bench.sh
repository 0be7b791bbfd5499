#!/usr/bin/env bash
# The autosign hook's cost as Puppet Server sees it: certificates per second with
# `autosign = true`, with a trivial `exit 0` hook (the price of any executable), and
# with vouch as the hook — one Puppet Server installation (restarted between modes:
# SIGHUP does not reload `autosign`), one machine, one run. Not part of `cargo test`.
#
#   cargo build --release
#   examples/puppetserver_bench.sh            # N=100 CSRs per mode and client count, CLIENTS="1 4"
#   N=200 CLIENTS="1 4 8" PORT=18140 VOUCH=target/release/vouch examples/puppetserver_bench.sh
#
# Every CSR is made beforehand (RSA-2048 agent key, version 2 attributes bound to
# its certname, the classification mirror): all modes sign identical-shaped CSRs.
# The client (examples/puppetserver_bench_client.rb) does PUT certificate_request +
# GET certificate per certificate over kept-alive TLS, as an agent does.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-100}
CLIENTS=${CLIENTS:-"1 4"}
PORT=${PORT:-18140}
VOUCH=${VOUCH:-${CARGO_TARGET_DIR:-$here/target}/release/vouch}
MODES=${MODES:-"true sh vouch"}
[ -x "$VOUCH" ] || { echo "no $VOUCH: run cargo build --release (or set VOUCH)" >&2; exit 2; }
[ -f /usr/share/puppetserver/puppetserver.jar ] || { echo "apt-get install -y puppetserver" >&2; exit 2; }
VOUCH=$(cd "$(dirname "$VOUCH")" && pwd)/$(basename "$VOUCH")

work=$(mktemp -d /var/tmp/vouch-psbench.XXXXXX)
pid=
stop() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
  fi
  pid=
}
trap 'stop; echo "work directory: $work" >&2' EXIT
echo "work directory: $work" >&2

server=$work/server
bash "$here/tests/support/puppetserver/setup.sh" "$server" "$PORT"
v=$work/vouch
"$VOUCH" --dir "$v" ca init >/dev/null
cp "$here/policy/strict.toml" "$v/policy.toml"
"$VOUCH" --dir "$v" conductor new cloud1 --cert-out "$v/cloud1.pem" --key-out "$v/cloud1.key" >/dev/null
printf 'classes: [profile::web]\nparameters: {tier: frontend}\nenvironment: production\n' > "$work/web.yaml"
printf '#!/bin/sh\nexec %s autosign --policy %s -- "$1"\n' "$VOUCH" "$v/policy.toml" > "$work/vouch-hook.sh"
printf '#!/bin/sh\ncat >/dev/null\nexit 0\n' > "$work/sh-hook.sh"
chmod 755 "$work/vouch-hook.sh" "$work/sh-hook.sh"

echo "== making $N CSRs per mode and client count (RSA-2048, vouched, version 2)" >&2
t=$(date +%s)
make_one() { # NAME DIR
  local a=$2/$1.yaml
  "$VOUCH" conductor sign --cert "$v/cloud1.pem" --key "$v/cloud1.key" --classification "$work/web.yaml" \
    --certname "$1" --expires-in 50m --out "$a"
  "$VOUCH" csr --certname "$1" --attributes "$a" --key-type rsa2048 --key-out "$2/$1.key" --csr-out "$2/$1.csr"
}
export -f make_one; export VOUCH v work
for m in $MODES; do
  for c in $CLIENTS; do
    d=$work/csr/$m-$c
    mkdir -p "$d"
    seq -f "bench-$m-$c-%04g.example.test" "$N" | xargs -P 2 -I{} bash -c 'make_one "$1" "$2"' _ {} "$d"
  done
done
echo "   $(($(date +%s) - t)) s" >&2

for m in $MODES; do
  case $m in
    true) hook=true ;;
    sh) hook=$work/sh-hook.sh ;;
    vouch) hook=$work/vouch-hook.sh ;;
    *) echo "unknown mode $m" >&2; exit 2 ;;
  esac
  sed -i '/^\[server\]/,$d' "$server/etc/puppet.conf"
  printf '[server]\nautosign = %s\n' "$hook" >> "$server/etc/puppet.conf"
  t0=$(date +%s.%N)
  : > "$server/log/stdout.log"
  HEAP=${HEAP:-512m} "$server/start.sh" > "$server/log/stdout.log" 2>&1 &
  pid=$!
  until grep -q "Puppet Server has successfully started" "$server/log/stdout.log"; do
    kill -0 "$pid" 2>/dev/null || { echo "server died:" >&2; tail -20 "$server/log/stdout.log" >&2; exit 1; }
    sleep 0.5
  done
  printf '%s: server ready after %.1f s\n' "$m" "$(echo "$(date +%s.%N) - $t0" | bc)"
  for c in $CLIENTS; do
    printf 'autosign=%-5s ' "$m"
    ruby "$here/examples/puppetserver_bench_client.rb" "$PORT" "$server/etc/ssl/certs/ca.pem" "$c" "$work/csr/$m-$c"
  done
  stop
done
