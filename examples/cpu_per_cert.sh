#!/usr/bin/env bash
# Server CPU per certificate: the measure that holds on a shared machine. The server's
# utime + stime over a run (/proc/PID/stat, every thread counted) divided by the certificates
# it issued, with the rate, p50 and p99, the server's peak RSS and the load tool's own CPU per
# certificate beside it. The load tool is `vouch bench serve` (PUT certificate_request + GET
# certificate over kept-alive TLS, RSA-2048 agent keys, vouched CSRs), on the same cores.
# Rates move by ±20–30% with what else runs on the machine; CPU per certificate much less.
# Its output is markdown, ready for docs/benchmarks.md. Not part of `cargo test`.
#
#   cargo build --release --features bench --bin vouch
#   examples/cpu_per_cert.sh           # one sitting: Puppet Server (RSA-4096) where installed,
#                                      # then vouch with an RSA-4096 CA and a P-256 CA
#   A=/tmp/vouch-before B=/tmp/vouch-after ROUNDS=4 examples/cpu_per_cert.sh
#                                      # two builds, alternating A, B, A, B per key type:
#                                      # every run a row, then the medians and B ÷ A
#
# SYSCALLS=1 (A/B only) runs the server under `strace -c -f` and adds its system calls per
# certificate (and how many failed) to each row: a count that does not move with the load, to
# judge a change that removes calls; strace slows the server, so its CPU figures then mean nothing.
#
# CALLGRIND=1 (A/B and the sitting) runs the server under valgrind's callgrind and reports the
# user-space instructions it executes per certificate (Ir: every instruction of every thread of
# the server process, vouch's and its libraries' — aws-lc, rustls, hyper, tokio, libc's malloc;
# not the kernel's work inside system calls, not the load tool's). Counting starts after the
# warm-up (`callgrind_control -i on`) and stops before the server is told to stop (`-i off`):
# the start-up and the shutdown are not counted; the TLS handshakes of the measured run's
# connections are (one per agent). Valgrind runs the server's threads one at a time and about
# 50 times slower, so the defaults become AGENTS=16, PER=16 (256 certificates a run), KEYS=p256,
# ROUNDS=2, and Puppet Server is left out; the CPU figures then mean nothing. A count that does
# not move with the load (one binary run twice: within 0.4%; within 0.01% since the root CRL's
# once-a-second check is cached), to judge a change in the server's own work. With KEEP=1
# each run's callgrind.out file is kept beside its store (`callgrind_annotate --inclusive=yes
# FILE` reads it: docs/benchmarks.md, section 14).
#
# Settings: AGENTS (concurrency levels, comma-separated; default 64), KEYS (vouch's CA key
# types; default "rsa4096 p256"), PER (certificates per agent; default 32 for P-256 and other
# elliptic keys, 12 for RSA, raised at each level of AGENTS to make at least 1,000 certificates:
# AGENTS=8 runs 8 × 125), ROUNDS (A/B rounds, 1-20; default 4), PUPPETSERVER=0 (leave
# Puppet Server out of the sitting), PS_PER (its certificates per agent; default 4), PORT (the
# first port used; default 18500), VOUCH (the build measured in a sitting; default
# target/release/vouch), LOAD (the load tool: a build with the `bench` feature; default
# target/release/vouch, else B), KEEP=1 (keep the stores and the servers' logs).
#
# CPU time is counted in clock ticks (10 ms): a run needs a thousand certificates or more for
# its CPU per certificate to be read to 0.01 ms (64 agents × 32 = 2,048 by default), so each
# level of AGENTS runs on its own with at least that many (a PER given that makes fewer is
# run as given, with a warning). Puppet Server's runs (PS_PER) are smaller: its CPU per
# certificate is tens of milliseconds, which a few hundred certificates read to within 1%. On a
# machine busy with other work the CPU per certificate moves too (by a third between two runs
# of one binary at a load average of 20-30): judge a change by the medians of alternating runs.
# Each run serves a new store, warmed up with 80 certificates that are not counted. Stores are
# kept until the end: on ext4 without a journal, creating files right after deleting many is
# several times slower (docs/benchmarks.md, section 9). The same holds for the next run of this
# script: started within minutes of the last one's end, it measures that (P-256 at 1.4 ms per
# certificate instead of 0.6–0.9 in one such run); wait five minutes, or use KEEP=1 and delete
# the kept directory later.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in
  '') ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: $0 (no arguments; settings in the environment: see $0 --help)" >&2; exit 2 ;;
