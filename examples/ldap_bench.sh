#!/usr/bin/env bash
# Issue 15's benchmark (docs/benchmarks.md, "The shared LDAP store"): two `vouch serve`
# masters (two intermediates under one root) on one private slapd, next to one master on the
# file store, under the same load tool (`vouch bench serve`: N agents, PUT certificate_request
# + GET certificate over kept-alive TLS, RSA-2048 agent keys, vouched version 2 CSRs), for a
# P-256 and an RSA-4096 CA. With two masters the agents are split evenly between them (two
# load processes at once) and the rates are summed. slapd's own synced add rate is measured
# in the same run (ldapadd of 3,000 entries over one connection), and each master's LDAP
# operations per certificate are read from its metrics. Not part of `cargo test`.
#
#   cargo build --release --features bench    # `vouch bench` is only in a build with it
#   examples/ldap_bench.sh                       # AGENTS=8,64,256 PER_AGENT=4 KEYS="p256 rsa4096"
#   SERVER=389ds examples/ldap_bench.sh          # the same on a private 389 Directory Server
#   SKIP_FILES=1                                 # without the file store's rows
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
AGENTS=${AGENTS:-8,64,256}
PER_AGENT=${PER_AGENT:-4}
KEYS=${KEYS:-p256 rsa4096}
VOUCH=${VOUCH:-${CARGO_TARGET_DIR:-$here/target}/release/vouch}
SLAPD=${SLAPD:-/usr/sbin/slapd}
SERVER=${SERVER:-openldap}   # or 389ds (389-ds-base: a private instance, as docs/ldap.md sets one up)
[ -x "$VOUCH" ] || { echo "no $VOUCH: run cargo build --release --features bench (or set VOUCH)" >&2; exit 2; }
"$VOUCH" bench --help >/dev/null 2>&1 ||
  { echo "$VOUCH has no bench command: run cargo build --release --features bench" >&2; exit 2; }
[ -x "$SLAPD" ] && command -v ldapadd >/dev/null || { echo "apt-get install -y slapd ldap-utils" >&2; exit 2; }

work=$(mktemp -d /var/tmp/vouch-ldapbench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$p" 2>/dev/null || true
  done
  [ -n "${KEEP:-}" ] && echo "kept: $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; load average $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$SERVER" = 389ds ] || echo "slapd: $("$SLAPD" -VV 2>&1 | head -1 | sed 's/^@(#) \$//')"

if [ "$SERVER" = 389ds ]; then
# --- a private 389 Directory Server (docs/ldap.md, "On 389 Directory Server"): lib389's paths
# all under $work/ds (PREFIX), no systemd; vouch's schema, indexes and reindex from `vouch ldap
# schema --format 389ds`; vouch binds as a DN of its own with the ACI and lifted search limits.
port=$(free_port); tport=$(free_port)
ds=$work/ds; mkdir -p "$ds/share/dirsrv/inf"
awk -v d="$ds" -F' = ' 'BEGIN {OFS=" = "} $1 == "with_systemd" {$2 = 0}
  $1 != "sysconf_dir" && $2 ~ /^\/(etc|var|run|dev\/shm)/ {$2 = d $2} $1 == "inst_dir" {$2 = d $2} {print}' \
  /usr/share/dirsrv/inf/defaults.inf > "$ds/share/dirsrv/inf/defaults.inf"
