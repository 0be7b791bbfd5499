//! Counting a template's use (signature version 3) around a decision: after every other
//! check passed (a refused request spends nothing: the CA counts in its admission, after
//! the store's checks), before the one-time claim and the certificate. The count is per
//! instance and idempotent ([`crate::store::templates`]): an instance counted once is never
//! counted again, whichever master asks, so the claim that follows (first use wins per
//! instance) never spends a second use. A bound template's instance is claimed fleet-wide
//! first (`identity-instance-replayed` under another template).

use crate::decision::{self, Refusal, Refused};
use crate::error::Error;
use crate::store::templates::{Counted, TemplateUse};
use crate::store::ReplayJournal;
use time::OffsetDateTime;

/// What counting the grant's use of its template takes (`None`: not version 3).
pub fn template_use_of(grant: &decision::Grant) -> Option<TemplateUse> {
    grant.template().map(|t| TemplateUse {
        template_key: t.template_key.clone(),
        instance_key: t.instance_key.clone(),
        max_uses: t.max_uses,
        expiry: grant.attributes_expiry(),
        instance_claim: t.instance_claim.clone(),
    })
}

/// The refusal of a use that counting met, if it is one: the template full, or the
/// instance enrolled with another template.
pub(super) fn counted_refusal(counted: Counted, u: &TemplateUse) -> Option<Refusal> {
    match counted {
        Counted::Use { .. } => None,
        Counted::Exhausted { .. } => Some(Refusal::TemplateExhausted { max_uses: u.max_uses }),
        Counted::InstanceReplayed => {
            Some(Refusal::IdentityInstanceReplayed { instance: u.instance_claim.clone().unwrap_or_default() })
        }
    }
}

#[allow(clippy::result_large_err)]
fn as_decision(grant: decision::Grant, counted: Counted, u: &TemplateUse) -> Result<decision::Grant, Refused> {
    match counted_refusal(counted, u) {
        None => Ok(grant),
        Some(reason) => Err(Refused { reasons: vec![reason], conductor: Some(grant.conductor().clone()), held: None }),
    }
}

/// Counts the grant's use of its template (a grant of version 1 or 2 passes as it is);
/// past the template's max uses, a `template-exhausted` refusal; an instance enrolled with
/// another template, `identity-instance-replayed`. Without a journal (tests only) nothing
/// is counted. The hook's path (Puppet Server admits what the hook approves); the CA counts
/// in its admission ([`template_use_of`]), once the store's checks passed.
pub fn count_template_use(
    journal: Option<&dyn ReplayJournal>,
    grant: decision::Grant,
    _now: OffsetDateTime,
) -> Result<Result<decision::Grant, Refused>, Error> {
    let (Some(journal), Some(u)) = (journal, template_use_of(&grant)) else { return Ok(Ok(grant)) };
    let counted = journal.count_use(&u)?;
    Ok(as_decision(grant, counted, &u))
}

/// `vouch check`: what counting would meet, writing nothing.
pub fn peek_template_use(
    journal: Option<&dyn ReplayJournal>,
    grant: decision::Grant,
) -> Result<Result<decision::Grant, Refused>, Error> {
    let (Some(journal), Some(u)) = (journal, template_use_of(&grant)) else { return Ok(Ok(grant)) };
    let counted = journal.peek_use(&u)?;
    Ok(as_decision(grant, counted, &u))
}
