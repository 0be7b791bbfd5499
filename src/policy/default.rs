//! The policy `vouch ca init` (and the first `vouch serve`) writes.

/// The default policy `vouch ca init` writes.
pub fn default_policy_text(root_file: &str) -> String {
    format!(
        r#"# vouch policy: which cloud conductors are trusted, and what they may vouch for.
# Paths are relative to this file. Every key is documented in policy/README.md.

[conductors]
# Conductor certificates must chain to one of these roots and carry the EKU
# 1.3.6.1.4.1.34380.2.0 ("allowed to create new instances") on their own certificate.
trusted_roots = ["{root_file}"]
# Intermediates through which conductor certificates may chain (PEM files).
intermediates = []
# CRLs (PEM or DER) of the conductors' issuers: a revoked conductor is refused.
# Keep them fresh: an expired CRL here still counts (revocations never lapse).
crls = []

[attributes]
# Signature versions accepted. Version 2 binds the certname and a one-time
# nonce; version 1 (the seed's) binds neither: accept only [2] once every
# conductor signs version 2 (policy/strict.toml).
versions = [1, 2]
# How far in the future a signed expiry (attribute .2.3) may lie.
max_lifetime = "7d"

[classification]
# Largest decoded classification YAML accepted, in bytes.
max_bytes = 65536
# The extension request that mirrors the signed classification, so that Puppet
# Server copies it into the certificate and $trusted['extensions'] shows it.
# It must equal attribute .2.5 byte for byte whenever it is present.
mirror_oid = "1.3.6.1.4.1.34380.1.2.5"
# Refuse CSRs that lack the mirror request.
mirror_required = false

[extensions]
# Requested subjectAltNames let a node claim other names (CVE-2011-3872). Only false:
# alt names are a server's, allowed per [[conductor]] scope (servers, dns_alt_names).
allow_subject_alt_names = false
# Further extension requests nodes may add (OIDs or pp_* names). The node alone
# controls them: never list one that your manifests or Hiera trust for roles.
# Only ppRegCertExt (1.3.6.1.4.1.34380.1.1.*) and ppPrivCertExt (1.3.6.1.4.1.34380.1.2.*)
# OIDs can be listed; the ppAuthCertExt arc (pp_cli_auth, pp_auth_role) never.
allow = []

[issuance]
# Node certificates: lifetime (Puppet's default is 5 years, capped at the master
# CA's own notAfter) and how far notBefore is set back for lagging clocks.
validity = "5y"
backdate = "1d"
# Agents that renew their own certificates (Puppet 8 and OpenVox 8 ask for it with
# the CSR attribute pp_auth_auto_renew, 1.3.6.1.4.1.34380.1.3.2 = "true", and POST
# certificate_renewal before expiry) get this lifetime instead, at issuance and at
# each renewal, as Puppet Server's auto-renewal-cert-ttl (90d there). Unset: validity.
# auto_renewal_validity = "90d"
# A vouched CSR for a certname that already has a valid certificate:
#   "refuse"    as Puppet does; 'vouch clean NAME' first;
#   "supersede" for reinstalled hosts: the old certificate is revoked (superseded)
#               and a new one issued, only for a new key whose attributes expire
#               later than those that vouched for the old certificate.
on_existing = "refuse"
# End node certificates no later than the conductor certificate that vouched
# for them (step-ca's rule). Off: conductor credentials rotate often, and a
# node's identity should not lapse with the launcher's; turn on for fleets that
# treat the conductor's lifetime as the upper bound of trust.
cap_at_conductor = false
# vouch serve: a node renewing itself (POST certificate_renewal) must hold its
# certificate at least this long (each renewal adds a CRL entry). Operators'
# `vouch renew` is not limited.
renewal_min_age = "1h"

[crl]
# The CRL's nextUpdate, and when to regenerate it: every command that touches
# the store regenerates it when less than refresh_before remains.
validity = "30d"
refresh_before = "10d"

[replay]
# One-time use: every attributes set that was approved is recorded here (version 2
# by its conductor's certificate and nonce together, so no other conductor can
# spend a nonce it learnt; version 1 by the SHA-256 of its signed string: not by
# the signature, which ECDSA lets anyone re-encode), and a second CSR presenting
# the same set is refused, whatever its certname. Entries expire with the
# attributes. Every process deciding with this policy must share this directory.
enabled = true
journal = "replay"

[audit]
# One JSON line per decision, issuance and revocation.
log = "audit.log"
"#
    )
}
