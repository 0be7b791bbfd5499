//! The shared store on an LDAP server (OpenLDAP `slapd`, 389 Directory Server): several
//! masters, one fleet.
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
//! vouchCa=admin-revocation-lock         the fleet's lock on revocations of administrator
//!                                       certificates (`admin_lock.rs`): "free" or "HOLDER until TIME"
//! ```
//!
//! The root CRL's entry reuses an object class slapd already has (vouch's schema is never
//! changed for it: deployed servers would refuse a new class). `vouch conductor revoke` and
//! `vouch conductor publish-crl` write it where the root key is; every master takes it from
//! there when it verifies with its own root certificate and is numbered higher than its own
//! copy ([`LdapStore::publish_root_crl`] never puts a lower-numbered one in its place).
//!
//! **No transactions** (slapd 2.5's crashed under conflicting load), **no controls and no
//! increment** on writes: every decision is one atomic LDAP operation that OpenLDAP and 389
//! Directory Server both implement, and every later write is idempotent. One code path for
//! both servers (nothing measured would gain from a second one).
//! - One-time use: the add of the journal entry named by the claim's key. Exactly one add
//!   of a DN succeeds on one server; a second finds it ("already exists") and reads it.
//! - Compare-and-swap (`ops::cas`): one modify that deletes the exact value read and adds
//!   the new one. If another writer changed it meanwhile, the delete finds no such value
//!   ("no such attribute") and the server applies nothing of that modify. Every change of a
//!   registry entry's certificate or state swaps its revision for the next, so a swap of the
//!   revision read stands for "nothing changed since" (what an assertion over several
//!   attributes said before); counters (a CA's revisions) are swapped the same way.
//! - The certname registry: an add (no entry expected) or a swap of the revision admission
//!   read: of two masters racing for a certname, one wins, the other gets
//!   [`StoreError::Conflict`]. A cleaned certname's entry stays as a tombstone
//!   ([`CLEANED`]): a delete cannot be made conditional without the assertion control.
//!   `vouch purge --tombstones` removes one whose certificate expired a CRL period ago, first
//!   swapping it into [`PURGING`] (which no issuance replaces), so that its delete can only
//!   remove the tombstone (`tombstones.rs` says why that is safe).
//! - A vouched certificate costs two synchronous writes: the journal add and the registry
//!   write. The journal entry names the serial about to be stored; if the registry write never
//!   happened (a crash, a lost race), the same key may claim again ([`LdapStore::claim`]).
//! - A vouched certificate costs four round trips in all, a node's PUT certificate_request and
//!   GET certificate: one search before the decision (`view.rs`: the certname's registry
//!   entry, its pending request, and every certificate entry with the serial drawn for it),
//!   the journal add, the registry add, and the GET's read of the registry entry. The early
//!   "already signed" answer and admission both take that one search
//!   ([`Store::writes_compare`]): the registry write compares with what it saw (an add where it
//!   saw none, a swap of the revision it saw), so a certificate, revocation or supersede another
//!   master or request wrote in between makes the write fail, storing nothing, and admission
//!   reads afresh. The GET always reads: nothing revoked or superseded since is served from
//!   a master's memory.
//! - A serial is never reused: it is drawn (126 random bits) before that search and looked up
//!   in it, in the registry and in every master CA's revocations, as admission's own search
//!   did before; one found used is drawn again and looked up by admission. As before, the
//!   look-up rules out every serial already stored; two masters drawing the same serial at
//!   the same moment (both look-ups before either add) is the one case it cannot, at 2^-126
//!   for a pair of draws.
//! - The pending request of a certname just issued is deleted only if the search saw one; one
//!   kept after it is another request's, refused meanwhile, and stays (as one kept between a
//!   removal's read and its delete always did). The journal entry under the attributes'
//!   legacy key is read unless `vouch ldap init` marked an empty journal as holding
//!   no such entry (`legacy.rs`).
//! - A superseded certificate: the registry write also names it (`vouchSupersedes`); its
//!   revocation entry is added next and the mark removed; a process that died between
//!   leaves the mark, and [`LdapStore::complete`] (run on every first lock and once a minute)
//!   finishes the revocation.
//! - A revocation: its entry under the CA and the CA's count, then the registry entry; one
//!   cut short in between is named by `vouch store verify` (`layout.rs`) and finished by
//!   revoking again (by certname or by serial).
//!
//! Every write goes to the primary (`--store`). With `--store-replica` and
//! `--store-confirm-replicas`, a claim is confirmed readable on every replica before
//! anything is signed for it (a standby promoted after a failover then knows it).

