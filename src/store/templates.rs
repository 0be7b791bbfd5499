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
}

/// What counting a use met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// This instance holds use number `number` (counted now, or before: `fresh` false).
    Use { number: u64, fresh: bool },
    /// Every use is taken: `uses` of at most `uses`.
    Exhausted { uses: u64 },
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

    #[test]
    fn count_text() {
        let c = Count { uses: 7, last: "ab".into() };
        assert_eq!(parse_count(&format_count(&c)), Some(c));
        assert_eq!(parse_count("0:"), Some(Count::default()));
        assert_eq!(parse_count("x:ab"), None);
    }
}
