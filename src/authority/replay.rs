//! One-time use: the replay journal around a decision (claim, hold, peek).

use crate::decision::{self, Refusal, Refused};
use crate::error::Error;
use crate::policy::Policy;
use time::OffsetDateTime;

/// Records the grant's replay key in the policy's journal; a second use of the
/// same attributes becomes a refusal. Without a journal (tests only) it is a no-op.
pub fn claim_once(
    policy: &Policy,
    grant: decision::Grant,
    reusable: bool,
    now: OffsetDateTime,
) -> Result<Result<decision::Grant, Refused>, Error> {
    let Some(dir) = &policy.replay_journal else { return Ok(Ok(grant)) };
    let journal = crate::store::journal::Journal::new(dir);
    // The CSR's SPKI is canonical (csr::canonical_spki): one key, one holder, however encoded.
    let holder = holder_digest(&grant.csr().spki);
    let claim = journal
        .claim(&grant.replay_key(), grant.attributes_expiry(), grant.certname(), &holder, reusable, now)
        .map_err(|source| Error::Io { path: dir.clone(), op: "record one-time use in", source })?;
    Ok(match claim {
        crate::store::journal::Claim::Fresh => Ok(grant),
        crate::store::journal::Claim::Used { certname, time } => Err(Refused {
            reasons: vec![Refusal::AttributesReplayed { first_certname: certname, first_time: time }],
            conductor: Some(grant.conductor().clone()),
            held: None,
        }),
    })
}

/// A refused request whose attributes a trusted conductor did sign: records the
/// request's key as their holder in the replay journal, so that a copy of the pending
/// request (it may be shown, and Puppet Server serves it) cannot be replayed with
/// another key. If another key already holds them, the refusal also says so.
pub fn hold_refused(
    policy: &Policy,
    mut refused: Refused,
    certname: &str,
    now: OffsetDateTime,
) -> Result<Refused, Error> {
    let (Some(dir), Some(held)) = (&policy.replay_journal, &refused.held) else { return Ok(refused) };
    let journal = crate::store::journal::Journal::new(dir);
    let holder = holder_digest(&held.spki);
    let claim = journal.hold(&held.replay_key, held.expiry, certname, &holder, now).map_err(|source| Error::Io {
        path: dir.clone(),
        op: "record the holder of attributes in",
        source,
    })?;
    if let crate::store::journal::Claim::Used { certname, time } = claim {
        refused.reasons.push(Refusal::AttributesReplayed { first_certname: certname, first_time: time });
    }
    Ok(refused)
}

/// `vouch check`: what the replay journal says of a decision, read only (nothing is
/// written, created or pruned). A grant whose attributes were already used (a hook's
/// approval, a CA's certificate, another key) becomes an `attributes-replayed` refusal
/// naming who used them; a refusal whose vouched attributes another key holds gets that
/// reason too. Without a journal, or before it exists, the outcome is unchanged.
pub fn peek_replay(
    policy: &Policy,
    outcome: Result<decision::Grant, Refused>,
    certname: &str,
) -> Result<Result<decision::Grant, Refused>, Error> {
    let Some(dir) = &policy.replay_journal else { return Ok(outcome) };
    let journal = crate::store::journal::Journal::new(dir);
    let peek = |key: &crate::vouching::replay_key::ReplayKey, expiry: OffsetDateTime, spki: &[u8]| {
        journal.peek(key, expiry, certname, &holder_digest(spki)).map_err(|source| Error::Io {
            path: dir.clone(),
            op: "read one-time use in",
            source,
        })
    };
    Ok(match outcome {
        Ok(grant) => match peek(&grant.replay_key(), grant.attributes_expiry(), &grant.csr().spki)? {
            crate::store::journal::Claim::Fresh => Ok(grant),
            crate::store::journal::Claim::Used { certname, time } => Err(Refused {
                reasons: vec![Refusal::AttributesReplayed { first_certname: certname, first_time: time }],
                conductor: Some(grant.conductor().clone()),
                held: None,
            }),
        },
        Err(mut refused) => {
            if let Some(held) = &refused.held {
                if let crate::store::journal::Claim::Used { certname, time } =
                    peek(&held.replay_key, held.expiry, &held.spki)?
                {
                    refused.reasons.push(Refusal::AttributesReplayed { first_certname: certname, first_time: time });
                }
            }
            Err(refused)
        }
    })
}

pub(super) fn holder_digest(spki: &[u8]) -> String {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, spki).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}
