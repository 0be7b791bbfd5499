//! The LDAP operations the store is made of, each one request to the primary: a read, a
//! paged search, an add, a modify or a delete (the last two optionally guarded by an
//! assertion, RFC 4528), with the result codes each caller decides on; any other result is
//! an error ([`failed`]).

use super::conn::rc;
use super::entry::Entry;
use super::resent::lost_race;
use super::{LdapStore, Pool};
use crate::store::StoreError;
use ldap3::{LdapConn, Mod, Scope, SearchEntry};
use std::collections::HashSet;
use std::ops::ControlFlow;

/// An unexpected LDAP result as an error.
fn failed(op: &'static str, dn: &str, res: &ldap3::LdapResult) -> StoreError {
    match res.rc {
        rc::BUSY | rc::UNAVAILABLE | rc::UNWILLING => {
            StoreError::Unavailable { detail: format!("LDAP {op} of {dn:?}: result {}: {}", res.rc, res.text) }
        }
        code => StoreError::Ldap { op, dn: dn.to_string(), detail: format!("result {code}: {}", res.text) },
    }
}

impl LdapStore {
    /// Reads one entry (base search); `None` if it does not exist.
    pub(super) fn read(&self, pool: &Pool, dn: &str) -> Result<Option<Entry>, StoreError> {
        self.read_attrs(pool, dn, &["*"])
    }

    /// [`LdapStore::read`] of the attributes `attrs` only.
    pub(super) fn read_attrs(&self, pool: &Pool, dn: &str, attrs: &[&str]) -> Result<Option<Entry>, StoreError> {
        crate::obs::metrics::METRICS.ldap("read");
        let res = pool.run(|c| c.search(dn, Scope::Base, "(objectClass=*)", attrs.to_vec()))?;
        let (entries, result) = (res.0, res.1);
        match result.rc {
            rc::SUCCESS => Ok(entries.into_iter().next().map(|e| Entry::from(SearchEntry::construct(e)))),
            rc::NO_SUCH_OBJECT => Ok(None),
            _ => Err(failed("read", dn, &result)),
        }
    }