printf '[general]\nfull_machine_name = localhost\nstrict_host_checking = False\nstart = False\nselinux = False\n[slapd]\ninstance_name = vbench\nport = %s\nsecure_port = %s\nroot_dn = cn=Directory Manager\nroot_password = secret-secret\nself_sign_cert = False\nuser = root\ngroup = root\n[backend-userroot]\nsample_entries = no\nsuffix = dc=vouch,dc=test\ncreate_suffix_entry = True\n' "$port" "$tport" > "$ds/inst.inf"
PREFIX=$ds dscreate from-file "$ds/inst.inf" >/dev/null
/usr/sbin/ns-slapd -D "$ds/etc/dirsrv/slapd-vbench" -i "$ds/run/dirsrv/slapd-vbench.pid" -d 0 >"$ds/out" 2>&1 &
pids+=($!)
printf 'secret-secret' > "$work/dm"; chmod 600 "$work/dm"
M=(-x -H "ldap://127.0.0.1:$port" -D "cn=Directory Manager" -y "$work/dm")
for _ in $(seq 200); do ldapsearch "${M[@]}" -b "" -s base vendorVersion >/dev/null 2>&1 && break; sleep 0.1; done
echo "389 DS: $(ldapsearch "${M[@]}" -LLL -b "" -s base vendorVersion | sed -n 's/^vendorVersion: //p')"
"$VOUCH" ldap schema --format 389ds --backend userRoot > "$work/schema.ldif"
ldapmodify -c "${M[@]}" -f "$work/schema.ldif" >/dev/null
task=$(sed -n 's/^dn: \(cn=vouch-reindex-.*\)$/\1/p' "$work/schema.ldif")   # named per run
for _ in $(seq 600); do ldapsearch "${M[@]}" -LLL -b "$task" -s base nsTaskExitCode |
  grep -q 'nsTaskExitCode: 0' && break; sleep 0.1; done
printf 'secret' > "$work/pw"; chmod 600 "$work/pw"
ldapmodify "${M[@]}" >/dev/null <<LDIF
dn: cn=vouch,dc=vouch,dc=test
changetype: add
objectClass: top
objectClass: applicationProcess
objectClass: simpleSecurityObject
cn: vouch
userPassword: secret
nsSizeLimit: -1
nsLookThroughLimit: -1
nsPagedSizeLimit: -1
nsPagedLookThroughLimit: -1

dn: dc=vouch,dc=test
changetype: modify
add: aci
aci: (targetattr="*")(version 3.0; acl "vouch masters"; allow (read, search, compare, add, delete, write) userdn="ldap:///cn=vouch,dc=vouch,dc=test";)
LDIF
L=(ldapadd "${M[@]}")
export VOUCH_STORE="ldap://127.0.0.1:$port/ou=vouch,dc=vouch,dc=test"
export VOUCH_LDAP_BIND_DN=cn=vouch,dc=vouch,dc=test VOUCH_LDAP_PASSWORD_FILE=$work/pw
"$VOUCH" ldap init --create-base >/dev/null
else
# --- a private slapd with vouch's schema (synced: every write fdatasync'ed, mdb's default)
port=$(free_port)
mkdir -p "$work/slapd/db"
"$VOUCH" ldap schema > "$work/slapd/vouch.schema"
{
  echo "include /etc/ldap/schema/core.schema"
  echo "include $work/slapd/vouch.schema"
  echo "pidfile $work/slapd/slapd.pid"
  echo "modulepath /usr/lib/ldap"
  echo "moduleload back_mdb"
  echo "database mdb"
  echo 'suffix "dc=vouch,dc=test"'
  echo 'rootdn "cn=admin,dc=vouch,dc=test"'
  echo "rootpw secret"
  echo "directory $work/slapd/db"
  echo "maxsize 4294967296"
  echo "index objectClass eq"
  sed -n 's/^#   index /index /p' "$work/slapd/vouch.schema"
} > "$work/slapd/slapd.conf"
"$SLAPD" -h "ldap://127.0.0.1:$port/" -f "$work/slapd/slapd.conf"
for _ in $(seq 100); do [ -s "$work/slapd/slapd.pid" ] && break; sleep 0.05; done
pids+=("$(cat "$work/slapd/slapd.pid")")
printf 'secret' > "$work/pw"; chmod 600 "$work/pw"
L=(ldapadd -x -H "ldap://127.0.0.1:$port" -D cn=admin,dc=vouch,dc=test -y "$work/pw")
for _ in $(seq 100); do printf 'dn: dc=vouch,dc=test\nobjectClass: dcObject\nobjectClass: organization\ndc: vouch\no: vouch\n' |
  "${L[@]}" >/dev/null 2>&1 && break; sleep 0.1; done