esac
release=${CARGO_TARGET_DIR:-$here/target}/release/vouch
VOUCH=${VOUCH:-$release}
if [ -n "${CALLGRIND:-}" ]; then
  command -v valgrind >/dev/null && command -v callgrind_control >/dev/null ||
    { echo "CALLGRIND=1 needs valgrind (apt-get install -y valgrind)" >&2; exit 2; }
  AGENTS=${AGENTS:-16}
  PER=${PER:-16}
  KEYS=${KEYS:-p256}
  ROUNDS=${ROUNDS:-2}
  PUPPETSERVER=0
fi
AGENTS=${AGENTS:-64}
KEYS=${KEYS:-rsa4096 p256}
ROUNDS=${ROUNDS:-4}
PORT=${PORT:-18500}
PS_PER=${PS_PER:-4}
JAR=/usr/share/puppetserver/puppetserver.jar
if [ -n "${A:-}${B:-}" ]; then
  [ -n "${A:-}" ] && [ -n "${B:-}" ] || { echo "A/B: set both A and B (two vouch binaries)" >&2; exit 2; }
  mode=ab
  default_load=$release
  [ -x "$default_load" ] || default_load=$B
else
  mode=sitting
  default_load=$VOUCH
fi
LOAD=${LOAD:-$default_load}
for bin in ${A:-} ${B:-} $([ "$mode" = sitting ] && echo "$VOUCH"); do
  [ -x "$bin" ] && [ -f "$bin" ] || { echo "$bin: no such program (build it: cargo build --release --features bench --bin vouch)" >&2; exit 2; }
  "$bin" --version >/dev/null 2>&1 || { echo "$bin: not a vouch binary that runs" >&2; exit 2; }
done
"$LOAD" bench --help >/dev/null 2>&1 ||
  { echo "the load tool $LOAD has no bench command: cargo build --release --features bench --bin vouch (or set LOAD)" >&2; exit 2; }
for key in $KEYS; do
  case $key in p256 | p384 | ed25519 | rsa2048 | rsa3072 | rsa4096) ;;
    *) echo "KEYS: unknown key type '$key' (p256 p384 ed25519 rsa2048 rsa3072 rsa4096)" >&2; exit 2 ;;
  esac
done
case $AGENTS in *[!0-9,]* | '' | ,* | *,) echo "AGENTS: numbers separated by commas, not '$AGENTS'" >&2; exit 2 ;; esac
IFS=, read -ra _levels <<<"$AGENTS"
for l in "${_levels[@]}"; do
  case $l in '' | 0*) echo "AGENTS: numbers from 1 to 4096 separated by commas, not '$AGENTS'" >&2; exit 2 ;; esac
  [ "${#l}" -le 4 ] && [ "$l" -le 4096 ] || { echo "AGENTS: numbers from 1 to 4096 separated by commas, not '$AGENTS'" >&2; exit 2; }
done
if [ -n "${CALLGRIND:-}" ]; then
  case $AGENTS in *,*) echo "CALLGRIND: one level of AGENTS, not '$AGENTS' (a run's count covers all its levels)" >&2; exit 2 ;; esac
  [ -z "${SYSCALLS:-}" ] || { echo "CALLGRIND and SYSCALLS: one at a time (strace of valgrind counts valgrind's calls)" >&2; exit 2; }
fi
case $ROUNDS in [1-9] | 1[0-9] | 20) ;; *) echo "ROUNDS: a number from 1 to 20, not '$ROUNDS'" >&2; exit 2 ;; esac
for v in "${PER:-1}" "$PS_PER"; do
  case $v in [1-9] | [1-9][0-9] | [1-9][0-9][0-9] | 1000) ;;
    *) echo "PER, PS_PER: a number from 1 to 1000, not '$v'" >&2; exit 2 ;;
  esac
done
case $PORT in '' | *[!0-9]*) echo "PORT: a port number, not '$PORT'" >&2; exit 2 ;; esac
[ "$PORT" -ge 1024 ] && [ "$PORT" -le 64000 ] || { echo "PORT: from 1024 to 64000, not $PORT" >&2; exit 2; }

