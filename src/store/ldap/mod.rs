//! The shared store on an LDAP server (OpenLDAP `slapd`): several masters, one fleet.
//!
//! Layout under the base DN (`vouch ldap init` creates the containers):
//!
//! ```text
//! ou=journal     vouchKey=<hex>         one entry per use of vouched attributes (vouchClaim)
//! ou=certnames   vouchCertname=<name>   each certname's current certificate (vouchRegistered)
//! ou=cas         vouchCa=<id>           each master CA (vouchIssuer), its revocation counter,
//!                  vouchSerial=<hex>    and under it each revoked certificate of its own (vouchRevocation)
//! ou=requests    vouchCertname=<name>   pending requests (vouchRequest)
//! ou=overrides   vouchCertname=<name>   administrators' classifications (vouchOverride)
//! vouchCa=root-crl                      the fleet's root CRL (a vouchIssuer entry: the CRL's
//!                                       DER in vouchCertificate, vouchRevision counts changes)
//! vouchCa=crl-<id>                      each master CA's own CRL, the same way (`crls.rs`)
//! vouchCa=service-<id>                  each master's service certificate (its names are the
//!                                       fleet's: no node of any master carries them)
//! ```
//!
//! The root CRL's entry reuses an object class slapd already has (vouch's schema is never
//! changed for it: deployed servers would refuse a new class). `vouch conductor revoke` and
//! `vouch conductor publish-crl` write it where the root key is; every master takes it from
//! there when it verifies with its own root certificate and is numbered higher than its own
//! copy ([`LdapStore::publish_root_crl`] never puts a lower-numbered one in its place).
//!
//! **No transactions** (slapd 2.5's crashed under conflicting load): every decision is one
//! atomic LDAP operation, and every later write is idempotent.
//! - One-time use: the add of the journal entry named by the claim's key. Exactly one add
//!   of a DN succeeds on one server; a second finds it ("already exists") and reads it.
//! - The certname registry: an add (no entry expected) or a modify carrying an assertion
//!   control on the serial and revision that admission read (RFC 4528): of two masters
//!   racing for a certname, one wins, the other gets [`StoreError::Conflict`].
//! - A vouched certificate costs two synchronous writes: the journal add and the registry
//!   write. The journal entry names the serial about to be stored; if the registry write never
//!   happened (a crash, a lost race), the same key may claim again ([`LdapStore::claim`]).
//! - A superseded certificate: the registry write also names it (`vouchSupersedes`); its
//!   revocation entry is added next and the mark removed; a process that died between
//!   leaves the mark, and [`LdapStore::complete`] (run on every first lock and once a minute)
//!   finishes the revocation.
//!
//! Every write goes to the primary (`--store`). With `--store-replica` and
//! `--store-confirm-replicas`, a claim is confirmed readable on every replica before
//! anything is signed for it (a standby promoted after a failover then knows it).

mod conn;
mod crls;
mod replicas;
pub mod schema;

pub use conn::{may_block, Bind, Pool, Server, MAX_IDLE};

use super::journal::Claim;
use super::{
    CertRecord, ClaimUse, Current, Expected, InventoryEntry, Issuance, Listed, Override, PendingRequest, Published,
    ReplayJournal, Revocation, State, Store, StoreError, WriteLock,
};
use crate::encoding::time::{format_rfc3339, parse_rfc3339};
use crate::vouching::replay_key::ReplayKey;
use conn::rc;
use ldap3::{LdapConn, Mod, Scope, SearchEntry};
use replicas::Written;
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::time::Duration;
use time::OffsetDateTime;

/// The containers under the base DN.
pub const CONTAINERS: &[&str] = &["journal", "certnames", "cas", "requests", "overrides"];

/// The RDN of the root CRL's entry, directly under the base DN (its `vouchCa` value is no
/// master CA's id: those are hex, under `ou=cas`).
pub const ROOT_CRL_RDN: &str = "vouchCa=root-crl";

/// The `vouchCa` value of a master CA's CRL entry, directly under the base DN beside the root
/// CRL's: this prefix and the master CA's id (`vouchCa=crl-<id>`).
pub const MASTER_CRL_PREFIX: &str = "crl-";

/// The `vouchCa` value of the entry holding a master's service certificate (its names are
/// reserved at every master: no node may carry them): this prefix and the master CA's id.
pub const SERVICE_PREFIX: &str = "service-";

/// How long a claim may take to show on the replicas before the request is refused (503).
pub const REPLICA_WAIT: Duration = Duration::from_secs(2);

/// The LDAP store: a primary server, optional replicas, a base DN, and this master's CA id.
pub struct LdapStore {
    primary: Pool,
    replicas: Vec<Pool>,
    confirm_replicas: bool,
    base: String,
    /// This master's CA ([`crate::store::ca_id`]); `None` for the hook, which only claims.
    ca: Option<String>,
    /// When [`LdapStore::complete`] last ran (Unix seconds).
    completed: std::sync::atomic::AtomicI64,
}

/// What one search returned for an entry: attribute name (lowercase) → values (bytes).
#[derive(Debug, Default)]
struct Entry {
    dn: String,
    attrs: HashMap<String, Vec<Vec<u8>>>,
}

impl Entry {
    fn from(e: SearchEntry) -> Entry {
        let mut attrs: HashMap<String, Vec<Vec<u8>>> = HashMap::new();
        for (k, vs) in e.attrs {
            attrs.entry(k.to_ascii_lowercase()).or_default().extend(vs.into_iter().map(String::into_bytes));
        }
        for (k, vs) in e.bin_attrs {
            attrs.entry(k.to_ascii_lowercase()).or_default().extend(vs);
        }
        Entry { dn: e.dn, attrs }
    }

    fn bytes(&self, name: &str) -> Option<&[u8]> {
        self.attrs.get(&name.to_ascii_lowercase()).and_then(|v| v.first()).map(Vec::as_slice)
    }

    fn text(&self, name: &str) -> Option<String> {
        self.bytes(name).map(|b| String::from_utf8_lossy(b).into_owned())
    }

    fn damaged(&self, detail: impl Into<String>) -> StoreError {
        StoreError::Ldap { op: "read", dn: self.dn.clone(), detail: format!("damaged entry: {}", detail.into()) }
    }

    fn need(&self, name: &str) -> Result<String, StoreError> {
        self.text(name).ok_or_else(|| self.damaged(format!("no {name}")))
    }

    fn revision(&self) -> Result<u64, StoreError> {
        self.need("vouchRevision")?.parse::<u64>().map_err(|e| self.damaged(format!("vouchRevision: {e}")))
    }

    fn record(&self) -> Result<CertRecord, StoreError> {
        let b = self.bytes("vouchRecord").ok_or_else(|| self.damaged("no vouchRecord"))?;
        serde_json::from_slice(b).map_err(|e| self.damaged(format!("vouchRecord: {e}")))
    }
}

/// `YYYYMMDDHHMMSSZ` (GeneralizedTime, UTC).
fn gtime(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!("{:04}{:02}{:02}{:02}{:02}{:02}Z", t.year(), u8::from(t.month()), t.day(), t.hour(), t.minute(), t.second())
}

/// GeneralizedTime back to RFC 3339 (for messages); the input itself if it does not read.
fn gtime_to_rfc3339(s: &str) -> String {
    let d = |a: usize, b: usize| s.get(a..b).filter(|x| x.bytes().all(|c| c.is_ascii_digit()));
    match (d(0, 4), d(4, 6), d(6, 8), d(8, 10), d(10, 12), d(12, 14)) {
        (Some(y), Some(mo), Some(da), Some(h), Some(mi), Some(se)) => format!("{y}-{mo}-{da}T{h}:{mi}:{se}Z"),
        _ => s.to_string(),
    }
}