export VOUCH_STORE="ldap://127.0.0.1:$port/ou=vouch,dc=vouch,dc=test"
export VOUCH_LDAP_BIND_DN=cn=admin,dc=vouch,dc=test VOUCH_LDAP_PASSWORD_FILE=$work/pw
"$VOUCH" ldap init --create-base >/dev/null

fi

# slapd's own synced add rate, one connection, measured now (the ceiling a write costs).
{ printf 'dn: ou=addrate,dc=vouch,dc=test\nobjectClass: organizationalUnit\nou: addrate\n\n'
  for i in $(seq 3000); do printf 'dn: ou=a%s,ou=addrate,dc=vouch,dc=test\nobjectClass: organizationalUnit\nou: a%s\n\n' "$i" "$i"; done
} > "$work/adds.ldif"
t0=$(date +%s.%N); "${L[@]}" -f "$work/adds.ldif" >/dev/null; t1=$(date +%s.%N)
addrate=$(python3 -c "print(round(3001/($t1-$t0)))")
echo "$SERVER synced adds/s (one connection, ldapadd): $addrate"

ldap_ops() { # METRICS_ADDR -> "adds modifies reads searches deletes binds"
  curl -s "http://$1/metrics" | awk '/^vouch_ldap_operations_total/ {split($1,a,"\""); v[a[2]]=$2}
    END {print v["add"]+0, v["modify"]+0, v["read"]+0, v["search"]+0, v["delete"]+0, v["bind"]+0}'
}
granted() { curl -s "http://$1/metrics" | awk '/^vouch_decisions_total\{outcome="granted"\}/ {print $2}'; }
wait_listening() { for _ in $(seq 200); do grep -q '"event":"listening"' "$1" && return; sleep 0.1; done; cat "$1" >&2; exit 1; }