work=$(mktemp -d /var/tmp/vouch-cpu.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$p" 2>/dev/null || true
  done
  if [ -n "${KEEP:-}" ]; then echo "kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
port=$PORT
# The fewest certificates a level of AGENTS runs (CPU time counts in 10 ms ticks).
MIN_CERTS=1000
# Certificates per agent at one level: PER when set, else the key type's default raised to
# make MIN_CERTS certificates at that level.
per_for() { # KEY LEVEL
  local per need
  if [ -n "${PER:-}" ]; then
    per=$PER
    [ -n "${CALLGRIND:-}" ] || [ $(($2 * per)) -ge "$MIN_CERTS" ] ||
      echo "warning: AGENTS level $2 × PER $per = $(($2 * per)) certificates, fewer than $MIN_CERTS: its CPU per certificate reads only to 10 ms ÷ $(($2 * per))" >&2
  else
    case $1 in rsa*) per=12 ;; *) per=32 ;; esac
    need=$(((MIN_CERTS + $2 - 1) / $2))
    [ "$need" -le "$per" ] || per=$need
  fi
  echo "$per"
}
# A level's row of `vouch bench serve` (text) as "rate p50 p99 rss cpu client certs failed".
fields() {
  awk '$1 ~ /^[0-9]+$/ && NF >= 14 { print $5, $6, $7, $8, $10, $12, $2, $3 }'
}
# A process's user and system CPU so far, in clock ticks (every thread counted).
ticks() {
  sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12, $13 }'
}
hz=$(getconf CLK_TCK)
# One cell: "rate/s (p99 ms; RSS MB; **CPU ms**; load tool's ms)".
cell() { # rate p50 p99 rss cpu client certs failed
  local f=""
  [ "$8" != 0 ] && f="; $8 failed"
  LC_ALL=C printf "%'.0f/s (%.0f ms; %.0f MB; **%.2f ms**; %.3f ms%s)" "$1" "$3" "$4" "$5" "$6" "$f"
}

# vouch serve: BIN KEY LABEL; prints one fields line per level of AGENTS.
vouch_run() {
  local bin=$1 key=$2 d=$work/$3 pid wait=240
  local under=()
  if [ -n "${CALLGRIND:-}" ]; then
    # Valgrind reads the binary's debug information first: its start takes longer.
    under=(valgrind --tool=callgrind --instr-atstart=no "--callgrind-out-file=$d.callgrind.out")
    wait=2400
  fi
  port=$((port + 1))
  "${under[@]}" "$bin" --dir "$d" serve --key-type "$key" --listen "127.0.0.1:$port" >"$d.out" 2>&1 &
  pid=$!
  pids+=("$pid")
  for _ in $(seq "$wait"); do
    grep -q '"event":"listening"' "$d.out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  grep -q '"event":"listening"' "$d.out" ||
    { echo "$bin did not start on port $port (another PORT= may help):" >&2; cat "$d.out" >&2; exit 1; }
  "$LOAD" bench serve --addr "127.0.0.1:$port" --dir "$d" --agents 8 --per-agent 10 >/dev/null
  local t0 st=""
  if [ -n "${SYSCALLS:-}" ]; then
    strace -c -f -q -p "$pid" -o "$d.strace" &
    st=$!
    sleep 1
  fi
  [ -z "${CALLGRIND:-}" ] || callgrind_control -i on "$pid" >/dev/null
  t0=$(ticks "$pid")
  local levels level
  IFS=, read -ra levels <<<"$AGENTS"
  for level in "${levels[@]}"; do
    "$LOAD" bench serve --addr "127.0.0.1:$port" --dir "$d" --agents "$level" --per-agent "$(per_for "$key" "$level")" \
      --server-pid "$pid" | tee -a "$work/raw" | fields
  done
  echo "$t0 $(ticks "$pid")" >"$work/ticks"
  [ -z "${CALLGRIND:-}" ] || callgrind_control -i off "$pid" >/dev/null
  if [ -n "$st" ]; then
    kill -INT "$st"
    wait "$st" 2>/dev/null || true
    awk '$NF == "total" { print $4, (NF == 6 ? $5 : 0) }' "$d.strace" >"$work/syscalls"
  fi
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  if [ -n "${CALLGRIND:-}" ]; then
    # The instructions counted while the instrumentation was on: the file's totals.
    # (`summary:` at the top is 0 when counting started late; `totals:` at the end holds it.)
    awk '/^totals:/ { t = $2 } /^summary:/ { s = $2 } END { print (t != "" ? t : s) }' "$d.callgrind.out" >"$work/ir"
  fi
}

