#!/usr/bin/env bash
# The README walkthrough, end to end, in a scratch directory:
#   init -> conductor new -> conductor sign -> csr -> autosign (granted, then a tampered copy refused)
#   -> sign -> list -> enc -> revoke -> crl.
# Usage: examples/walkthrough.sh [WORKDIR]   (VOUCH=/path/to/vouch to use a built binary)
set -euo pipefail
VOUCH=${VOUCH:-"cargo run --quiet --release --"}
W=${1:-$(mktemp -d)}
mkdir -p "$W"
export VOUCH_DIR="$W/vouch"
unset VOUCH_POLICY

echo "== 1. a root CA, a master CA and a default policy in $VOUCH_DIR"
$VOUCH ca init

echo "== 2. a conductor certificate (EKU 1.3.6.1.4.1.34380.2.0) for the system that launches instances"
$VOUCH conductor new cloud1 --cert-out "$W/cloud1.pem" --key-out "$W/cloud1.key"

echo "== 3. the conductor vouches for a node: classification in, csr_attributes.yaml out"
cat > "$W/web01.yaml" <<'YAML'
classes:
  - profile::web
parameters:
  tier: frontend
environment: production
YAML
# --certname binds the attributes to the node's name with a one-time nonce (signature version 2).
$VOUCH conductor sign --cert "$W/cloud1.pem" --key "$W/cloud1.key" --certname web01.example.com \
  --classification "$W/web01.yaml" --expires-in 30m --out "$W/csr_attributes.yaml"
$VOUCH conductor sign --cert "$W/cloud1.pem" --key "$W/cloud1.key" --certname web01.example.com \
  --classification "$W/web01.yaml" --expires-in 30m --format cloud-config --out "$W/user-data"

echo "== 4. the node makes its key and CSR with those attributes (as a Puppet agent does)"
$VOUCH csr --certname web01.example.com --attributes "$W/csr_attributes.yaml" \
  --key-out "$W/web01.key" --csr-out "$W/web01.csr"

echo "== 5. Puppet Server's autosign hook: certname as argument, CSR on stdin, exit 0 signs"
$VOUCH autosign web01.example.com < "$W/web01.csr"
echo "exit $? (granted)"

echo "== 6. attributes are good once: another key presenting the same attributes is refused"
$VOUCH csr --certname web01.example.com --attributes "$W/csr_attributes.yaml" \
  --key-out "$W/replay.key" --csr-out "$W/replay.csr"
if $VOUCH autosign web01.example.com < "$W/replay.csr"; then
  echo "replayed attributes were granted: FAIL" >&2
  exit 1
fi

echo "== 7. the same attributes with a changed classification are refused"
sed 's/^\(  .1\.3\.6\.1\.4\.1\.34380\.2\.5.: .\)./\1A/' "$W/csr_attributes.yaml" > "$W/tampered.yaml"
$VOUCH csr --certname web01.example.com --attributes "$W/tampered.yaml" \
  --key-out "$W/tampered.key" --csr-out "$W/tampered.csr"
if $VOUCH autosign web01.example.com < "$W/tampered.csr"; then
  echo "tampered attributes were granted: FAIL" >&2
  exit 1
fi
echo "refused, as it must be"

echo "== 8. vouch as the CA: fresh attributes for web02, decide and issue (certificate, master CA, root)"
$VOUCH conductor sign --cert "$W/cloud1.pem" --key "$W/cloud1.key" --certname web02.example.com \
  --classification "$W/web01.yaml" --expires-in 30m --out "$W/web02-attributes.yaml"
$VOUCH csr --certname web02.example.com --attributes "$W/web02-attributes.yaml" \
  --key-out "$W/web02.key" --csr-out "$W/web02.csr"
$VOUCH sign --csr "$W/web02.csr" --out "$W/web02.pem"
openssl verify -CAfile "$VOUCH_DIR/ca/root_crt.pem" -untrusted "$VOUCH_DIR/ca/ca_crt.pem" "$W/web02.pem" 2>/dev/null \
  || echo "(openssl not installed: skipped the independent check)"

echo "== 9. the inventory"
$VOUCH list --all

echo "== 10. the master classifies the node from its certificate (external_nodes)"
$VOUCH enc web02.example.com

echo "== 11. revoke, and the CRL lists it"
$VOUCH revoke web02.example.com --reason key-compromise
$VOUCH crl --out "$W/crl.pem"
grep -c "BEGIN X509 CRL" "$W/crl.pem" >/dev/null && echo "CRL written to $W/crl.pem"
if $VOUCH enc web02.example.com 2>/dev/null; then
  echo "a revoked node was classified: FAIL" >&2
  exit 1
fi
echo "a revoked node gets no classification"

echo "== audit log ($VOUCH_DIR/audit.log)"
cat "$VOUCH_DIR/audit.log"
