//! Counting a template's use (signature version 3) around a decision: after every other
//! check passed (a refused request spends nothing), before the one-time claim and the
//! certificate. The count is per instance and idempotent ([`crate::store::templates`]):
//! an instance counted once is never counted again, whichever master asks, so the claim
//! that follows (first use wins per instance) never spends a second use.

use crate::decision::{self, Refusal, Refused};
use crate::error::Error;
use crate::store::templates::{Counted, TemplateUse};
use crate::store::ReplayJournal;
use time::OffsetDateTime;

fn template_use(grant: &decision::Grant) -> Option<TemplateUse> {
    grant.template().map(|t| TemplateUse {
        template_key: t.template_key.clone(),
        instance_key: t.instance_key.clone(),
        max_uses: t.max_uses,
        expiry: grant.attributes_expiry(),
    })
}

#[allow(clippy::result_large_err)]
fn as_decision(grant: decision::Grant, counted: Counted, max_uses: u64) -> Result<decision::Grant, Refused> {
    match counted {
        Counted::Use { .. } => Ok(grant),
        Counted::Exhausted { .. } => Err(Refused {
            reasons: vec![Refusal::TemplateExhausted { max_uses }],
            conductor: Some(grant.conductor().clone()),
            held: None,
        }),
    }
}

/// Counts the grant's use of its template (a grant of version 1 or 2 passes as it is);
/// past the template's max uses, a `template-exhausted` refusal. Without a journal (tests
/// only) nothing is counted.
pub fn count_template_use(
    journal: Option<&dyn ReplayJournal>,
    grant: decision::Grant,
    _now: OffsetDateTime,
) -> Result<Result<decision::Grant, Refused>, Error> {
    let (Some(journal), Some(u)) = (journal, template_use(&grant)) else { return Ok(Ok(grant)) };
    let counted = journal.count_use(&u)?;
    Ok(as_decision(grant, counted, u.max_uses))
}

/// `vouch check`: what counting would meet, writing nothing.
pub fn peek_template_use(
    journal: Option<&dyn ReplayJournal>,
    grant: decision::Grant,
) -> Result<Result<decision::Grant, Refused>, Error> {
    let (Some(journal), Some(u)) = (journal, template_use(&grant)) else { return Ok(Ok(grant)) };
    let counted = journal.peek_use(&u)?;
    Ok(as_decision(grant, counted, u.max_uses))
}