# Puppet Server with its own RSA-4096 CA, `autosign = true` (no hook: its best case).
puppetserver_run() {
  local ps=$work/puppetserver pid
  port=$((port + 1))
  bash "$here/tests/support/puppetserver/setup.sh" "$ps" "$port" >/dev/null
  printf '[server]\nautosign = true\n' >>"$ps/etc/puppet.conf"
  "$ps/start.sh" >"$work/ps.out" 2>&1 &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 900); do
    grep -q "Puppet Server has successfully started" "$ps/log/puppetserver.log" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/ps.out" >&2; exit 1; }
    sleep 1
  done
  grep -q "Puppet Server has successfully started" "$ps/log/puppetserver.log" ||
    { echo "Puppet Server did not start" >&2; exit 1; }
  "$LOAD" --dir "$work/conductor" ca init >/dev/null
  "$LOAD" --dir "$work/conductor" conductor new cloud1 --cert-out "$work/c.pem" --key-out "$work/c.key" >/dev/null
  local load=("$LOAD" bench serve --addr "127.0.0.1:$port" --ca-bundle "$ps/etc/puppetserver/ca/ca_crt.pem"
    --conductor-cert "$work/c.pem" --conductor-key "$work/c.key")
  "${load[@]}" --agents 8 --per-agent 10 >/dev/null
  "${load[@]}" --agents "$AGENTS" --per-agent "$PS_PER" --server-pid "$pid" | tee -a "$work/raw" | fields
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
}

# A key type as the docs write it.
label() {
  case $1 in p256) echo P-256 ;; p384) echo P-384 ;; ed25519) echo Ed25519 ;; rsa*) echo "RSA-${1#rsa}" ;; esac
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "<!-- $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); load tool $LOAD -->"
if [ "$mode" = sitting ]; then
  commit=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')
  echo "<!-- vouch: $VOUCH (checkout at $commit); AGENTS=$AGENTS KEYS=\"$KEYS\" -->"
  declare -A got
  ps_cpu=()
  if [ "${PUPPETSERVER:-1}" != 0 ] && [ -f "$JAR" ]; then
    puppetserver_run >"$work/rows"
    mapfile -t rows <"$work/rows"
    got[ps]=1
    for i in "${!rows[@]}"; do got[ps,$i]=${rows[$i]}; done
  elif [ "${PUPPETSERVER:-1}" != 0 ]; then
    echo "<!-- Puppet Server is not installed ($JAR): apt-get install -y puppetserver -->"
  fi
  for key in $KEYS; do
    vouch_run "$VOUCH" "$key" "vouch-$key" >"$work/rows"
    mapfile -t rows <"$work/rows"
    for i in "${!rows[@]}"; do got[$key,$i]=${rows[$i]}; done
    [ -z "${CALLGRIND:-}" ] || got[$key,ir]=$(awk -v n="$(echo "${got[$key,0]}" | cut -d' ' -f7)" '{ printf "%.0f", $1 / n }' "$work/ir")
  done
  head="| agents |"
  sep="|---|"
  [ -n "${got[ps]:-}" ] && { head="$head Puppet Server, RSA-4096 |"; sep="$sep---|"; }
  for key in $KEYS; do head="$head vouch, $(label "$key") |"; sep="$sep---|"; done
  [ -n "${got[ps]:-}" ] && { head="$head Puppet Server's CPU ÷ vouch's, per certificate |"; sep="$sep---|"; }
  echo
  echo "Per cell: certificates/s (p99; server peak RSS; **server CPU per certificate**; the load tool's CPU per certificate)."
  if [ -n "${CALLGRIND:-}" ]; then
    echo "Under callgrind (the CPU figures mean nothing), user-space instructions per certificate:"
    for key in $KEYS; do LC_ALL=C printf -- "- vouch, %s: **%'d Ir**\n" "$(label "$key")" "${got[$key,ir]}"; done
  fi
  echo
  echo "$head"
  echo "$sep"
  IFS=, read -ra levels <<<"$AGENTS"
  for i in "${!levels[@]}"; do
    line="| ${levels[$i]} |"
    [ -n "${got[ps]:-}" ] && line="$line $(cell ${got[ps,$i]}) |"
    for key in $KEYS; do line="$line $(cell ${got[$key,$i]}) |"; done
    if [ -n "${got[ps]:-}" ]; then
      ratios=""
      for key in $KEYS; do
        r=$(awk -v a="$(echo "${got[ps,$i]}" | cut -d' ' -f5)" -v b="$(echo "${got[$key,$i]}" | cut -d' ' -f5)" \
          'BEGIN { printf "%.0f×", a / b }')
        ratios="$ratios${ratios:+, }$(label "$key") $r"
      done
      line="$line $ratios |"
    fi
    echo "$line"
  done