mod admin_lock;
mod claims;
mod conflicts;
mod conn;
mod crls;
mod entry;
mod layout;
mod legacy;
mod migrate;
mod ops;
mod overrides;
mod registry;
mod replicas;
mod requests;
mod resent;
mod revocations;
pub mod schema;
mod setup;
mod templates;
mod tombstones;
mod view;

pub use admin_lock::ADMIN_LOCK_RDN;
pub use conn::{may_block, Bind, Pool, Server, MAX_IDLE};
pub use migrate::Imported;

use super::{
    CertRecord, Current, Expected, InventoryEntry, Issuance, IssuanceView, Listed, Override, PendingRequest, Published,
    Revocation, Store, StoreError, Tombstone, WriteLock,
};
use entry::{check_certname, check_hex, gtime_to_rfc3339, set, Entry};
use ldap3::Scope;
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

/// The `vouchState` of a cleaned certname's registry entry: a tombstone, read as no entry
/// (a delete cannot be made conditional without the assertion control, which 389 Directory
/// Server lacks; the next certificate of the name replaces it by compare-and-swap).
pub const CLEANED: &str = "cleaned";

/// The `vouchState` of a tombstone being purged (`vouch purge --tombstones`,
/// `tombstones.rs`): read as no entry, as [`CLEANED`] is, and replaced by no issuance (which
/// waits for the purge's delete, one round trip later).
pub const PURGING: &str = "purging";

/// Whether a registry entry is a tombstone ([`CLEANED`] or [`PURGING`]): read as no entry.
/// The registry entries a listing names: every certname's but tombstones.
fn listed_filter() -> String {
    format!("(&(objectClass=vouchRegistered)(!(vouchState={CLEANED}))(!(vouchState={PURGING})))")
}

/// A registry entry as a listing names it.
fn listed_of(e: &Entry) -> Result<Listed, StoreError> {
    Ok(Listed {
        certname: e.need("vouchCertname")?,
        serial: e.need("vouchSerial")?,
        not_after: e.text("vouchNotAfter").map(|t| gtime_to_rfc3339(&t)).unwrap_or_default(),
        revoked: e.text("vouchState").as_deref() == Some("revoked"),
        issuer: e.text("vouchCa"),
    })
}

fn tombstone(e: &Entry) -> bool {
    matches!(e.text("vouchState").as_deref(), Some(CLEANED | PURGING))
}

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
    /// Whether the journal was last read marked as holding no legacy keys' entries
    /// (`legacy.rs`), and when (Unix seconds).
    no_legacy_seen: std::sync::atomic::AtomicBool,
    legacy_checked: std::sync::atomic::AtomicI64,
    /// Whether a wait for the lock on administrators' revocations is told on stderr
    /// ([`Store::announce_lock_waits`]).
    announce: std::sync::atomic::AtomicBool,
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
            no_legacy_seen: std::sync::atomic::AtomicBool::new(false),
            legacy_checked: std::sync::atomic::AtomicI64::new(i64::MIN),
            announce: std::sync::atomic::AtomicBool::new(false),
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
}

impl Store for LdapStore {
    fn lock(&self) -> Result<WriteLock, StoreError> {
        self.complete_now_and_then()?;
        Ok(WriteLock::shared())
    }

    fn announce_lock_waits(&self) {
        self.announce.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn hold_admin_revocations(
        &self,
        _lock: &WriteLock,
    ) -> Result<Option<Box<dyn super::admin_lock::Hold + '_>>, StoreError> {
        Ok(Some(Box::new(self.take_admin_lock()?)))
    }

    fn batches(&self) -> bool {
        false
    }

    fn current(&self, certname: &str) -> Result<Option<Current>, StoreError> {
        check_certname(certname)?;
        let Some(e) = self.read(&self.primary, &self.registry_dn(certname))? else { return Ok(None) };
        Self::current_of(&e)
    }

    fn issuance_view(&self, certname: &str, serial: Option<&str>) -> Result<IssuanceView, StoreError> {
        self.view(certname, serial)
    }

    /// Every registry write is an add (no entry expected) or a compare-and-swap of the
    /// revision read ([`LdapStore::register`]).
    fn writes_compare(&self) -> bool {
        true
    }

    /// One search over the whole store: a revoked serial's revocation entry (under whichever
    /// master CA issued it) wins over the registry entry that may still name it.
    fn record(&self, serial: &str) -> Result<Option<CertRecord>, StoreError> {
        self.record_by_serial(serial)
    }

