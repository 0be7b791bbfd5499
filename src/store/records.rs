//! What the store holds, as every store hands it: a serial's record and life, a certname's
//! current certificate (and what a compare-and-swap expects of it), revocations, pending
//! requests, overrides, the inventory, and one issuance to store.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The life of a serial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Reserved before signing; the signature may or may not exist.
    Intent,
    Issued,
    Revoked,
    /// Reserved, never issued (the process died before the certificate was stored).
    Abandoned,
}

/// What the store knows of one serial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertRecord {
    pub serial: String,
    pub certname: String,
    pub state: State,
    /// SHA-256 over what is to be signed (certname, serial, classification, validity).
    pub digest: String,
    pub not_before: String,
    pub not_after: String,
    /// The expiry of the attributes that vouched for it (renewals keep the original's).
    #[serde(default)]
    pub attributes_expiry: Option<String>,
    /// The SHA-256 fingerprint of the conductor certificate that vouched (renewals keep the original's).
    #[serde(default)]
    pub conductor: Option<String>,
    /// That conductor certificate itself, base64 DER, so that renewal can check it against the
    /// current policy (CRLs, trust, scopes). Absent in records written before vouch kept it:
    /// such certificates cannot be renewed (`conductor-not-recorded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conductor_cert: Option<String>,
    #[serde(default)]
    pub revoked_at: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    /// The issuing master CA's id ([`ca_id`]), where several masters share a store (LDAP).
    ///
    /// [`ca_id`]: super::ca_id
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The one-time-use claim whose attributes vouched for it: the SHA-256 of the replay key,
    /// hex (renewals keep the original's). A shared store finds by it whether a claim was
    /// ever spent on a certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
}

impl CertRecord {
    /// A record that knows only a serial, a certname and a state (a revocation rebuilt from a
    /// supersede mark, a revocation line with no record of its own).
    pub fn bare(serial: &str, certname: &str, state: State) -> Self {
        CertRecord {
            serial: serial.to_string(),
            certname: certname.to_string(),
            state,
            digest: String::new(),
            not_before: String::new(),
            not_after: String::new(),
            attributes_expiry: None,
            conductor: None,
            conductor_cert: None,
            revoked_at: None,
            reason: None,
            issuer: None,
            claim: None,
        }
    }
}

/// A certname's current certificate as the store has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    pub record: CertRecord,
    pub pem: String,
    /// The certname's entry's revision: every change to it (issue, revoke, clean) adds one
    /// (the file store, whose lock orders every change, always says 0).
    pub revision: u64,
}

impl Current {
    /// What a change based on this reading expects to find.
    pub fn expected(&self) -> Expected {
        Expected { serial: self.record.serial.clone(), revision: self.revision }
    }
}

/// What the issuance path reads of a certname before it stores a certificate for it
/// ([`Store::issuance_view`](super::Store::issuance_view)): its current certificate, whether a
/// request is pending under it, and whether a serial about to be used was ever used.
#[derive(Debug, Clone, Default)]
pub struct IssuanceView {
    pub current: Option<Current>,
    /// Whether a pending request is kept under the certname; `None`: not known (the removal
    /// after an issuance then runs as always).
    pub request: Option<bool>,
    /// The serial looked up (lowercase hex) and whether any certificate of the store has it
    /// (registered or revoked); `None`: none was looked up.
    pub serial: Option<(String, bool)>,
}

impl IssuanceView {
    /// Whether this view says `serial` was never used (false: not looked up, or used).
    pub fn serial_unused(&self, serial: &str) -> bool {
        matches!(&self.serial, Some((s, false)) if s == serial)
    }
}

/// What a change expects the certname's entry to hold: the compare of a compare-and-swap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub serial: String,
    pub revision: u64,
}

/// A certname's current certificate, as [`Store::for_each_listed`] hands it (`vouch list
/// --all`, `vouch store migrate`).
///
/// [`Store::for_each_listed`]: super::Store::for_each_listed
/// [`ca_id`]: super::ca_id
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub certname: String,
    /// Lowercase hex.
    pub serial: String,
    /// RFC 3339, as the serial's record has it.
    pub not_after: String,
    /// Revoked (and not cleaned: a cleaned certname is not listed).
    pub revoked: bool,
    /// The id of the master CA that issued it, where the store says ([`ca_id`]; the shared
    /// store, whose masters each have their own).
    pub issuer: Option<String>,
}

