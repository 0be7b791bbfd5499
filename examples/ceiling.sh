#!/usr/bin/env bash
# What the service would make with no store at all: the ceiling of everything that is not the
# store (TLS, HTTP, the decision's checks and signatures, the certificate's signature, the
# request log, the thread hand-offs) on this machine, with the load tool beside it.
#
# examples/ceiling.patch makes a measuring build (never a CA: it keeps nothing) in which, when
# VOUCH_CEILING is set, a granted certificate is only remembered in the process's memory: no
# write-ahead log, no file per certificate, no replay-journal claim, no serial probe, no audit
# line, no fdatasync. `GET certificate` is answered from that memory as it is after every PUT.
# This script builds HEAD with the patch in a temporary worktree, then runs
# examples/ab_serve.sh on the same binary with and without VOUCH_CEILING, alternating.
# Not part of `cargo test`; .ci/run checks that the patch still applies.
#
#   examples/ceiling.sh                      # ROUNDS=3 PER=100 KEYS=p256
#   KEYS="p256 rsa4096" ROUNDS=5 examples/ceiling.sh
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in
  '') ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: $0 (no arguments; settings: ROUNDS, PER, KEYS, PORT as examples/ab_serve.sh)" >&2; exit 2 ;;
esac
# The settings, checked before the build (ab_serve.sh checks them again).
case ${ROUNDS:-3} in [1-9] | 1[0-9] | 20) ;; *) echo "ROUNDS: a number from 1 to 20, not '$ROUNDS'" >&2; exit 2 ;; esac
case ${PER:-100} in [1-9] | [1-9][0-9] | [1-9][0-9][0-9] | 1000) ;;
  *) echo "PER: a number from 1 to 1000, not '$PER'" >&2; exit 2 ;;
esac
for key in ${KEYS:-p256}; do
  case $key in p256 | p384 | ed25519 | rsa2048 | rsa3072 | rsa4096) ;;
    *) echo "KEYS: unknown key type '$key' (p256 p384 ed25519 rsa2048 rsa3072 rsa4096)" >&2; exit 2 ;;
  esac
done
git -C "$here" rev-parse --git-dir >/dev/null 2>&1 || { echo "$here is not a git checkout" >&2; exit 2; }
git -C "$here" apply --check "$here/examples/ceiling.patch" ||
  { echo "examples/ceiling.patch no longer applies to this checkout: remake it" >&2; exit 2; }
work=$(mktemp -d /var/tmp/vouch-ceiling.XXXXXX)
cleanup() {
  git -C "$here" worktree remove --force "$work/src" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
git -C "$here" worktree add -q --detach "$work/src" HEAD
git -C "$work/src" apply "$here/examples/ceiling.patch"
target=${CARGO_TARGET_DIR:-$here/target}/ceiling
(cd "$work/src" && CARGO_TARGET_DIR=$target cargo build --release --features bench --bin vouch)
cp "$target/release/vouch" "$work/vouch-stored"
printf '#!/bin/sh\nVOUCH_CEILING=1 exec %s "$@"\n' "$work/vouch-stored" >"$work/vouch-nostore"
chmod +x "$work/vouch-nostore"
echo "vouch-stored: HEAD ($(git -C "$here" rev-parse --short HEAD)) as shipped; vouch-nostore: the same binary, VOUCH_CEILING=1"
ROUNDS=${ROUNDS:-3} PER=${PER:-100} LOAD="$work/vouch-stored" \
  "$here/examples/ab_serve.sh" "$work/vouch-stored" "$work/vouch-nostore"