    fn revoked_certificate(&self, serial: &str) -> Result<Option<String>, StoreError> {
        self.revocation_certificate(serial)
    }

    fn keeps_revoked_certificates(&self) -> bool {
        true
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
        self.revoke_registered(rev, rec, expected)
    }

    fn revocations(&self) -> Result<Vec<Revocation>, StoreError> {
        self.own_revocations()
    }

    /// The CA entry's revocation counter and the time the server last changed the entry. The
    /// counter alone can come back to a value a master recorded with other revocations behind
    /// it: a standby promoted without the primary's last increment, then one more revocation
    /// there. The time (kept by replication) tells the two apart.
    fn revocations_stamp(&self) -> Result<String, StoreError> {
        let ca = self.own_ca()?.to_string();
        let dn = self.ca_dn(&ca);
        match self.read_attrs(&self.primary, &dn, &["vouchRevision", "modifyTimestamp"])? {
            Some(e) => Ok(format!("{}@{}", e.need("vouchRevision")?, e.text("modifyTimestamp").unwrap_or_default())),
            None => Ok(String::new()),
        }
    }

    fn inventory(&self) -> Result<Vec<InventoryEntry>, StoreError> {
        self.inventory_entries()
    }

    fn for_each_listed(&self, f: &mut (dyn FnMut(Listed) -> ControlFlow<()> + Send)) -> Result<(), StoreError> {
        let attrs = ["vouchCertname", "vouchSerial", "vouchState", "vouchNotAfter", "vouchCa"];
        let base = self.container("certnames");
        // Paged (one page in memory), each entry handed as its page arrives.
        self.search_each(&base, Scope::OneLevel, &listed_filter(), &attrs, |e| Ok(f(listed_of(&e)?)))
    }

    fn for_each_current(
        &self,
        f: &mut (dyn FnMut(Listed, &crate::store::CurrentRead) -> ControlFlow<()> + Send),
    ) -> Result<(), StoreError> {
        self.each_current(f)
    }

    fn purge_tombstones(
        &self,
        lock: Option<&WriteLock>,
        before: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<Vec<Tombstone>, StoreError> {
        self.old_tombstones(lock, before, now)
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
        self.write_override(certname, classification, expect, now)
    }

    fn put_request(&self, _lock: &WriteLock, req: &PendingRequest, csr_pem: &[u8]) -> Result<(), StoreError> {
        self.write_request(req, csr_pem)
    }

    /// A read first: usually there is no pending request, and a read of nothing costs a server
    /// less than a delete of nothing (389 Directory Server: 9 ms against 74 ms, measured under
    /// load; docs/benchmarks.md). A request added between the two is another request's.
    fn remove_request(&self, certname: &str) -> Result<(), StoreError> {
        check_certname(certname)?;
        let dn = self.request_dn(certname);
        if self.read_attrs(&self.primary, &dn, &["1.1"])?.is_some() {
            self.delete(&dn)?;
        }
        Ok(())
    }

    fn count_requests(&self, at_most: usize) -> Result<usize, StoreError> {
        self.count_request_entries(at_most)
    }

    fn requests(&self) -> Result<Vec<PendingRequest>, StoreError> {
        self.pending_requests()
    }

    fn request(&self, certname: &str) -> Result<Option<(PendingRequest, Vec<u8>)>, StoreError> {
        self.pending_request(certname)
    }

    fn check_layout(
        &self,
        _lock: Option<&WriteLock>,
        _now: OffsetDateTime,
        f: &mut dyn FnMut(crate::store::verify::Finding),
    ) -> Result<(), StoreError> {
        self.unfinished_revocations(f)?;
        self.replication_conflicts(f)?;
        self.purging_entries(f)
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
    use crate::store::{ClaimUse, ReplayJournal, State};
    use crate::vouching::replay_key::ReplayKey;

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
            invalid("issuance_view", name, store.issuance_view(name, Some("01")).map(|_| ()));
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
        let view = store.issuance_view("web01.example.test", Some("*)(vouchSerial=*"));
        assert!(matches!(view, Err(StoreError::Ldap { op: "build a filter", .. })), "{view:?}");
        let bad_holder = store.claim(&ReplayKey::from("k"), now, "web01", "*", ClaimUse::Once, None, now);
        assert!(matches!(bad_holder, Err(StoreError::Ldap { op: "build a filter", .. })), "{bad_holder:?}");
        // A valid certname does go to the server (nothing listens: unavailable), so the
        // refusals above were the checks', not the network's.
        assert!(matches!(store.current("web01.example.test"), Err(StoreError::Unavailable { .. })));
    }
}