/// An entry of the store with no usable name (a file that does not parse, a CN that is not
/// its file name, a request for a name Puppet refuses), under a generated name derived from
/// its content ([`junk::generated_name`]): `vouch reconcile` lists it, `vouch purge` removes it.
///
/// [`junk::generated_name`]: super::junk::generated_name
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Junk {
    pub name: String,
    /// `signed` or `request`.
    pub kind: String,
    pub detail: String,
    /// Where it is in the store (paths inside the file store).
    pub files: Vec<String>,
}

/// A cleaned certname's tombstone in the shared store (its registry entry, kept because a
/// delete cannot be made conditional): what `vouch purge --tombstones` lists and removes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tombstone {
    pub certname: String,
    /// The serial of the certificate cleaned (its revocation entry keeps it).
    pub serial: String,
    /// That certificate's notAfter (RFC 3339).
    pub not_after: String,
}

/// An administrator's classification for a certname, overriding its certificate's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Override {
    pub certname: String,
    /// The classification as the administrator gave it (YAML or JSON), byte-exact; `None`
    /// once cleared (the revision goes on counting).
    pub classification: Option<String>,
    /// Starts at 1; every set or clear adds one.
    pub revision: u64,
    pub time: String,
}

/// What [`Store::publish_root_crl`] did.
///
/// [`Store::publish_root_crl`]: super::Store::publish_root_crl
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// The store holds it now.
    Stored,
    /// The store held this very CRL already.
    Same,
    /// The store holds another that is not to be replaced by it (numbered as high or higher).
    Kept,
    /// The store is not shared: nothing to publish.
    NotShared,
}

/// A revocation, as the CRL needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revocation {
    pub serial: String,
    pub time: String,
    pub reason: String,
    pub certname: String,
    pub cleaned: bool,
    /// The revoked certificate's notAfter (RFC 3339), where known: once it is a CRL period
    /// past, the entry leaves the CRL (RFC 5280 5.1.2.6). Revocations recorded by older
    /// versions have none and stay on the CRL.
    pub not_after: Option<String>,
}

impl Revocation {
    /// The revocation of `rec` at `time` for `reason`.
    pub fn of(rec: &CertRecord, time: String, reason: String, cleaned: bool) -> Self {
        Revocation {
            serial: rec.serial.clone(),
            time,
            reason,
            certname: rec.certname.clone(),
            cleaned,
            not_after: Some(rec.not_after.clone()).filter(|t| !t.is_empty()),
        }
    }
}

/// A pending request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingRequest {
    pub certname: String,
    pub time: String,
    pub reasons: Vec<String>,
}

/// A replay-journal claim an issuance spent: the log replays it after a crash,
/// since the journal's entry is written without fsync (see [`crate::store::journal::Journal::sync`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpentClaim {
    /// The journal's directory, as this process reaches it.
    pub journal: PathBuf,
    /// In the file store's log: the journal's path relative to the data directory, for a
    /// journal inside it (the default `DIR/replay`), so that a replay of a log in a data
    /// directory moved or copied elsewhere marks the claims in that directory's own journal,
    /// not the one it was copied from. Logs written before it have only `journal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_in_dir: Option<PathBuf>,
    pub key: String,
    /// The attributes' expiry (RFC 3339): it names the journal's bucket.
    pub expiry: String,
    pub certname: String,
    pub holder: String,
    pub time: String,
}

/// One signed certificate to store: its record (state `Issued`), its PEM, and the
/// claim that made its attributes one-time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issuance {
    pub record: CertRecord,
    pub pem: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<SpentClaim>,
    /// The certname's entry as admission read it (`None`: it had none): a shared store
    /// replaces it only if it still holds that (the file store's lock guarantees it).
    #[serde(skip)]
    pub expected: Option<Expected>,
    /// The certificate this one supersedes (revoked, reason `superseded`): each store
    /// orders the two so that the certname never ends with neither.
    #[serde(skip)]
    pub supersedes: Option<Supersede>,
}

/// A certificate an issuance replaces while it is still valid: revoked as `superseded`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Supersede {
    pub revocation: Revocation,
    /// The superseded certificate's record, as admission read it.
    pub record: CertRecord,
    /// The superseded certificate (PEM), as admission read it: a store that keeps revoked
    /// certificates ([`crate::store::Store::keeps_revoked_certificates`]) keeps it with the
    /// revocation, so that its serial leaves the CRL once the certificate itself expired.
    pub certificate: Option<String>,
}

/// One line of the inventory (Puppet's `inventory.txt`): a certificate ever issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryEntry {
    /// Lowercase hex, without Puppet's `0x`.
    pub serial: String,
    pub not_before: String,
    pub not_after: String,
    pub certname: String,
}