for key in $KEYS; do
  echo
  echo "================ CA key: $key"
  if [ -z "${SKIP_FILES:-}" ]; then
  # --- one master on the file store
  fp=$(free_port)
  VOUCH_STORE=files "$VOUCH" --dir "$work/f-$key" serve --key-type "$key" --listen "127.0.0.1:$fp" \
    --server-name "f-$key.test" --server-name localhost >"$work/f-$key.out" 2>&1 &
  pids+=($!); fpid=$!
  wait_listening "$work/f-$key.out"
  "$VOUCH" bench serve --addr "127.0.0.1:$fp" --dir "$work/f-$key" --agents 8 --per-agent 10 >/dev/null
  echo "== file store, one master"
  "$VOUCH" bench serve --addr "127.0.0.1:$fp" --dir "$work/f-$key" --agents "$AGENTS" --per-agent "$PER_AGENT" \
    --server-pid "$fpid"
  kill -TERM "$fpid"; wait "$fpid" 2>/dev/null || true
  fi

  # --- two masters on the LDAP store
  p1=$(free_port); p2=$(free_port); q1=$(free_port); q2=$(free_port)
  "$VOUCH" --dir "$work/m1-$key" serve --key-type "$key" --listen "127.0.0.1:$p1" --metrics-listen "127.0.0.1:$q1" \
    --server-name "m1-$key.test" --server-name localhost >"$work/m1-$key.out" 2>&1 &
  pids+=($!); m1=$!
  wait_listening "$work/m1-$key.out"
  "$VOUCH" ca init --dir "$work/m2-$key" --key-type "$key" --root-cert "$work/m1-$key/ca/root_crt.pem" \
    --root-key "$work/m1-$key/ca/root_key.pem" >/dev/null
  "$VOUCH" --dir "$work/m2-$key" serve --key-type "$key" --listen "127.0.0.1:$p2" --metrics-listen "127.0.0.1:$q2" \
    --server-name "m2-$key.test" --server-name localhost >"$work/m2-$key.out" 2>&1 &
  pids+=($!); m2=$!
  wait_listening "$work/m2-$key.out"
  c=(--conductor-cert "$work/m1-$key/conductor/conductor_crt.pem" --conductor-key "$work/m1-$key/conductor/conductor_key.pem")
  "$VOUCH" bench serve --addr "127.0.0.1:$p1" --dir "$work/m1-$key" --agents 8 --per-agent 10 >/dev/null
  echo "== LDAP store, two masters (agents split evenly; rows per master, then the sum)"
  IFS=, read -ra levels <<< "$AGENTS"
  for n in "${levels[@]}"; do
    half=$(( (n + 1) / 2 ))
    b1=$(ldap_ops "127.0.0.1:$q1"); b2=$(ldap_ops "127.0.0.1:$q2"); g1=$(granted "127.0.0.1:$q1"); g2=$(granted "127.0.0.1:$q2")
    "$VOUCH" bench serve --addr "127.0.0.1:$p1" --ca-bundle "$work/m1-$key/ca/ca_bundle.pem" "${c[@]}" \
      --agents "$half" --per-agent "$PER_AGENT" --server-pid "$m1" --format json > "$work/r1.json" &
    l1=$!
    "$VOUCH" bench serve --addr "127.0.0.1:$p2" --ca-bundle "$work/m2-$key/ca/ca_bundle.pem" "${c[@]}" \
      --agents "$half" --per-agent "$PER_AGENT" --server-pid "$m2" --format json > "$work/r2.json"
    wait "$l1"
    a1=$(ldap_ops "127.0.0.1:$q1"); a2=$(ldap_ops "127.0.0.1:$q2"); h1=$(granted "127.0.0.1:$q1"); h2=$(granted "127.0.0.1:$q2")
    python3 - "$n" "$work/r1.json" "$work/r2.json" "$b1" "$a1" "$b2" "$a2" "$g1" "$h1" "$g2" "$h2" "$addrate" <<'EOF'
import json, sys
n, f1, f2 = sys.argv[1], sys.argv[2], sys.argv[3]
b1, a1, b2, a2 = (list(map(float, x.split())) for x in sys.argv[4:8])
g1, h1, g2, h2, addrate = map(float, sys.argv[8:13])
r1, r2 = json.load(open(f1))[0], json.load(open(f2))[0]
certs = (h1 - g1) + (h2 - g2)
ops = [(a1[i] - b1[i]) + (a2[i] - b2[i]) for i in range(6)]
per = [o / certs if certs else 0 for o in ops]
rate = r1["certs_per_s"] + r2["certs_per_s"]
print(f"agents {n:>4}: {r1['certs_per_s']:7.1f} + {r2['certs_per_s']:7.1f} = {rate:7.1f} certs/s; "
      f"p99 {r1['p99_ms']:.1f} / {r2['p99_ms']:.1f} ms; failed {r1['failures'] + r2['failures']}; "
      f"per certificate: {per[0]:.2f} adds, {per[1]:.2f} modifies (synced writes {per[0] + per[1]:.2f}), "
      f"{per[2]:.2f} reads, {per[3]:.2f} searches, {per[4]:.2f} deletes (of nothing: no write), "
      f"{per[5]:.3f} binds; writes/s {rate * (per[0] + per[1]):.0f} "
      f"= {100 * rate * (per[0] + per[1]) / addrate:.0f}% of slapd's {addrate:.0f} adds/s; "
      f"peak RSS {r1.get('server_peak_rss_mb') or 0:.0f} / {r2.get('server_peak_rss_mb') or 0:.0f} MB")
EOF
  done
  kill -TERM "$m1" "$m2"; wait "$m1" "$m2" 2>/dev/null || true
done
