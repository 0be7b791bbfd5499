//! One-time use: the replay journal around a decision (claim, hold, peek). The journal is
//! the policy's directory (file store) or the LDAP store's (`--store ldap://…`).

use crate::decision::{self, Refusal, Refused};
use crate::error::Error;
use crate::store::journal::Claim;
use crate::store::{ClaimUse, ReplayJournal};
use time::OffsetDateTime;

/// A claim's outcome as a decision: a used claim becomes an `attributes-replayed` refusal.
#[allow(clippy::result_large_err)]
fn as_decision(grant: decision::Grant, claim: Claim) -> Result<decision::Grant, Refused> {
    match claim {
        Claim::Fresh => Ok(grant),
        Claim::Used { certname, time } => Err(Refused {
            reasons: vec![Refusal::AttributesReplayed { first_certname: certname, first_time: time }],
            conductor: Some(grant.conductor().clone()),
            held: None,
        }),
    }
}

/// Records the grant's replay key in the journal; a second use of the same attributes
/// becomes a refusal. Without a journal (tests only) it is a no-op.
pub fn claim_once(
    journal: Option<&dyn ReplayJournal>,
    grant: decision::Grant,
    usage: ClaimUse,
    now: OffsetDateTime,
) -> Result<Result<decision::Grant, Refused>, Error> {
    let Some(journal) = journal else { return Ok(Ok(grant)) };
    // The CSR's SPKI is canonical (csr::canonical_spki): one key, one holder, however encoded.
    let holder = holder_digest(&grant.csr().spki);
    let claim =
        journal.claim(&grant.replay_key(), grant.attributes_expiry(), grant.certname(), &holder, usage, None, now)?;
    Ok(as_decision(grant, claim))
}

/// A refused request whose attributes a trusted conductor did sign: records the
/// request's key as their holder in the replay journal, so that a copy of the pending
/// request (it may be shown, and Puppet Server serves it) cannot be replayed with
/// another key. If another key already holds them, the refusal also says so.
pub fn hold_refused(
    journal: Option<&dyn ReplayJournal>,
    mut refused: Refused,
    certname: &str,
    now: OffsetDateTime,
) -> Result<Refused, Error> {
    let (Some(journal), Some(held)) = (journal, &refused.held) else { return Ok(refused) };
    let holder = holder_digest(&held.spki);
    if let Claim::Used { certname, time } = journal.hold(&held.replay_key, held.expiry, certname, &holder, now)? {
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
    journal: Option<&dyn ReplayJournal>,
    outcome: Result<decision::Grant, Refused>,
    certname: &str,
) -> Result<Result<decision::Grant, Refused>, Error> {
    let Some(journal) = journal else { return Ok(outcome) };
    Ok(match outcome {
        Ok(grant) => {
            let grant = match super::peek_template_use(Some(journal), grant)? {
                Ok(g) => g,
                Err(refused) => return Ok(Err(refused)),
            };
            let claim = journal.peek(
                &grant.replay_key(),
                grant.attributes_expiry(),
                certname,
                &holder_digest(&grant.csr().spki),
            )?;
            as_decision(grant, claim)
        }
        Err(mut refused) => {
            if let Some(held) = &refused.held {
                if let Claim::Used { certname, time } =
                    journal.peek(&held.replay_key, held.expiry, certname, &holder_digest(&held.spki))?
                {
                    refused.reasons.push(Refusal::AttributesReplayed { first_certname: certname, first_time: time });
                }
            }
            Err(refused)
        }
    })
}

pub(super) fn holder_digest(spki: &[u8]) -> String {
    crate::encoding::sha256_hex(spki)
}
