//! The LDAP operations the store is made of, each one request to the primary: a read, a
//! paged search, an add, a modify or a delete, with the result codes each caller decides
//! on; any other result is an error ([`failed`]). And [`cas`], the compare-and-swap every
//! conditional write is made of: one modify deleting the exact value read and adding the
//! new one (RFC 4511 applies a modify whole or not at all; a value no longer there fails it
//! with "no such attribute").

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
        rc::INSUFFICIENT_ACCESS => StoreError::Ldap {
            op,
            dn: dn.to_string(),
            detail: format!(
                "insufficient access (50): the bind DN may not do this here ({}): give it read, search, add, \
                 write and delete under the base DN (OpenLDAP: slapd's ACL; 389 Directory Server: an ACI on the \
                 base DN; docs/ldap.md)",
                res.text
            ),
        },
        // A listing held to the server's limits: an error, never the entries up to the limit.
        code @ (rc::SIZE_LIMIT_EXCEEDED | rc::ADMIN_LIMIT_EXCEEDED) => StoreError::Ldap {
            op,
            dn: dn.to_string(),
            detail: format!(
                "result {code} ({}: {}): the server's search limits for the bind DN are lower than what the store \
                 holds, and vouch reads every entry of a listing or a CRL; lift them for that DN (OpenLDAP: \
                 'limits dn.exact=\"BIND-DN\" size=unlimited'; 389 Directory Server: nsSizeLimit, \
                 nsLookThroughLimit, nsPagedSizeLimit and nsPagedLookThroughLimit -1 on its entry; docs/ldap.md)",
                if code == rc::SIZE_LIMIT_EXCEEDED { "size limit exceeded" } else { "administrative limit exceeded" },
                res.text
            ),
        },
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

    /// A modify (one atomic operation). Returns the result code: success, or one that says
    /// a compare-and-swap lost its race ([`cas`]: "no such attribute", a value deleted that is
    /// not there; "no such object"; "type or value exists", a value added that another writer
    /// added first): the caller decides. No control is sent: what OpenLDAP and 389 Directory
    /// Server both implement (neither the assertion control nor the increment operation).
    pub(super) fn modify(&self, dn: &str, mods: Vec<Mod<Vec<u8>>>) -> Result<u32, StoreError> {
        crate::obs::metrics::METRICS.ldap("modify");
        let (res, resent) = self.primary.run_write(|c: &mut LdapConn| c.modify(dn, mods.clone()))?;
        if resent && lost_race(res.rc) && self.modify_landed(dn, &mods)? {
            return Ok(rc::SUCCESS);
        }
        match res.rc {
            rc::SUCCESS | rc::NO_SUCH_OBJECT | rc::NO_SUCH_ATTRIBUTE | rc::TYPE_OR_VALUE_EXISTS => Ok(res.rc),
            _ => Err(failed("modify", dn, &res)),
        }
    }

    /// An unconditional delete: success or "no such object".
    pub(super) fn delete(&self, dn: &str) -> Result<u32, StoreError> {
        crate::obs::metrics::METRICS.ldap("delete");
        let (res, resent) = self.primary.run_write(|c: &mut LdapConn| c.delete(dn))?;
        // Sent twice and gone now: the first one deleted it.
        if resent && res.rc == rc::NO_SUCH_OBJECT {
            return Ok(rc::SUCCESS);
        }
        match res.rc {
            rc::SUCCESS | rc::NO_SUCH_OBJECT => Ok(res.rc),
            _ => Err(failed("delete", dn, &res)),
        }
    }
}

/// The two modifications of a compare-and-swap on `attr`: its value `old` (exactly as read)
/// deleted and `new` added, in the one modify they are part of. If another writer changed
/// the value meanwhile, the delete finds no such value and the server applies nothing of
/// that modify. `old` and `new` may be equal (a check that the value is still there).
pub(super) fn cas(attr: &str, old: impl Into<Vec<u8>>, new: impl Into<Vec<u8>>) -> [Mod<Vec<u8>>; 2] {
    let name = attr.as_bytes().to_vec();
    [Mod::Delete(name.clone(), HashSet::from([old.into()])), Mod::Add(name, HashSet::from([new.into()]))]
}
