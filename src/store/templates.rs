//! Counting a template's uses (signature version 3), fleet-wide: at most `max_uses`
//! instances, each counted once, whatever crashes and races.
//!
//! Two kinds of cells, in the file journal ([`super::journal`]) or the LDAP store
//! (`ldap/templates.rs`): the template's **count** (`uses` and `last`, the instance that
//! took use number `uses`), changed only by compare-and-swap; and one **use record** per
//! counted instance (created if absent: its use number). An instance is counted by the
//! swap that names it in `last`; its use record is written after. Whoever moves the count
//! past `last` first writes `last`'s use record (helping), so:
//!
//! - a crash after the swap and before the use record loses nothing and counts nothing
//!   twice: the retry finds itself in `last`, or its record written by whoever moved on;
//! - a crash before the swap counted nothing (the retry counts it, once);
//! - two masters racing for the last use: one swap wins, the other reads the new count.
//!
//! A template bound to the instance also claims the instance fleet-wide, before its count
//! ([`use_template`]): one **instance claim** per instance (`aws:ACCOUNT:INSTANCE-ID`),
//! created if absent and never changed, naming the use (template and instance) that took it.
//! The same use finds its own claim again (a retry, a crash after the claim: counted then,
//! once); another template's use of the instance finds it taken and is refused before its
//! count, so it spends nothing. A template already full takes no claim; a use that
//! claimed the instance and then found the template full (it lost the race for the last
//! uses) gives its claim back, only if the claim still names it.

use super::StoreError;

/// One instance's use of a template, as the CA or the hook asks to count it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateUse {
    /// What the count is keyed by ([`crate::vouching::template::template_key`]).
    pub template_key: String,
    /// The instance's one-time key ([`crate::vouching::template::instance_key`]).
    pub instance_key: String,
    pub max_uses: u64,
    /// The template's expiry: its cells are pruned with the replay journal's entries.
    pub expiry: time::OffsetDateTime,
    /// A bound template's instance, fleet-wide (`aws:ACCOUNT:INSTANCE-ID`): claimed before
    /// the count, once for the whole fleet.
    pub instance_claim: Option<String>,
}

/// What counting a use met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// This instance holds use number `number` (counted now, or before: `fresh` false).
    Use { number: u64, fresh: bool },
    /// Every use is taken: `uses` of at most `uses`.
    Exhausted { uses: u64 },
    /// The instance's fleet-wide claim belongs to another template's use.
    InstanceReplayed,
}

/// A template's count: how many uses, and the instance (its key's digest) that took the last.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Count {
    pub uses: u64,
    pub last: String,
}

/// The cells of one template in one store.
pub(crate) trait Cells {
    fn read_count(&self) -> Result<Option<Count>, StoreError>;
    /// Replaces the count `old` (`None`: no count yet) by `new`; false (nothing written) if
    /// the count is not `old`.
    fn swap_count(&self, old: Option<&Count>, new: &Count) -> Result<bool, StoreError>;
    /// The use number recorded for an instance (its key's digest).
    fn read_use(&self, instance: &str) -> Result<Option<u64>, StoreError>;
    /// Records that `instance` holds use `number`, unless a record exists.
    fn record_use(&self, instance: &str, number: u64) -> Result<(), StoreError>;
}

/// The instance claims of one store: each created once, holding the use that took it.
pub(crate) trait InstanceClaims {
    /// Claims `key` for `holder` unless it exists; whether `holder` holds it (now or before).
    fn claim_instance(&self, key: &str, holder: &str) -> Result<bool, StoreError>;
    /// Who holds `key`, if anyone.
    fn instance_holder(&self, key: &str) -> Result<Option<String>, StoreError>;
    /// Gives `key` back if `holder` holds it (the use that took it found its template
    /// full); another holder's claim is left as it is.
    fn release_instance(&self, key: &str, holder: &str) -> Result<(), StoreError>;
}

/// The digest an instance claim is stored under (the same in both stores).
pub(crate) fn instance_claim_digest(claim: &str) -> String {
    super::claim_digest(&format!("instance-claim:{claim}"))
}

/// One use of a template by an instance: its fleet-wide instance claim first (if the
/// template is bound), then its count (see the module's comment). `instance`: the use's
/// digest, also the claim's holder.
pub(crate) fn use_template(
    cells: &dyn Cells,
    claims: &dyn InstanceClaims,
    instance: &str,
    claim: Option<&str>,
    max_uses: u64,
) -> Result<Counted, StoreError> {
    if let Some(claim) = claim {
        // A template already full takes no claim (the instance may enroll elsewhere).
        if let full @ Counted::Exhausted { .. } = peek_use(cells, instance, max_uses)? {
            return Ok(full);
        }
        if !claims.claim_instance(&instance_claim_digest(claim), instance)? {
            return Ok(Counted::InstanceReplayed);
        }
        crate::store::crash_point("template:instance-claimed");
        let counted = count_use(cells, instance, max_uses)?;
        if let Counted::Exhausted { .. } = counted {
            // Lost the race for the last uses: the claim this use took is given back, so
            // the instance may enroll with another template (a crash before this leaves
            // it taken until the prune: the operator's `identity-instance-replayed` hint).
            claims.release_instance(&instance_claim_digest(claim), instance)?;
        }
        return Ok(counted);
    }
    count_use(cells, instance, max_uses)
}