/// Lowercase hex of at most 128 characters: the only values vouch puts into filters and
/// assertions besides certnames (checked by the certname rules) and integers.
fn check_hex(what: &str, s: &str) -> Result<(), StoreError> {
    if !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(())
    } else {
        Err(StoreError::Ldap { op: "build a filter", dn: String::new(), detail: format!("{what} {s:?} is not hex") })
    }
}

fn check_certname(certname: &str) -> Result<(), StoreError> {
    crate::decision::check_certname(certname)
        .map_err(|problem| StoreError::CertnameInvalid { certname: certname.to_string(), problem })
}

fn set(v: impl Into<Vec<u8>>) -> HashSet<Vec<u8>> {
    HashSet::from([v.into()])
}

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
    /// A store on `primary` under `base`. `ca`: this master's CA id (none for the hook).
    pub fn new(
        primary: Server,
        replicas: Vec<Server>,
        confirm_replicas: bool,
        base: String,
        ca: Option<String>,
    ) -> Result<Self, StoreError> {
        Ok(LdapStore {
            primary: Pool::new(primary)?,
            replicas: replicas.into_iter().map(Pool::new).collect::<Result<_, _>>()?,
            confirm_replicas,
            base,
            ca,
            completed: std::sync::atomic::AtomicI64::new(i64::MIN),
        })
    }

    fn container(&self, name: &str) -> String {
        format!("ou={name},{}", self.base)
    }

    fn journal_dn(&self, digest: &str) -> String {
        format!("vouchKey={digest},{}", self.container("journal"))
    }

    fn registry_dn(&self, certname: &str) -> String {
        format!("vouchCertname={},{}", ldap3::dn_escape(certname), self.container("certnames"))
    }

    fn ca_dn(&self, ca: &str) -> String {
        format!("vouchCa={ca},{}", self.container("cas"))
    }

    fn revocation_dn(&self, ca: &str, serial: &str) -> String {
        format!("vouchSerial={serial},{}", self.ca_dn(ca))
    }

    fn request_dn(&self, certname: &str) -> String {
        format!("vouchCertname={},{}", ldap3::dn_escape(certname), self.container("requests"))
    }

    /// The entry of the fleet's root CRL.
    pub fn root_crl_dn(&self) -> String {
        format!("{ROOT_CRL_RDN},{}", self.base)
    }

    /// The entry of a master CA's CRL (`id`: its [`crate::store::ca_id`]).
    pub fn master_crl_dn(&self, id: &str) -> String {
        format!("vouchCa={MASTER_CRL_PREFIX}{id},{}", self.base)
    }

    /// The entry of a master's service certificate (`id`: its master CA's).
    pub fn service_dn(&self, id: &str) -> String {
        format!("vouchCa={SERVICE_PREFIX}{id},{}", self.base)
    }

    fn override_dn(&self, certname: &str) -> String {
        format!("vouchCertname={},{}", ldap3::dn_escape(certname), self.container("overrides"))
    }

    fn own_ca(&self) -> Result<&str, StoreError> {
        self.ca.as_deref().ok_or_else(|| StoreError::Ldap {
            op: "use",
            dn: self.base.clone(),
            detail: "this command opened the store without a CA".into(),
        })
    }

    /// Reads one entry (base search); `None` if it does not exist.
    fn read(&self, pool: &Pool, dn: &str) -> Result<Option<Entry>, StoreError> {
        self.read_attrs(pool, dn, &["*"])
    }

    /// [`LdapStore::read`] of the attributes `attrs` only.
    fn read_attrs(&self, pool: &Pool, dn: &str, attrs: &[&str]) -> Result<Option<Entry>, StoreError> {
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
    fn search(&self, base: &str, scope: Scope, filter: &str, attrs: &[&str]) -> Result<Vec<Entry>, StoreError> {
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
    fn search_each(
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

    fn add(&self, dn: &str, attrs: Vec<(&str, HashSet<Vec<u8>>)>) -> Result<u32, StoreError> {
        let attrs: Vec<(Vec<u8>, HashSet<Vec<u8>>)> =
            attrs.into_iter().map(|(k, v)| (k.as_bytes().to_vec(), v)).collect();
        crate::obs::metrics::METRICS.ldap("add");
        let res = self.primary.run(|c| c.add(dn, attrs.clone()))?;
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
    fn modify(&self, dn: &str, mods: Vec<Mod<Vec<u8>>>, assertion: Option<&str>) -> Result<u32, StoreError> {
        crate::obs::metrics::METRICS.ldap("modify");
        let control = assertion.map(|a| Self::assertion(dn, a)).transpose()?;
        let res = self.primary.run(|c: &mut LdapConn| match &control {
            Some(a) => c.with_controls(a.clone()).modify(dn, mods.clone()),
            None => c.modify(dn, mods.clone()),
        })?;
        match res.rc {
            rc::SUCCESS | rc::ASSERTION_FAILED | rc::NO_SUCH_OBJECT | rc::NO_SUCH_ATTRIBUTE => Ok(res.rc),
            _ => Err(failed("modify", dn, &res)),
        }
    }

    fn delete(&self, dn: &str, assertion: Option<&str>) -> Result<u32, StoreError> {
        crate::obs::metrics::METRICS.ldap("delete");
        let control = assertion.map(|a| Self::assertion(dn, a)).transpose()?;
        let res = self.primary.run(|c: &mut LdapConn| match &control {
            Some(a) => c.with_controls(a.clone()).delete(dn),
            None => c.delete(dn),
        })?;
        match res.rc {
            rc::SUCCESS | rc::ASSERTION_FAILED | rc::NO_SUCH_OBJECT => Ok(res.rc),
            _ => Err(failed("delete", dn, &res)),
        }
    }

    /// `vouch ldap init`: the containers under the base DN (and, with `create_base`, the base
    /// entry itself if it is an `ou=` under an existing parent: never by default, so that a
    /// mistyped base DN is an error, not a second, empty store). Refuses a server without
    /// vouch's schema. Idempotent. Returns what it created.
    pub fn init(&self, create_base: bool) -> Result<Vec<String>, StoreError> {
        self.check_schema()?;
        let mut created = Vec::new();
        if self.read(&self.primary, &self.base)?.is_none() {
            let rdn = self.base.split(',').next().unwrap_or_default();
            let ou = rdn.strip_prefix("ou=").or_else(|| rdn.strip_prefix("OU="));
            let (true, Some(ou)) = (create_base, ou) else {
                return Err(StoreError::Ldap {
                    op: "use",
                    dn: self.base.clone(),
                    detail: format!(
                        "the base DN does not exist (or the bind DN may not read it): check the URL for a typo; \
                         to create it, run 'vouch ldap init --create-base'{}",
                        if ou.is_none() { " (vouch creates only an ou= base; create any other first)" } else { "" }
                    ),
                });
            };
            let code = self.add(
                &self.base,
                vec![("objectClass", set("organizationalUnit")), ("ou", set(ou.as_bytes().to_vec()))],
            )?;
            if code == rc::SUCCESS {
                created.push(self.base.clone());
            }
        }
        for c in CONTAINERS {
            let dn = self.container(c);
            let code = self.add(&dn, vec![("objectClass", set("organizationalUnit")), ("ou", set(*c))])?;
            if code == rc::SUCCESS {
                created.push(dn);
            }
        }
        Ok(created)
    }

    /// Refuses a server whose schema lacks vouch's object classes (read from its subschema
    /// entry; a server that will not show it is given the benefit of the doubt).
    fn check_schema(&self) -> Result<(), StoreError> {
        let res =
            self.primary.run(|c| c.search("cn=Subschema", Scope::Base, "(objectClass=*)", vec!["objectClasses"]))?;
        let (entries, result) = (res.0, res.1);
        if result.rc != rc::SUCCESS {
            return Ok(());
        }
        let Some(e) = entries.into_iter().next().map(|e| Entry::from(SearchEntry::construct(e))) else {
            return Ok(());
        };
        let known = e
            .attrs
            .get("objectclasses")
            .is_some_and(|v| v.iter().any(|c| String::from_utf8_lossy(c).contains("'vouchRegistered'")));
        if known {
            return Ok(());
        }
        Err(StoreError::Ldap {
            op: "use",
            dn: self.primary.server.address.clone(),
            detail: "this LDAP server does not have vouch's schema (no vouchRegistered object class): include \
                     the output of 'vouch ldap schema' in slapd.conf, or load 'vouch ldap schema --ldif' into \
                     cn=config, then restart it (docs/ldap.md)"
                .into(),
        })
    }

    /// Checks the containers exist (`vouch ldap init` was run), and registers this master's
    /// CA (its entry holds its certificate and the counter of its revocations). True the
    /// first time this CA is registered.
    pub fn open_ca(&self, ca_cert_pem: &str) -> Result<bool, StoreError> {
        for c in CONTAINERS {
            let dn = self.container(c);
            if self.read(&self.primary, &dn)?.is_none() {
                return Err(StoreError::Ldap {
                    op: "open",
                    dn,
                    detail: "the store's containers are missing, or the bind DN may not read them: run 'vouch \
                             ldap init --store URL' first, and check slapd's ACL for the bind DN (docs/ldap.md)"
                        .into(),
                });
            }
        }
        let Some(ca) = &self.ca else { return Ok(false) };
        let dn = self.ca_dn(ca);
        let code = self.add(
            &dn,
            vec![
                ("objectClass", set("vouchIssuer")),
                ("vouchCa", set(ca.as_bytes().to_vec())),
                ("vouchRevision", set("0")),
                ("vouchCertificate", set(ca_cert_pem.as_bytes().to_vec())),
            ],
        )?;
        Ok(code == rc::SUCCESS)
    }

    /// Finishes what a process that died left: the revocation of every certificate a
    /// registry write superseded (marked `vouchSupersedes`) whose revocation entry was not
    /// written. Idempotent; safe beside live writers (each step is). An entry that cannot be
    /// completed (damaged) is reported and skipped: the others are still completed.
    pub fn complete(&self) -> Result<usize, StoreError> {
        let marked = self.search(&self.container("certnames"), Scope::OneLevel, "(vouchSupersedes=*)", &["*"])?;
        let mut done = 0;
        for e in marked {
            match self.complete_entry(&e) {
                Ok(true) => done += 1,
                Ok(false) => {}
                Err(StoreError::Unavailable { detail }) => return Err(StoreError::Unavailable { detail }),
                Err(err) => tracing::warn!(event = "warning", what = "store", dn = %e.dn, detail = %err),
            }
        }
        Ok(done)
    }

    /// Completes one registry entry's `vouchSupersedes` mark (`<ca>:<serial>[:<claim>]`), if it
    /// has one: the superseded certificate's revocation, then the mark removed (only while the
    /// entry still holds the certificate that set it). Returns whether there was a mark.
    fn complete_entry(&self, e: &Entry) -> Result<bool, StoreError> {
        let Some(mark) = e.text("vouchSupersedes") else { return Ok(false) };
        let serial_now = e.need("vouchSerial")?;
        check_hex("serial", &serial_now)?;
        let certname = e.need("vouchCertname")?;
        check_certname(&certname)?;
        let mut parts = mark.split(':');
        let (Some(ca), Some(serial), claim) = (parts.next(), parts.next(), parts.next()) else {
            return Err(e.damaged(format!("vouchSupersedes {mark:?}")));
        };
        check_hex("CA id", ca)?;
        check_hex("serial", serial)?;
        if let Some(c) = claim {
            check_hex("claim", c)?;
        }
        // The superseded certificate's record, rebuilt from the mark: it was the certname's
        // certificate before this one (its claim, if any, stays spent through the entry).
        let old = CertRecord {
            issuer: Some(ca.to_string()),
            claim: claim.map(str::to_string),
            ..CertRecord::bare(serial, &certname, State::Revoked)
        };
        let rev = Revocation {
            serial: serial.to_string(),
            time: format_rfc3339(OffsetDateTime::now_utc()),
            reason: "superseded".into(),
            certname,
            cleaned: false,
            // Rebuilt from the mark, which names no date: the entry stays on the CRL.
            not_after: None,
        };
        self.add_revocation(&rev, &old)?;
        self.modify(
            &e.dn,
            vec![Mod::Delete(b"vouchSupersedes".to_vec(), HashSet::new())],
            Some(&format!("(vouchSerial={serial_now})")),
        )?;
        Ok(true)
    }

    /// After a compare-and-swap on the registry entry `dn` failed: completes a mark a process
    /// that died left there (a later writer must never erase it unfinished), then reports
    /// the conflict (the caller reads the entry again).
    fn conflict_at(&self, dn: &str, what: String) -> StoreError {
        if let Ok(Some(e)) = self.read(&self.primary, dn) {
            if let Err(err) = self.complete_entry(&e) {
                tracing::warn!(event = "warning", what = "store", dn = %dn, detail = %err);
            }
        }
        StoreError::Conflict { what }
    }

    /// [`LdapStore::complete`], at most once a minute per process (and at its first lock).
    fn complete_now_and_then(&self) -> Result<(), StoreError> {
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let last = self.completed.load(std::sync::atomic::Ordering::Acquire);
        if now.saturating_sub(last) < 60 {
            return Ok(());
        }
        self.completed.store(now, std::sync::atomic::Ordering::Release);
        match self.complete() {
            Ok(_) => Ok(()),
            Err(e) => {
                // Try again at the next lock.
                self.completed.store(i64::MIN, std::sync::atomic::Ordering::Release);
                Err(e)
            }
        }
    }

    /// Adds the revocation entry of `rev` under the CA that issued it, and counts it in
    /// that CA's entry (its CRL is then due). An existing entry is kept (idempotent), and
    /// made `cleaned` if this revocation is.
    fn add_revocation(&self, rev: &Revocation, rec: &CertRecord) -> Result<bool, StoreError> {
        let ca = match &rec.issuer {
            Some(ca) => ca.clone(),
            None => self.own_ca()?.to_string(),
        };
        check_hex("CA id", &ca)?;
        check_hex("serial", &rev.serial)?;
        let dn = self.revocation_dn(&ca, &rev.serial);
        let mut record = rec.clone();
        record.state = State::Revoked;
        record.revoked_at = Some(rev.time.clone());
        record.reason = Some(rev.reason.clone());
        record.issuer = Some(ca.clone());
        let json = serde_json::to_vec(&serde_json::json!({
            "record": record, "cleaned": rev.cleaned,
        }))
        .map_err(|e| StoreError::Ldap { op: "encode", dn: dn.clone(), detail: e.to_string() })?;
        let time = parse_rfc3339(&rev.time).unwrap_or_else(|_| OffsetDateTime::now_utc());
        let mut attrs = vec![
            ("objectClass", set("vouchRevocation")),
            ("vouchSerial", set(rev.serial.as_bytes().to_vec())),
            ("vouchCertname", set(rev.certname.as_bytes().to_vec())),
            ("vouchTime", set(gtime(time))),
            ("vouchRecord", set(json.clone())),
        ];
        // The claim that vouched for it stays spent (LdapStore::claim_issued finds it here).
        if let Some(c) = &rec.claim {
            check_hex("claim", c)?;
            attrs.push(("vouchKey", set(c.as_bytes().to_vec())));
        }
        let code = self.add(&dn, attrs)?;
        if code == rc::ALREADY_EXISTS {
            if rev.cleaned {
                let prior = self.read(&self.primary, &dn)?;
                let was_cleaned = prior
                    .as_ref()
                    .and_then(|e| e.bytes("vouchRecord"))
                    .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
                    .is_some_and(|v| v["cleaned"] == serde_json::Value::Bool(true));
                if !was_cleaned {
                    let mut v: serde_json::Value = prior
                        .as_ref()
                        .and_then(|e| e.bytes("vouchRecord"))
                        .and_then(|b| serde_json::from_slice(b).ok())
                        .unwrap_or_else(|| serde_json::json!({ "record": record }));
                    v["cleaned"] = serde_json::Value::Bool(true);
                    let bytes = serde_json::to_vec(&v).map_err(|e| StoreError::Ldap {
                        op: "encode",
                        dn: dn.clone(),
                        detail: e.to_string(),
                    })?;
                    self.modify(&dn, vec![Mod::Replace(b"vouchRecord".to_vec(), set(bytes))], None)?;
                }
            }
            // Written by an earlier attempt that may have died before counting it: counted
            // again (one more CRL is harmless; a revocation missing from it is not), and
            // confirmed on the replicas before the answer, as the first attempt would have.
            self.modify(&self.ca_dn(&ca), vec![Mod::Increment(b"vouchRevision".to_vec(), b"1".to_vec())], None)?;
            self.confirm_on_replicas(&dn, Written::Change)?;
            return Ok(false);
        }
        // The CA's counter: its CRL is due at every master that issues for it.
        self.modify(&self.ca_dn(&ca), vec![Mod::Increment(b"vouchRevision".to_vec(), b"1".to_vec())], None)?;
        self.confirm_on_replicas(&dn, Written::Change)?;
        Ok(true)
    }

    /// `vouch migrate`: a certname's current certificate from the file store. `Ok(None)`:
    /// copied; `Ok(Some(serial))`: the registry already has that (the same: already copied).
    pub fn import_current(&self, c: &Current) -> Result<Option<String>, StoreError> {
        let iss =
            Issuance { record: c.record.clone(), pem: c.pem.clone(), claim: None, expected: None, supersedes: None };
        match self.register(&iss) {
            Ok(()) => Ok(None),
            Err(StoreError::Conflict { .. }) => {
                Ok(Some(self.current(&c.record.certname)?.map(|x| x.record.serial).unwrap_or_default()))
            }
            Err(e) => Err(e),
        }
    }

    /// `vouch migrate`: a revocation; true if it was not there yet.
    pub fn import_revocation(&self, rev: &Revocation, rec: &CertRecord) -> Result<bool, StoreError> {
        self.add_revocation(rev, rec)
    }

    /// `vouch migrate`: one file journal entry, named by its digest (the file's name), with
    /// what it says (`held`: a refused request's; `issued`: spent; else claimed, reusable by
    /// its holder). True if it was not there yet.
    pub fn import_claim(&self, digest: &str, entry: &serde_json::Value) -> Result<bool, StoreError> {
        check_hex("journal entry", digest)?;
        let field = |k: &str| entry[k].as_str().map(str::to_string);
        let (Some(certname), Some(holder), Some(time), Some(expiry)) =
            (field("certname"), field("holder"), field("time"), field("expiry"))
        else {
            return Err(StoreError::Ldap {
                op: "import",
                dn: digest.to_string(),
                detail: "the journal entry lacks certname, holder, time or expiry".into(),
            });
        };
        check_certname(&certname)?;
        check_hex("holder", &holder)?;
        let parse = |t: &str| {
            parse_rfc3339(t).map_err(|e| StoreError::Ldap {
                op: "import",
                dn: digest.to_string(),
                detail: e.to_string(),
            })
        };
        let state = if entry["held"].as_bool() == Some(true) {
            "held"
        } else if entry["issued"].as_bool() == Some(true) {
            "spent"
        } else {
            "claimed"
        };
        let attrs = Self::claim_attrs(digest, &certname, &holder, state, None, parse(&expiry)?, parse(&time)?);
        Ok(self.add(&self.journal_dn(digest), attrs)? == rc::SUCCESS)
    }

    /// The registry entry's attributes for a certificate.
    fn registry_attrs(rec: &CertRecord, pem: &str, revision: u64) -> Result<Vec<(&'static str, Vec<u8>)>, StoreError> {
        let json = serde_json::to_vec(rec).map_err(|e| StoreError::Ldap {
            op: "encode",
            dn: rec.certname.clone(),
            detail: e.to_string(),
        })?;
        let mut v = vec![
            ("vouchRevision", revision.to_string().into_bytes()),
            ("vouchState", if rec.state == State::Revoked { b"revoked".to_vec() } else { b"issued".to_vec() }),
            ("vouchSerial", rec.serial.clone().into_bytes()),
            ("vouchCa", rec.issuer.clone().unwrap_or_default().into_bytes()),
            ("vouchRecord", json),
            ("vouchCertificate", pem.as_bytes().to_vec()),
        ];
        if let Ok(t) = parse_rfc3339(&rec.not_after) {
            v.push(("vouchNotAfter", gtime(t).into_bytes()));
        }
        if let Some(c) = &rec.claim {
            check_hex("claim", c)?;
            v.push(("vouchKey", c.clone().into_bytes()));
        }
        Ok(v)
    }

    /// Writes one issuance to the registry: an add if no entry was expected, else a modify
    /// asserting the expected serial and revision. [`StoreError::Conflict`] if another
    /// writer got there first.
    fn register(&self, iss: &Issuance) -> Result<(), StoreError> {
        let mut rec = iss.record.clone();
        check_certname(&rec.certname)?;
        check_hex("serial", &rec.serial)?;
        rec.issuer = Some(self.own_ca()?.to_string());
        let dn = self.registry_dn(&rec.certname);
        let supersedes = match &iss.supersedes {
            Some(s) => {
                let ca = s.record.issuer.clone().unwrap_or(self.own_ca()?.to_string());
                check_hex("CA id", &ca)?;
                check_hex("serial", &s.revocation.serial)?;
                match &s.record.claim {
                    Some(c) => {
                        check_hex("claim", c)?;
                        Some(format!("{ca}:{}:{c}", s.revocation.serial))
                    }
                    None => Some(format!("{ca}:{}", s.revocation.serial)),
                }
            }
            None => None,
        };
        let conflict = || StoreError::Conflict {
            what: format!(
                "the certificate of {} was changed by someone else meanwhile (a concurrent request or another master)",
                rec.certname
            ),
        };
        match &iss.expected {
            None => {
                let mut attrs: Vec<(&str, HashSet<Vec<u8>>)> = vec![
                    ("objectClass", set("vouchRegistered")),
                    ("vouchCertname", set(rec.certname.as_bytes().to_vec())),
                ];
                for (k, v) in Self::registry_attrs(&rec, &iss.pem, 1)? {
                    attrs.push((k, set(v)));
                }
                if let Some(m) = &supersedes {
                    attrs.push(("vouchSupersedes", set(m.as_bytes().to_vec())));
                }
                if self.add(&dn, attrs)? == rc::ALREADY_EXISTS {
                    return Err(conflict());
                }
            }
            Some(exp) => {
                check_hex("serial", &exp.serial)?;
                let next = exp.revision.checked_add(1).ok_or_else(conflict)?;
                let mut mods: Vec<Mod<Vec<u8>>> = Self::registry_attrs(&rec, &iss.pem, next)?
                    .into_iter()
                    .map(|(k, v)| Mod::Replace(k.as_bytes().to_vec(), set(v)))
                    .collect();
                for attr in [&b"vouchNotAfter"[..], b"vouchKey"] {
                    if !mods.iter().any(|m| matches!(m, Mod::Replace(k, _) if k == attr)) {
                        mods.push(Mod::Replace(attr.to_vec(), HashSet::new()));
                    }
                }
                mods.push(Mod::Replace(
                    b"vouchSupersedes".to_vec(),
                    supersedes.as_ref().map(|m| set(m.as_bytes().to_vec())).unwrap_or_default(),
                ));
                // Never over an unfinished mark of another writer (it would be lost): completed first.
                let assertion =
                    format!("(&(vouchSerial={})(vouchRevision={})(!(vouchSupersedes=*)))", exp.serial, exp.revision);
                if self.modify(&dn, mods, Some(&assertion))? != rc::SUCCESS {
                    return Err(self.conflict_at(&dn, format!("the certificate of {} was changed by someone else meanwhile (a concurrent request or another master)", rec.certname)));
                }
            }
        }
        let serial = rec.serial.clone();
        self.confirm_on_replicas_that(&dn, Written::Change, |e| {
            e.text("vouchSerial").as_deref() == Some(serial.as_str())
        })?;
        if let (Some(s), Some(_)) = (&iss.supersedes, &supersedes) {
            super::crash_point("ldap:registered");
            // The certname is the new certificate's: now the old one's revocation, then the mark.
            let after = (|| {
                self.add_revocation(&s.revocation, &s.record)?;
                self.modify(
                    &dn,
                    vec![Mod::Delete(b"vouchSupersedes".to_vec(), HashSet::new())],
                    Some(&format!("(vouchSerial={})", rec.serial)),
                )
            })();
            if let Err(e) = after {
                return Err(StoreError::AfterCommit { source: Box::new(e) });
            }
        }
        Ok(())
    }

    /// The journal entry of a claim key (and its legacy key's, if it exists).
    fn journal_entry(&self, key: &str) -> Result<(String, Option<Entry>), StoreError> {
        let dn = self.journal_dn(&super::claim_digest(key));
        let e = self.read(&self.primary, &dn)?;
        Ok((dn, e))
    }

    fn used(e: &Entry) -> Claim {
        Claim::Used {
            certname: e.text("vouchCertname").unwrap_or_else(|| "?".into()),
            time: e.text("vouchTime").map(|t| gtime_to_rfc3339(&t)).unwrap_or_else(|| "?".into()),
        }
    }

    /// Whether the certificate a claim named was stored (it is, or was, its certname's):
    /// then the claim is spent.
    ///
    /// Judged by the claim itself, never by the serial last written into the journal entry
    /// (requests racing with one key overwrite it): a certificate for the claim is in the
    /// registry (`vouchKey` on the certname's entry), or one was revoked (`vouchKey` on its
    /// revocation entry, under whichever CA issued it).
    fn claim_issued(&self, e: &Entry) -> Result<bool, StoreError> {
        let digest = e.need("vouchKey")?;
        check_hex("journal entry", &digest)?;
        let registered = self.search(
            &self.container("certnames"),
            Scope::OneLevel,
            &format!("(&(objectClass=vouchRegistered)(vouchKey={digest}))"),
            &["1.1"],
        )?;
        if !registered.is_empty() {
            return Ok(true);
        }
        let revoked = self.search(
            &self.container("cas"),
            Scope::Subtree,
            &format!("(&(objectClass=vouchRevocation)(vouchKey={digest}))"),
            &["1.1"],
        )?;
        Ok(!revoked.is_empty())
    }

    /// Prunes journal entries whose attributes expired more than a day ago, at most once an
    /// hour per process. By the wall clock, never a later `--now` (a command run with a
    /// future `--now` removed every claim of the fleet's journal: spent attributes good again).
    fn prune_now_and_then(&self, now: OffsetDateTime) -> Result<(), StoreError> {
        static LAST: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(i64::MIN);
        let now = now.min(OffsetDateTime::now_utc());
        let t = now.unix_timestamp();
        if t.saturating_sub(LAST.load(std::sync::atomic::Ordering::Acquire)) < 3600 {
            return Ok(());
        }
        LAST.store(t, std::sync::atomic::Ordering::Release);
        let Some(cutoff) = now.checked_sub(time::Duration::hours(25)) else { return Ok(()) };
        let old = self.search(
            &self.container("journal"),
            Scope::OneLevel,
            &format!("(&(objectClass=vouchClaim)(vouchExpiry<={}))", gtime(cutoff)),
            &["1.1"],
        )?;
        for e in old {
            self.delete(&e.dn, None)?;
        }
        Ok(())
    }

    fn claim_attrs(
        key_digest: &str,
        certname: &str,
        holder: &str,
        state: &str,
        serial: Option<&str>,
        expiry: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Vec<(&'static str, HashSet<Vec<u8>>)> {
        let mut v = vec![
            ("objectClass", set("vouchClaim")),
            ("vouchKey", set(key_digest.as_bytes().to_vec())),
            ("vouchCertname", set(certname.as_bytes().to_vec())),
            ("vouchHolder", set(holder.as_bytes().to_vec())),
            ("vouchState", set(state)),
            ("vouchTime", set(gtime(now))),
            ("vouchExpiry", set(gtime(expiry))),
        ];
        if let Some(s) = serial {
            v.push(("vouchSerial", set(s.as_bytes().to_vec())));
        }
        v
    }
}

impl ReplayJournal for LdapStore {
    /// First use wins: one add of the entry named by the key's digest. If it exists, the
    /// same key and certname may claim again while the claim is held (a refused request's)
    /// or, for the CA, while no certificate was stored for it; anyone else is refused.
    fn claim(
        &self,
        key: &ReplayKey,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        usage: ClaimUse,
        serial: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<Claim, StoreError> {
        check_certname(certname)?;
        check_hex("holder", holder)?;
        if let Some(s) = serial {
            check_hex("serial", s)?;
        }
        self.prune_now_and_then(now)?;
        if let Some(legacy) = &key.legacy {
            if let (_, Some(prior)) = self.journal_entry(legacy)? {
                return Ok(Self::used(&prior));
            }
        }
        let digest = super::claim_digest(&key.key);
        let dn = self.journal_dn(&digest);
        let state = match usage {
            ClaimUse::Reusable => "claimed",
            ClaimUse::Once => "spent",
        };
        // A held or stale claim is taken over by a guarded modify; a writer racing us makes
        // the assertion fail, and we read again (bounded).
        for _ in 0..8 {
            let code = self.add(&dn, Self::claim_attrs(&digest, certname, holder, state, serial, expiry, now))?;
            if code == rc::SUCCESS {
                if usage == ClaimUse::Reusable {
                    super::crash_point("ldap:claimed");
                }
                self.confirm_on_replicas(&dn, Written::Claim)?;
                return Ok(Claim::Fresh);
            }
            let Some(prior) = self.read(&self.primary, &dn)? else { continue };
            let same = prior.text("vouchHolder").as_deref() == Some(holder)
                && prior.text("vouchCertname").as_deref() == Some(certname);
            let prior_state = prior.text("vouchState").unwrap_or_default();
            let open = match (prior_state.as_str(), usage) {
                ("held", _) => true,
                ("claimed", ClaimUse::Reusable) => !self.claim_issued(&prior)?,
                _ => false,
            };
            if !(same && open) {
                return Ok(Self::used(&prior));
            }
            let mut mods = vec![
                Mod::Replace(b"vouchState".to_vec(), set(state)),
                Mod::Replace(b"vouchTime".to_vec(), set(gtime(now))),
            ];
            mods.push(Mod::Replace(
                b"vouchSerial".to_vec(),
                serial.map(|s| set(s.as_bytes().to_vec())).unwrap_or_default(),
            ));
            // `open` holds only for a held or claimed entry: the assertion names one of those.
            let assertion = format!("(&(vouchState={prior_state})(vouchHolder={holder}))");
            if self.modify(&dn, mods, Some(&assertion))? == rc::SUCCESS {
                self.confirm_on_replicas(&dn, Written::Claim)?;
                return Ok(Claim::Fresh);
            }
        }
        Err(StoreError::Conflict {
            what: format!("the replay-journal entry {dn} kept changing under concurrent claims"),
        })
    }

    fn hold(
        &self,
        key: &ReplayKey,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        now: OffsetDateTime,
    ) -> Result<Claim, StoreError> {
        check_certname(certname)?;
        check_hex("holder", holder)?;
        if let Some(legacy) = &key.legacy {
            if let (_, Some(prior)) = self.journal_entry(legacy)? {
                let same = prior.text("vouchHolder").as_deref() == Some(holder)
                    && prior.text("vouchCertname").as_deref() == Some(certname);
                if !same {
                    return Ok(Self::used(&prior));
                }
            }
        }
        let digest = super::claim_digest(&key.key);
        let dn = self.journal_dn(&digest);
        // Held for this key only once every replica shows it (a failover must not free it).
        if self.add(&dn, Self::claim_attrs(&digest, certname, holder, "held", None, expiry, now))? == rc::SUCCESS {
            self.confirm_on_replicas(&dn, Written::Claim)?;
            return Ok(Claim::Fresh);
        }
        match self.read(&self.primary, &dn)? {
            Some(prior)
                if prior.text("vouchHolder").as_deref() == Some(holder)
                    && prior.text("vouchCertname").as_deref() == Some(certname) =>
            {
                self.confirm_on_replicas(&dn, Written::Claim)?;
                Ok(Claim::Fresh)
            }
            Some(prior) => Ok(Self::used(&prior)),
            // Pruned between the two calls: it expired long ago.
            None => Ok(Claim::Fresh),
        }
    }

    fn peek(
        &self,
        key: &ReplayKey,
        _expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
    ) -> Result<Claim, StoreError> {
        for k in std::iter::once(&key.key).chain(key.legacy.as_ref()) {
            if let (_, Some(prior)) = self.journal_entry(k)? {
                let same = prior.text("vouchHolder").as_deref() == Some(holder)
                    && prior.text("vouchCertname").as_deref() == Some(certname);
                if !(same && prior.text("vouchState").as_deref() == Some("held")) {
                    return Ok(Self::used(&prior));
                }
            }
        }
        Ok(Claim::Fresh)
    }

    fn describe(&self) -> String {
        Store::describe(self)
    }
}

impl Store for LdapStore {
    fn lock(&self) -> Result<WriteLock, StoreError> {
        self.complete_now_and_then()?;
        Ok(WriteLock::shared())
    }

    fn batches(&self) -> bool {
        false
    }

    fn current(&self, certname: &str) -> Result<Option<Current>, StoreError> {
        check_certname(certname)?;
        let Some(e) = self.read(&self.primary, &self.registry_dn(certname))? else { return Ok(None) };
        let record = e.record()?;
        let pem = e.need("vouchCertificate")?;
        let revision = e.revision()?;
        Ok(Some(Current { record, pem, revision }))
    }

    /// One search over the whole store: a revoked serial's revocation entry (under whichever
    /// master CA issued it) wins over the registry entry that may still name it.
    fn record(&self, serial: &str) -> Result<Option<CertRecord>, StoreError> {
        if check_hex("serial", serial).is_err() {
            return Ok(None);
        }
        let found = self.search(
            &self.base,
            Scope::Subtree,
            &format!("(&(|(objectClass=vouchRevocation)(objectClass=vouchRegistered))(vouchSerial={serial}))"),
            &["objectClass", "vouchRecord"],
        )?;
        let revoked = |e: &Entry| {
            e.attrs.get("objectclass").is_some_and(|v| v.iter().any(|c| c.eq_ignore_ascii_case(b"vouchRevocation")))
        };
        let Some(e) = found.iter().find(|e| revoked(e)).or_else(|| found.first()) else { return Ok(None) };
        if !revoked(e) {
            return Ok(Some(e.record()?));
        }
        let v: serde_json::Value = serde_json::from_slice(e.bytes("vouchRecord").unwrap_or_default())
            .map_err(|err| e.damaged(format!("vouchRecord: {err}")))?;
        serde_json::from_value(v["record"].clone()).map(Some).map_err(|err| e.damaged(format!("vouchRecord: {err}")))
    }

    fn issue(&self, _lock: &WriteLock, batch: &[Issuance]) -> Result<(), StoreError> {
        for iss in batch {
            self.register(iss)?;
        }
        Ok(())
    }

    fn checkpoint(&self, _lock: &WriteLock) -> Result<(), StoreError> {
        Ok(())
    }

    fn revoke(
        &self,
        _lock: &WriteLock,
        rev: &Revocation,
        rec: &CertRecord,
        expected: Option<&Expected>,
    ) -> Result<(), StoreError> {
        check_certname(&rev.certname)?;
        self.add_revocation(rev, rec)?;
        let Some(exp) = expected else { return Ok(()) };
        // The registry entry of the certificate being revoked (a superseded one is not it).
        check_hex("serial", &exp.serial)?;
        let dn = self.registry_dn(&rev.certname);
        // Only while it is still the certname's certificate. If another writer replaced it
        // meanwhile (a renewal with the same key racing a revocation for key compromise), the
        // revocation entry above stands and the caller is told of the conflict: it reads the
        // certname again and revokes what is current now.
        let code = if rev.cleaned {
            // A delete would erase an unfinished supersede mark: only without one.
            self.delete(&dn, Some(&format!("(&(vouchSerial={})(!(vouchSupersedes=*)))", exp.serial)))?
        } else {
            let mut r = rec.clone();
            r.state = State::Revoked;
            r.revoked_at = Some(rev.time.clone());
            r.reason = Some(rev.reason.clone());
            let json = serde_json::to_vec(&r).map_err(|e| StoreError::Ldap {
                op: "encode",
                dn: dn.clone(),
                detail: e.to_string(),
            })?;
            self.modify(
                &dn,
                vec![
                    Mod::Replace(b"vouchState".to_vec(), set("revoked")),
                    Mod::Replace(b"vouchRecord".to_vec(), set(json)),
                    Mod::Increment(b"vouchRevision".to_vec(), b"1".to_vec()),
                ],
                Some(&format!("(vouchSerial={})", exp.serial)),
            )?
        };
        match code {
            rc::SUCCESS => Ok(()),
            // Already forgotten (a clean that raced another clean): nothing more to do.
            rc::NO_SUCH_OBJECT if rev.cleaned => Ok(()),
            _ => Err(self.conflict_at(&dn, format!("the certificate of {} was changed by someone else meanwhile (a concurrent request or another master)", rev.certname))),
        }
    }

    fn revocations(&self) -> Result<Vec<Revocation>, StoreError> {
        let ca = self.own_ca()?.to_string();
        let mut out = Vec::new();
        let base = self.ca_dn(&ca);
        self.search_each(&base, Scope::OneLevel, "(objectClass=vouchRevocation)", &["vouchRecord"], |e| {
            // A damaged entry is reported and left out: the CRL of every other revocation
            // (and the issuance that regenerates it) must not stop on it.
            let parsed = serde_json::from_slice::<serde_json::Value>(e.bytes("vouchRecord").unwrap_or_default())
                .ok()
                .and_then(|v| serde_json::from_value::<CertRecord>(v["record"].clone()).ok().map(|r| (v, r)))
                .filter(|(_, r)| check_hex("serial", &r.serial).is_ok());
            let Some((v, rec)) = parsed else {
                crate::obs::metrics::METRICS.store_error(crate::obs::metrics::StoreStage::Maintenance);
                tracing::warn!(event = "warning", what = "store", dn = %e.dn, detail = "damaged revocation entry left out of the CRL");
                return Ok(ControlFlow::Continue(()));
            };
            out.push(Revocation {
                serial: rec.serial.clone(),
                time: rec.revoked_at.clone().unwrap_or_default(),
                reason: rec.reason.clone().unwrap_or_else(|| "unspecified".into()),
                certname: rec.certname.clone(),
                cleaned: v["cleaned"] == serde_json::Value::Bool(true),
                not_after: Some(rec.not_after.clone()).filter(|t| !t.is_empty()),
            });
            Ok(ControlFlow::Continue(()))
        })?;
        out.sort_by(|a, b| a.time.cmp(&b.time).then_with(|| a.serial.cmp(&b.serial)));
        Ok(out)
    }

    fn revocations_stamp(&self) -> Result<String, StoreError> {
        let ca = self.own_ca()?.to_string();
        let dn = self.ca_dn(&ca);
        match self.read(&self.primary, &dn)? {
            Some(e) => Ok(e.need("vouchRevision")?),
            None => Ok(String::new()),
        }
    }

    fn inventory(&self) -> Result<Vec<InventoryEntry>, StoreError> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let registered = self.search(
            &self.container("certnames"),
            Scope::OneLevel,
            "(objectClass=vouchRegistered)",
            &["vouchRecord"],
        )?;
        let revoked =
            self.search(&self.container("cas"), Scope::Subtree, "(objectClass=vouchRevocation)", &["vouchRecord"])?;
        for e in registered.iter().chain(revoked.iter()) {
            let rec = match e.bytes("vouchRecord").and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok()) {
                Some(v) if v.get("record").is_some() => {
                    serde_json::from_value::<CertRecord>(v["record"].clone()).map_err(|x| e.damaged(x.to_string()))?
                }
                _ => e.record()?,
            };
            if seen.insert(rec.serial.clone()) && !rec.not_before.is_empty() {
                out.push(InventoryEntry {
                    serial: rec.serial,
                    not_before: rec.not_before,
                    not_after: rec.not_after,
                    certname: rec.certname,
                });
            }
        }
        out.sort_by(|a, b| a.not_before.cmp(&b.not_before).then_with(|| a.serial.cmp(&b.serial)));
        Ok(out)
    }

    fn for_each_listed(&self, f: &mut (dyn FnMut(Listed) -> ControlFlow<()> + Send)) -> Result<(), StoreError> {
        let attrs = ["vouchCertname", "vouchSerial", "vouchState", "vouchNotAfter", "vouchCa"];
        let base = self.container("certnames");
        // Paged (one page in memory), each entry handed as its page arrives.
        self.search_each(&base, Scope::OneLevel, "(objectClass=vouchRegistered)", &attrs, |e| {
            let listed = Listed {
                certname: e.need("vouchCertname")?,
                serial: e.need("vouchSerial")?,
                not_after: e.text("vouchNotAfter").map(|t| gtime_to_rfc3339(&t)).unwrap_or_default(),
                revoked: e.text("vouchState").as_deref() == Some("revoked"),
                issuer: e.text("vouchCa"),
            };
            Ok(f(listed))
        })
    }

    fn get_override(&self, certname: &str) -> Result<Option<Override>, StoreError> {
        check_certname(certname)?;
        let Some(e) = self.read(&self.primary, &self.override_dn(certname))? else { return Ok(None) };
        Ok(Some(Override {
            certname: certname.to_string(),
            classification: e.text("vouchClassification"),
            revision: e.revision()?,
            time: e.text("vouchTime").map(|t| gtime_to_rfc3339(&t)).unwrap_or_default(),
        }))
    }

    fn put_override(
        &self,
        certname: &str,
        classification: Option<&str>,
        expect: Option<u64>,
        now: OffsetDateTime,
    ) -> Result<Override, StoreError> {
        check_certname(certname)?;
        let dn = self.override_dn(certname);
        let have = || -> Result<u64, StoreError> { Ok(self.get_override(certname)?.map(|o| o.revision).unwrap_or(0)) };
        for _ in 0..16 {
            let current = match expect {
                Some(n) => n,
                None => self.get_override(certname)?.map(|o| o.revision).unwrap_or(0),
            };
            let Some(next) = current.checked_add(1) else {
                return Err(super::override_conflict(certname, current, have()?));
            };
            let done = Override {
                certname: certname.to_string(),
                classification: classification.map(str::to_string),
                revision: next,
                time: format_rfc3339(now),
            };
            let code = if current == 0 {
                let mut attrs = vec![
                    ("objectClass", set("vouchOverride")),
                    ("vouchCertname", set(certname.as_bytes().to_vec())),
                    ("vouchRevision", set(next.to_string())),
                    ("vouchTime", set(gtime(now))),
                ];
                if let Some(c) = classification {
                    attrs.push(("vouchClassification", set(c.as_bytes().to_vec())));
                }
                match self.add(&dn, attrs)? {
                    rc::SUCCESS => rc::SUCCESS,
                    _ => rc::ASSERTION_FAILED,
                }
            } else {
                let mods = vec![
                    Mod::Replace(b"vouchRevision".to_vec(), set(next.to_string())),
                    Mod::Replace(b"vouchTime".to_vec(), set(gtime(now))),
                    Mod::Replace(
                        b"vouchClassification".to_vec(),
                        classification.map(|c| set(c.as_bytes().to_vec())).unwrap_or_default(),
                    ),
                ];
                self.modify(&dn, mods, Some(&format!("(vouchRevision={current})")))?
            };
            if code == rc::SUCCESS {
                return Ok(done);
            }
            if let Some(n) = expect {
                return Err(super::override_conflict(certname, n, have()?));
            }
        }
        Err(StoreError::Conflict { what: format!("the override of {certname} kept changing under concurrent writers") })
    }

    fn put_request(&self, _lock: &WriteLock, req: &PendingRequest, csr_pem: &[u8]) -> Result<(), StoreError> {
        check_certname(&req.certname)?;
        let dn = self.request_dn(&req.certname);
        let reasons = serde_json::to_vec(req).map_err(|e| StoreError::Ldap {
            op: "encode",
            dn: dn.clone(),
            detail: e.to_string(),
        })?;
        let time = parse_rfc3339(&req.time).unwrap_or_else(|_| OffsetDateTime::now_utc());
        let code = self.add(
            &dn,
            vec![
                ("objectClass", set("vouchRequest")),
                ("vouchCertname", set(req.certname.as_bytes().to_vec())),
                ("vouchTime", set(gtime(time))),
                ("vouchData", set(reasons.clone())),
                ("vouchCsr", set(csr_pem.to_vec())),
            ],
        )?;
        if code == rc::ALREADY_EXISTS {
            self.modify(
                &dn,
                vec![
                    Mod::Replace(b"vouchTime".to_vec(), set(gtime(time))),
                    Mod::Replace(b"vouchData".to_vec(), set(reasons)),
                    Mod::Replace(b"vouchCsr".to_vec(), set(csr_pem.to_vec())),
                ],
                None,
            )?;
        }
        Ok(())
    }

    fn remove_request(&self, certname: &str) -> Result<(), StoreError> {
        check_certname(certname)?;
        self.delete(&self.request_dn(certname), None)?;
        Ok(())
    }

    fn count_requests(&self, at_most: usize) -> Result<usize, StoreError> {
        self.count_request_entries(at_most)
    }

    fn requests(&self) -> Result<Vec<PendingRequest>, StoreError> {
        let mut out = Vec::new();
        for e in
            self.search(&self.container("requests"), Scope::OneLevel, "(objectClass=vouchRequest)", &["vouchData"])?
        {
            let req: PendingRequest = serde_json::from_slice(e.bytes("vouchData").unwrap_or_default())
                .map_err(|err| e.damaged(format!("vouchData: {err}")))?;
            out.push(req);
        }
        out.sort_by(|a, b| a.certname.cmp(&b.certname));
        Ok(out)
    }

    fn request(&self, certname: &str) -> Result<Option<(PendingRequest, Vec<u8>)>, StoreError> {
        check_certname(certname)?;
        let Some(e) = self.read(&self.primary, &self.request_dn(certname))? else { return Ok(None) };
        let req: PendingRequest = serde_json::from_slice(e.bytes("vouchData").unwrap_or_default())
            .map_err(|err| e.damaged(format!("vouchData: {err}")))?;
        let csr = e.bytes("vouchCsr").map(<[u8]>::to_vec).unwrap_or_default();
        Ok(Some((req, csr)))
    }

    fn describe(&self) -> String {
        format!("LDAP {}/{}", self.primary.server.address, self.base)
    }

    fn shares_root_crl(&self) -> bool {
        true
    }

    fn shared_root_crl(&self) -> Result<Option<Vec<u8>>, StoreError> {
        self.crl_entry(&self.root_crl_dn())
    }

    fn publish_root_crl(&self, der: &[u8], replaces: &dyn Fn(&[u8]) -> bool) -> Result<Published, StoreError> {
        self.publish_crl_entry(&self.root_crl_dn(), "root-crl", der, replaces)
    }

    fn register_ca(&self, ca_cert_pem: &str) -> Result<bool, StoreError> {
        self.open_ca(ca_cert_pem)
    }

    fn publish_service_certificate(&self, ca_id: &str, der: &[u8]) -> Result<Published, StoreError> {
        check_hex("master CA id", ca_id)?;
        self.publish_crl_entry(&self.service_dn(ca_id), &format!("{SERVICE_PREFIX}{ca_id}"), der, &|_| true)
    }

    fn service_certificates(&self, ca_ids: &[String]) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.service_entries(ca_ids)
    }

    fn master_crl_revision(&self, ca_id: &str) -> Result<Option<u64>, StoreError> {
        check_hex("master CA id", ca_id)?;
        self.crl_revision(&self.master_crl_dn(ca_id))
    }

    fn master_crl(&self, ca_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        check_hex("master CA id", ca_id)?;
        self.crl_entry(&self.master_crl_dn(ca_id))
    }

    fn publish_master_crl(
        &self,
        ca_id: &str,
        der: &[u8],
        replaces: &dyn Fn(&[u8]) -> bool,
    ) -> Result<Published, StoreError> {
        check_hex("master CA id", ca_id)?;
        self.publish_crl_entry(&self.master_crl_dn(ca_id), &format!("{MASTER_CRL_PREFIX}{ca_id}"), der, replaces)
    }

    fn issuers(&self) -> Result<Vec<Vec<u8>>, StoreError> {
        let mut out = Vec::new();
        for e in
            self.search(&self.container("cas"), Scope::OneLevel, "(objectClass=vouchIssuer)", &["vouchCertificate"])?
        {
            if let Some(pem) = e.bytes("vouchCertificate") {
                if let Ok((_, der)) = crate::encoding::pem::find(pem, &["CERTIFICATE"]) {
                    out.push(der);
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store on an address where nothing listens: any call that reached the network
    /// fails as unavailable, so a `CertnameInvalid` can only come from the check made
    /// before any DN or filter is built.
    fn unreachable() -> LdapStore {
        let server = Server {
            address: "ldap://127.0.0.1:1".into(),
            bind: Bind::Anonymous,
            tls_ca: None,
            timeout: Duration::from_secs(2),
        };
        LdapStore::new(server, vec![], false, "ou=vouch,dc=example,dc=test".into(), Some("00".into())).unwrap()
    }

    fn record(certname: &str) -> CertRecord {
        CertRecord::bare("01", certname, State::Issued)
    }

    #[test]
    fn certnames_that_could_change_a_filter_or_dn_are_refused_before_any_ldap_operation() {
        let store = unreachable();
        let now = OffsetDateTime::now_utc();
        let holder = "ab".repeat(32);
        // Filter metacharacters, DN separators and escapes, multi-valued RDNs, NUL,
        // leading '#' or space (BER and space rules of RFC 4514), and case (one entry
        // for two spellings under caseIgnoreIA5Match).
        let names = [
            "*",
            "web01)(objectClass=*",
            "web01*",
            "web01,ou=cas",
            "vouchCertname=web01",
            "web01+vouchCa=00",
            "web01\\2c",
            "web01\0",
            "#3031",
            " web01",
            "web01;x",
            "web01\"x",
            "<web01>",
            "Web01.example.test",
            "",
        ];
        let invalid = |what: &str, name: &str, r: Result<(), StoreError>| {
            assert!(matches!(r, Err(StoreError::CertnameInvalid { .. })), "{what}({name:?}): {r:?}");
        };
        for name in names {
            invalid("current", name, store.current(name).map(|_| ()));
            invalid("get_override", name, store.get_override(name).map(|_| ()));
            invalid("put_override", name, store.put_override(name, Some("classes: []\n"), Some(0), now).map(|_| ()));
            invalid("request", name, store.request(name).map(|_| ()));
            invalid("remove_request", name, store.remove_request(name));
            let iss =
                Issuance { record: record(name), pem: String::new(), claim: None, expected: None, supersedes: None };
            invalid("register", name, store.register(&iss));
            let key = ReplayKey::from("k");
            let claim = store.claim(&key, now, name, &holder, ClaimUse::Reusable, None, now);
            invalid("claim", name, claim.map(|_| ()));
            invalid("hold", name, store.hold(&key, now, name, &holder, now).map(|_| ()));
        }
        // Serials, holders and CA ids go into filters too: lowercase hex only.
        assert!(matches!(store.record("*)(vouchSerial=*"), Ok(None)));
        let bad_holder = store.claim(&ReplayKey::from("k"), now, "web01", "*", ClaimUse::Once, None, now);
        assert!(matches!(bad_holder, Err(StoreError::Ldap { op: "build a filter", .. })), "{bad_holder:?}");
        // A valid certname does go to the server (nothing listens: unavailable), so the
        // refusals above were the checks', not the network's.
        assert!(matches!(store.current("web01.example.test"), Err(StoreError::Unavailable { .. })));
    }
}
