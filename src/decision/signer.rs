//! Steps 6 to 9 of the decision: who signed the attributes (the conductor's chain, then
//! the signature), the classification they signed, and what that conductor may vouch for.

use super::attributes::AttributeValues;
use super::conductor::{check_conductor, verify_signature, Conductor};
use super::refusal::Refusal;
use super::scope::{check_scope, scope_applies};
use crate::policy::Policy;
use crate::vouching::attrs;
use crate::vouching::classification::{Classification, ClassificationError};
use time::OffsetDateTime;

/// Who signed the attributes, as steps 6 and 7 found.
#[derive(Default)]
pub(super) struct Signer {
    pub(super) conductor: Option<Conductor>,
    /// Whether a trusted conductor signed exactly these values.
    pub(super) vouched: bool,
    /// SHA-256 of the verified canonical string: the one-time-use key (a signature is
    /// malleable — an ECDSA (r, s) is also valid as (r, n-s) — so it cannot be the key).
    pub(super) signed_digest: String,
    pub(super) conductor_der: Vec<u8>,
    /// Whether the conductor's certificate chains to a trusted root and carries the
    /// conductor EKU and key usage: only then are scopes judged (step 9).
    pub(super) trusted: bool,
}

/// Steps 6 and 7: the conductor certificate and its chain, then the signature over the
/// canonical string (verified even when the chain failed, so that the reasons are
/// complete; a signature by an untrusted certificate grants nothing).
pub(super) fn check_signer(
    values: &AttributeValues,
    policy: &Policy,
    now: OffsetDateTime,
    reasons: &mut Vec<Refusal>,
) -> Signer {
    let mut signer = Signer::default();
    let Some(cv) = &values.conductor else { return signer };
    let (info, leaf_der, chain_reasons) = match check_conductor(cv, policy, now) {
        Err(r) => {
            reasons.push(r);
            return signer;
        }
        Ok(found) => found,
    };
    let chain_ok = chain_reasons.is_empty();
    signer.trusted = chain_ok;
    reasons.extend(chain_reasons);
    if let (Some(sig), Some(v), Some(e), Some(c)) =
        (&values.signature, &values.version, &values.expiry, &values.classification)
    {
        let msg = match (values.is_v2, &values.certname, &values.nonce) {
            _ if values.is_v3 => {
                values.template.as_ref().map(|t| crate::vouching::template::canonical_v3(v, e, cv, c, t))
            }
            (false, _, _) => Some(attrs::canonical_v1(v, e, cv, c)),
            (true, Some(cn), Some(n)) => Some(attrs::canonical_v2(v, e, cv, c, cn, n)),
            // A missing .2.6/.2.7 (or a version 3 value) is already a reason; nothing to verify against.
            (true, _, _) => None,
        };
        if let Some(msg) = msg {
            match verify_signature(&leaf_der, &info.subject, sig, &msg) {
                Err(r) => reasons.push(r),
                Ok(()) => {
                    signer.vouched = chain_ok;
                    signer.signed_digest = crate::encoding::sha256_hex(&msg);
                }
            }
        }
    }
    signer.conductor = Some(info);
    signer.conductor_der = leaf_der;
    signer
}

/// Step 8: the classification. Its YAML is parsed only once a trusted conductor is known
/// to have signed it: unsigned YAML never reaches the parser (an alias bomb costs ~0.1 s of
/// CPU before the parser's limits refuse it; nobody unvouched gets that).
pub(super) fn read_classification(
    signer: &Signer,
    value: Option<&str>,
    policy: &Policy,
    reasons: &mut Vec<Refusal>,
) -> Option<Classification> {
    let c = value.filter(|_| signer.vouched)?;
    let digest = crate::policy::ClassificationCache::digest(c);
    if let Some(parsed) = policy.classification_cache.get(&digest) {
        return Some(parsed);
    }
    match Classification::from_base64(c, policy.classification_max_bytes) {
        Ok(parsed) => {
            policy.classification_cache.insert(digest, &parsed);
            return Some(parsed);
        }
        Err(ClassificationError::Unrepresentable { detail }) => {
            reasons.push(Refusal::ClassificationUnrepresentable { detail })
        }
        Err(error) => reasons.push(Refusal::ClassificationInvalid { error }),
    }
    None
}

/// Step 9: what this conductor may vouch for. Judged only for a conductor whose chain
/// verified: an untrusted certificate is refused anyway, and its subject (anyone can make
/// one that matches a scope) gets no further work done.
pub(super) fn check_conductor_scope(
    signer: &Signer,
    certname: &str,
    expiry: Option<OffsetDateTime>,
    now: OffsetDateTime,
    classification: Option<&Classification>,
    policy: &Policy,
    reasons: &mut Vec<Refusal>,
) {
    if let (false, Some(c), true) = (policy.scopes.is_empty(), &signer.conductor, signer.trusted) {
        match policy.scopes.iter().find(|sc| scope_applies(sc, c)) {
            None => reasons.push(Refusal::ConductorUnscoped { subject: c.subject.clone() }),
            Some(scope) => check_scope(scope, certname, expiry, now, classification, reasons),
        }
    }
}