/// What [`use_template`] would meet, writing nothing (`vouch check`).
pub(crate) fn peek_template(
    cells: &dyn Cells,
    claims: &dyn InstanceClaims,
    instance: &str,
    claim: Option<&str>,
    max_uses: u64,
) -> Result<Counted, StoreError> {
    if let Some(claim) = claim {
        if claims.instance_holder(&instance_claim_digest(claim))?.is_some_and(|h| h != instance) {
            return Ok(Counted::InstanceReplayed);
        }
    }
    peek_use(cells, instance, max_uses)
}

/// Counts one use of a template by an instance (see the module's comment).
pub(crate) fn count_use(cells: &dyn Cells, instance: &str, max_uses: u64) -> Result<Counted, StoreError> {
    for _ in 0..64 {
        if let Some(number) = cells.read_use(instance)? {
            return Ok(Counted::Use { number, fresh: false });
        }
        let current = cells.read_count()?;
        let Count { uses, last } = current.clone().unwrap_or_default();
        if last == instance {
            // Counted by a swap whose process died before writing the use record.
            cells.record_use(instance, uses)?;
            return Ok(Counted::Use { number: uses, fresh: false });
        }
        if uses >= max_uses {
            return Ok(Counted::Exhausted { uses });
        }
        if !last.is_empty() {
            cells.record_use(&last, uses)?;
        }
        let next = Count { uses: uses.saturating_add(1), last: instance.to_string() };
        if cells.swap_count(current.as_ref(), &next)? {
            crate::store::crash_point("template:counted");
            cells.record_use(instance, next.uses)?;
            return Ok(Counted::Use { number: next.uses, fresh: true });
        }
    }
    Err(StoreError::Conflict { what: "a template's use count kept changing under concurrent requests".into() })
}

/// What [`count_use`] would meet, writing nothing (`vouch check`).
pub(crate) fn peek_use(cells: &dyn Cells, instance: &str, max_uses: u64) -> Result<Counted, StoreError> {
    if let Some(number) = cells.read_use(instance)? {
        return Ok(Counted::Use { number, fresh: false });
    }
    let Count { uses, last } = cells.read_count()?.unwrap_or_default();
    Ok(if last == instance {
        Counted::Use { number: uses, fresh: false }
    } else if uses >= max_uses {
        Counted::Exhausted { uses }
    } else {
        Counted::Use { number: uses.saturating_add(1), fresh: true }
    })
}

/// A count's text form in both stores: `USES:LAST` (`LAST` lowercase hex, or empty).
pub(crate) fn format_count(c: &Count) -> String {
    format!("{}:{}", c.uses, c.last)
}