    /// All entries under `base` (one level or subtree) matching `filter`, paged, with the
    /// attributes `attrs` (`*`: all).
    pub(super) fn search(
        &self,
        base: &str,
        scope: Scope,
        filter: &str,
        attrs: &[&str],
    ) -> Result<Vec<Entry>, StoreError> {
        let mut out = Vec::new();
        self.search_each(base, scope, filter, attrs, |e| {
            out.push(e);
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(out)
    }

    /// [`LdapStore::search`], handing each entry to `f` as its page arrives (pages of 1,000:
    /// memory stays that of one page, whatever the store holds). Every page of one search goes
    /// over the same connection (a paged-results cookie is valid on its own connection only);
    /// a connection that fails before the first entry is handed is replaced once, one that
    /// fails later makes the search fail (never an entry handed twice). `f` answering
    /// [`ControlFlow::Break`] ends the search there (its paged results abandoned).
    pub(super) fn search_each(
        &self,
        base: &str,
        scope: Scope,
        filter: &str,
        attrs: &[&str],
        mut f: impl FnMut(Entry) -> Result<ControlFlow<()>, StoreError> + Send,
    ) -> Result<(), StoreError> {
        let mut handed = false;
        let outcome = self.primary.run(|c| {
            let mut cookie: Vec<u8> = Vec::new();
            loop {
                let page = ldap3::controls::PagedResults { size: 1000, cookie: cookie.clone() };
                crate::obs::metrics::METRICS.ldap("search");
                let res = match c.with_controls(page).search(base, scope, filter, attrs.to_vec()) {
                    Ok(r) => r,
                    // Before any entry: the pool may retry on a fresh connection.
                    Err(e) if !handed => return Err(e),
                    Err(e) => {
                        return Ok(Err(StoreError::Unavailable {
                            detail: format!("LDAP search of {base:?} broke off after some entries: {e}"),
                        }))
                    }
                };
                let (entries, result) = (res.0, res.1);
                match result.rc {
                    rc::SUCCESS => {}
                    rc::NO_SUCH_OBJECT => return Ok(Ok(())),
                    _ => return Ok(Err(failed("search", base, &result))),
                }
                let next = result.ctrls.iter().find_map(|c| match c {
                    ldap3::controls::Control(Some(ldap3::controls::ControlType::PagedResults), raw) => {
                        Some(raw.parse::<ldap3::controls::PagedResults>())
                    }
                    _ => None,
                });
                for e in entries {
                    handed = true;
                    match f(Entry::from(SearchEntry::construct(e))) {
                        Ok(ControlFlow::Continue(())) => {}
                        Ok(ControlFlow::Break(())) => {
                            // RFC 2696: a page of size 0 with the cookie abandons the search
                            // (its answer, whatever it is, changes nothing).
                            if let Some(p) = next.as_ref().filter(|p| !p.cookie.is_empty()) {
                                let stop = ldap3::controls::PagedResults { size: 0, cookie: p.cookie.clone() };
                                let _ = c.with_controls(stop).search(base, scope, filter, attrs.to_vec());
                            }
                            return Ok(Ok(()));
                        }
                        Err(err) => return Ok(Err(err)),
                    }
                }
                match next {
                    Some(p) if !p.cookie.is_empty() => cookie = p.cookie,
                    _ => return Ok(Ok(())),
                }
            }
        })?;
        outcome
    }

    pub(super) fn add(&self, dn: &str, attrs: Vec<(&str, HashSet<Vec<u8>>)>) -> Result<u32, StoreError> {
        let attrs: Vec<(Vec<u8>, HashSet<Vec<u8>>)> =
            attrs.into_iter().map(|(k, v)| (k.as_bytes().to_vec(), v)).collect();
        crate::obs::metrics::METRICS.ldap("add");
        let (res, resent) = self.primary.run_write(|c| c.add(dn, attrs.clone()))?;
        if resent && res.rc == rc::ALREADY_EXISTS && self.add_landed(dn, &attrs)? {
            return Ok(rc::SUCCESS);
        }
        match res.rc {
            rc::SUCCESS | rc::ALREADY_EXISTS => Ok(res.rc),
            _ => Err(failed("add", dn, &res)),
        }
    }

    /// The assertion control (RFC 4528) for `filter`, marked critical: a server that does not
    /// implement it refuses the operation instead of applying it unguarded. The filter is
    /// parsed first (ldap3 panics on one it cannot parse): one that does not parse is an error.
    fn assertion(dn: &str, filter: &str) -> Result<ldap3::controls::RawControl, StoreError> {
        if ldap3::parse_filter(filter).is_err() {
            return Err(StoreError::Ldap {
                op: "build an assertion",
                dn: dn.to_string(),
                detail: format!("{filter:?} is not a filter"),
            });
        }
        let mut c = ldap3::controls::Assertion::new(filter);
        c.crit = true;
        Ok(c)
    }

    /// A modify, guarded by `assertion` (a filter the entry must match) if given. Returns
    /// the result code: success, or "assertion failed" / "no such object" (the caller decides).
    pub(super) fn modify(&self, dn: &str, mods: Vec<Mod<Vec<u8>>>, assertion: Option<&str>) -> Result<u32, StoreError> {
        crate::obs::metrics::METRICS.ldap("modify");
        let control = assertion.map(|a| Self::assertion(dn, a)).transpose()?;
        let (res, resent) = self.primary.run_write(|c: &mut LdapConn| match &control {
            Some(a) => c.with_controls(a.clone()).modify(dn, mods.clone()),
            None => c.modify(dn, mods.clone()),
        })?;
        if resent && lost_race(res.rc) && self.modify_landed(dn, &mods)? {
            return Ok(rc::SUCCESS);
        }
        match res.rc {
            rc::SUCCESS | rc::ASSERTION_FAILED | rc::NO_SUCH_OBJECT | rc::NO_SUCH_ATTRIBUTE => Ok(res.rc),
            _ => Err(failed("modify", dn, &res)),
        }
    }

    pub(super) fn delete(&self, dn: &str, assertion: Option<&str>) -> Result<u32, StoreError> {
        crate::obs::metrics::METRICS.ldap("delete");
        let control = assertion.map(|a| Self::assertion(dn, a)).transpose()?;
        let (res, resent) = self.primary.run_write(|c: &mut LdapConn| match &control {
            Some(a) => c.with_controls(a.clone()).delete(dn),
            None => c.delete(dn),
        })?;
        // Sent twice and gone now: the first one deleted it.
        if resent && res.rc == rc::NO_SUCH_OBJECT {
            return Ok(rc::SUCCESS);
        }
        match res.rc {
            rc::SUCCESS | rc::ASSERTION_FAILED | rc::NO_SUCH_OBJECT => Ok(res.rc),
            _ => Err(failed("delete", dn, &res)),
        }
    }
}
