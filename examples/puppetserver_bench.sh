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
ROUNDS=${ROUNDS:-2}     # the mode sequence is repeated: a busy or cold machine shows as spread
WARMUP=${WARMUP:-50}    # certificates signed (4 clients) after each start, not counted: JIT warm-up
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
# KEEP=1 keeps the work directory (server logs, CSRs) for a look afterwards.
trap 'stop; if [ -n "${KEEP:-}" ]; then echo "work directory kept: $work" >&2; else rm -rf "$work"; fi' EXIT
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

echo "== making $N CSRs per round, mode and client count, $WARMUP per warm-up (RSA-2048, vouched, version 2)" >&2
t=$(date +%s)
make_one() { # NAME DIR
  local a=$2/$1.yaml
  "$VOUCH" conductor sign --cert "$v/cloud1.pem" --key "$v/cloud1.key" --classification "$work/web.yaml" \
    --certname "$1" --expires-in 50m --out "$a"
  "$VOUCH" csr --certname "$1" --attributes "$a" --key-type rsa2048 --key-out "$2/$1.key" --csr-out "$2/$1.csr"
}
export -f make_one; export VOUCH v work
for r in $(seq "$ROUNDS"); do
  for m in $MODES; do
    for c in warm $CLIENTS; do
      d=$work/csr/$r-$m-$c
      mkdir -p "$d"
      n=$N; [ "$c" = warm ] && n=$WARMUP
      seq -f "bench-$r-$m-$c-%04g.example.test" "$n" | xargs -P 2 -I{} bash -c 'make_one "$1" "$2"' _ {} "$d"
    done
  done
done
echo "   $(($(date +%s) - t)) s" >&2

# CPU seconds of the server and its reaped children (the hooks): /proc/PID/stat fields 14-17.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.3f", ($14 + $15 + $16 + $17) / hz}' "/proc/$1/stat"; }

for r in $(seq "$ROUNDS"); do
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
  : > "$server/log/stdout.log"   # before the start: the wait below must not see the last run's line
  HEAP=${HEAP:-512m} "$server/start.sh" > "$server/log/stdout.log" 2>&1 &
  pid=$!
  until grep -q "Puppet Server has successfully started" "$server/log/stdout.log"; do
    kill -0 "$pid" 2>/dev/null || { echo "server died:" >&2; tail -20 "$server/log/stdout.log" >&2; exit 1; }
    sleep 0.5
  done
  printf 'round %s, autosign=%s: server ready after %.1f s; warm-up: ' "$r" "$m" "$(echo "$(date +%s.%N) - $t0" | bc)"
  ruby "$here/examples/puppetserver_bench_client.rb" "$PORT" "$server/etc/ssl/certs/ca.pem" 4 "$work/csr/$r-$m-warm"
  for c in $CLIENTS; do
    c0=$(cpu "$pid")
    line=$(ruby "$here/examples/puppetserver_bench_client.rb" "$PORT" "$server/etc/ssl/certs/ca.pem" "$c" "$work/csr/$r-$m-$c")
    c1=$(cpu "$pid")
    printf 'round %s autosign=%-5s %s server_cpu_ms_per_cert=%.1f\n' "$r" "$m" "$line" "$(echo "($c1 - $c0) * 1000 / $N" | bc -l)"
  done
  stop
done
done

# The hook's wall time as Puppet Server itself logs it (DEBUG, certificate-authority):
# from "Executing '<hook> NAME'" to "Autosign command '<hook> NAME' exit status".
ruby -rtime -e '
  starts = {}; t = Hash.new { |h, k| h[k] = [] }
  File.foreach(ARGV[0]) do |l|
    ts = l[/\A\S+/]
    if (m = l.match(/Executing .*? (bench-(\d+)-(\w+)-\w+-\d+\.example\.test)/)) then starts[m[1]] = Time.iso8601(ts)
    elsif (m = l.match(/Autosign command .*? (bench-(\d+)-(\w+)-\w+-\d+\.example\.test). exit status/)) && starts[m[1]]
      t[m[3]] << (Time.iso8601(ts) - starts[m[1]]) * 1000
    end
  end
  t.each do |mode, v|
    v.sort!
    printf("hook wall time as logged by Puppet Server, autosign=%-5s n=%d p50_ms=%.0f p90_ms=%.0f mean_ms=%.1f\n",
           mode, v.size, v[v.size / 2], v[(v.size * 0.9).ceil - 1], v.sum / v.size)
  end
' "$server/log/puppetserver.log"