pub(crate) fn parse_count(s: &str) -> Option<Count> {
    let (uses, last) = s.trim_end().split_once(':')?;
    let uses = uses.parse().ok()?;
    last.bytes().all(|b| b.is_ascii_hexdigit()).then(|| Count { uses, last: last.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashMap;

    #[derive(Default)]
    struct Memory {
        count: RefCell<Option<Count>>,
        uses: RefCell<HashMap<String, u64>>,
        /// Fail (as a crash) the next use record of this instance.
        crash_at: RefCell<Option<String>>,
        /// [`FillsUp`]: the first read of the count is done.
        claims_checked: std::cell::Cell<bool>,
    }

    impl Cells for Memory {
        fn read_count(&self) -> Result<Option<Count>, StoreError> {
            Ok(self.count.borrow().clone())
        }
        fn swap_count(&self, old: Option<&Count>, new: &Count) -> Result<bool, StoreError> {
            if self.count.borrow().as_ref() != old {
                return Ok(false);
            }
            *self.count.borrow_mut() = Some(new.clone());
            Ok(true)
        }
        fn read_use(&self, i: &str) -> Result<Option<u64>, StoreError> {
            Ok(self.uses.borrow().get(i).copied())
        }
        fn record_use(&self, i: &str, n: u64) -> Result<(), StoreError> {
            if self.crash_at.borrow().as_deref() == Some(i) {
                *self.crash_at.borrow_mut() = None;
                return Err(StoreError::Conflict { what: "crash".into() });
            }
            self.uses.borrow_mut().entry(i.to_string()).or_insert(n);
            Ok(())
        }
    }

    #[test]
    fn each_instance_once_and_at_most_max() {
        let m = Memory::default();
        assert_eq!(count_use(&m, "aa", 2).unwrap(), Counted::Use { number: 1, fresh: true });
        assert_eq!(count_use(&m, "aa", 2).unwrap(), Counted::Use { number: 1, fresh: false });
        assert_eq!(count_use(&m, "bb", 2).unwrap(), Counted::Use { number: 2, fresh: true });
        assert_eq!(count_use(&m, "cc", 2).unwrap(), Counted::Exhausted { uses: 2 });
        assert_eq!(count_use(&m, "bb", 2).unwrap(), Counted::Use { number: 2, fresh: false });
    }

    #[test]
    fn a_crash_between_swap_and_record_neither_loses_nor_doubles() {
        let m = Memory::default();
        *m.crash_at.borrow_mut() = Some("aa".into());
        assert!(count_use(&m, "aa", 3).is_err());
        // The retry finds itself in `last`.
        assert_eq!(count_use(&m, "aa", 3).unwrap(), Counted::Use { number: 1, fresh: false });
        // Another crash, then someone else moves on first: it records the dead one's use.
        *m.crash_at.borrow_mut() = Some("bb".into());
        assert!(count_use(&m, "bb", 3).is_err());
        assert_eq!(count_use(&m, "cc", 3).unwrap(), Counted::Use { number: 3, fresh: true });
        assert_eq!(count_use(&m, "bb", 3).unwrap(), Counted::Use { number: 2, fresh: false });
        assert_eq!(count_use(&m, "dd", 3).unwrap(), Counted::Exhausted { uses: 3 });
    }

    #[derive(Default)]
    struct Claims(RefCell<HashMap<String, String>>);

    impl InstanceClaims for Claims {
        fn claim_instance(&self, key: &str, holder: &str) -> Result<bool, StoreError> {
            Ok(self.0.borrow_mut().entry(key.to_string()).or_insert_with(|| holder.to_string()) == holder)
        }
        fn instance_holder(&self, key: &str) -> Result<Option<String>, StoreError> {
            Ok(self.0.borrow().get(key).cloned())
        }
        fn release_instance(&self, key: &str, holder: &str) -> Result<(), StoreError> {
            let mut m = self.0.borrow_mut();
            if m.get(key).map(String::as_str) == Some(holder) {
                m.remove(key);
            }
            Ok(())
        }
    }

    /// Cells whose count fills up between the check before the claim and the count (a
    /// race lost to other instances for the template's last use).
    struct FillsUp(Memory, u64);

    impl Cells for FillsUp {
        fn read_count(&self) -> Result<Option<Count>, StoreError> {
            let mut c = self.0.read_count()?;
            if !self.0.claims_checked.get() {
                self.0.claims_checked.set(true);
            } else {
                c = Some(Count { uses: self.1, last: "zz".into() });
            }
            Ok(c)
        }
        fn swap_count(&self, old: Option<&Count>, new: &Count) -> Result<bool, StoreError> {
            self.0.swap_count(old, new)
        }
        fn read_use(&self, i: &str) -> Result<Option<u64>, StoreError> {
            self.0.read_use(i)
        }
        fn record_use(&self, i: &str, n: u64) -> Result<(), StoreError> {
            self.0.record_use(i, n)
        }
    }

    #[test]
    fn an_instance_that_lost_the_race_for_the_last_use_gives_its_claim_back() {
        let (full, next, claims) = (FillsUp(Memory::default(), 1), Memory::default(), Claims::default());
        let x = Some("aws:111122223333:i-0000000a");
        assert_eq!(use_template(&full, &claims, "ax", x, 1).unwrap(), Counted::Exhausted { uses: 1 });
        assert!(claims.0.borrow().is_empty());
        assert_eq!(use_template(&next, &claims, "bx", x, 1).unwrap(), Counted::Use { number: 1, fresh: true });
        // Another use's claim is never given back by a loser.
        claims.release_instance(&instance_claim_digest("aws:111122223333:i-0000000a"), "ax").unwrap();
        assert_eq!(peek_template(&full, &claims, "ax", x, 1).unwrap(), Counted::InstanceReplayed);
    }

    #[test]
    fn an_instance_enrolls_with_one_template_and_a_refused_one_spends_nothing() {
        let (a, b, claims) = (Memory::default(), Memory::default(), Claims::default());
        let x = Some("aws:111122223333:i-0000000a");
        assert_eq!(use_template(&a, &claims, "ax", x, 1).unwrap(), Counted::Use { number: 1, fresh: true });
        // Its retry is its own use; under another template, refused before the count.
        assert_eq!(use_template(&a, &claims, "ax", x, 1).unwrap(), Counted::Use { number: 1, fresh: false });
        assert_eq!(peek_template(&b, &claims, "bx", x, 1).unwrap(), Counted::InstanceReplayed);
        assert_eq!(use_template(&b, &claims, "bx", x, 1).unwrap(), Counted::InstanceReplayed);
        assert_eq!(b.count.borrow().clone(), None);
        // A full template takes no claim: the instance may still enroll with another.
        let y = Some("aws:111122223333:i-0000000b");
        assert_eq!(use_template(&a, &claims, "ay", y, 1).unwrap(), Counted::Exhausted { uses: 1 });
        assert_eq!(use_template(&b, &claims, "by", y, 1).unwrap(), Counted::Use { number: 1, fresh: true });
    }

    #[test]
    fn count_text() {
        let c = Count { uses: 7, last: "ab".into() };
        assert_eq!(parse_count(&format_count(&c)), Some(c));
        assert_eq!(parse_count("0:"), Some(Count::default()));
        assert_eq!(parse_count("x:ab"), None);
    }
}