else
  echo "<!-- A: $A; B: $B; AGENTS=$AGENTS KEYS=\"$KEYS\" ROUNDS=$ROUNDS, alternating -->"
  echo
  ir_head="" ir_sep=""
  [ -n "${CALLGRIND:-}" ] && { ir_head=" **Ir/cert** |"; ir_sep="---|"; }
  echo "| round | CA key | build | certs/s | p50 | p99 | peak RSS | **server CPU/cert** | of which user / system | load tool CPU/cert | load average |$ir_head"
  echo "|---|---|---|---|---|---|---|---|---|---|---|$ir_sep"
  : >"$work/ab"
  for round in $(seq "$ROUNDS"); do
    for key in $KEYS; do
      for side in A B; do
        bin=${!side}
        vouch_run "$bin" "$key" "$side-$key-$round" >"$work/rows"
        while read -r rate p50 p99 rss cpu client certs failed; do
          f=""
          [ "$failed" != 0 ] && f=" ($failed failed)"
          [ -n "${SYSCALLS:-}" ] && split_sc="; $(awk -v n="$certs" '{ printf "%.1f system calls (%.1f failing)", $1 / n, $2 / n }' "$work/syscalls")"
          split=$(awk -v hz="$hz" -v n="$certs" '{ printf "%.3f / %.3f ms", ($3 - $1) * 1000 / hz / n, ($4 - $2) * 1000 / hz / n }' "$work/ticks")
          ir=0 ir_cell=""
          if [ -n "${CALLGRIND:-}" ]; then
            ir=$(awk -v n="$certs" '{ printf "%.0f", $1 / n }' "$work/ir")
            ir_cell=$(LC_ALL=C printf " **%'d** |" "$ir")
          fi
          LC_ALL=C printf "| %s | %s | %s | %'.0f/s%s | %.1f ms | %.1f ms | %.0f MB | **%.3f ms** | %s | %.3f ms | %s |%s\n" \
            "$round" "$key" "$side" "$rate" "$f" "$p50" "$p99" "$rss" "$cpu" "$split${split_sc:-}" "$client" \
            "$(cut -d' ' -f1 /proc/loadavg)" "$ir_cell"
          echo "$key $side $rate $p99 $rss $cpu $ir" >>"$work/ab"
        done <"$work/rows"
      done
    done
  done
  echo
  echo "| CA key | build | median certs/s | median p99 | median peak RSS | **median server CPU/cert** |"
  echo "|---|---|---|---|---|---|"
  for key in $KEYS; do
    for side in A B; do
      m() { awk -v k="$key" -v s="$side" -v c="$1" '$1 == k && $2 == s { print $c }' "$work/ab" | median; }
      LC_ALL=C printf "| %s | %s | %'.0f/s | %.1f ms | %.0f MB | **%.3f ms** |\n" "$key" "$side" "$(m 3)" "$(m 4)" "$(m 5)" "$(m 6)"
    done
  done
  echo
  for key in $KEYS; do
    a=$(awk -v k="$key" '$1 == k && $2 == "A" { print $6 }' "$work/ab" | median)
    b=$(awk -v k="$key" '$1 == k && $2 == "B" { print $6 }' "$work/ab" | median)
    awk -v k="$key" -v a="$a" -v b="$b" \
      'BEGIN { printf "%s: B ÷ A, median server CPU per certificate: %.3f (%+.1f%%)  \n", k, b / a, (b / a - 1) * 100 }'
    if [ -n "${CALLGRIND:-}" ]; then
      a=$(awk -v k="$key" '$1 == k && $2 == "A" { print $7 }' "$work/ab" | median)
      b=$(awk -v k="$key" '$1 == k && $2 == "B" { print $7 }' "$work/ab" | median)
      LC_ALL=C awk -v k="$key" -v a="$a" -v b="$b" 'BEGIN {
        printf "%s: instructions per certificate, median: A %.0f, B %.0f; B ÷ A %.4f (%+.2f%%)  \n", k, a, b, b / a, (b / a - 1) * 100 }'
    fi
  done
fi
