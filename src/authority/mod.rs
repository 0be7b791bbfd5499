//! The authority: decide → prepare → sign (each request on its own thread) →
//! group commit (under the store lock: check the store, claim the attributes,
//! store the batch with one synchronous write, audit) → answer. The decision
//! knows no keys; the issuer knows no policy; this module joins them and owns
//! the order of the steps.

mod approve;
mod cpu_gate;
mod crl;
mod crl_der;
mod crl_expiry;
mod crl_files;
pub mod documents;
pub mod fleet;
mod fleet_apply;
mod fleet_names;
mod force_guard;
mod group_commit;
pub mod inventory;
mod issue;
mod list;
mod local;
pub mod masters;
mod migrate;
mod on_crl;
mod outcome;
mod overrides;
mod own_crl;
mod pending;
mod renew;
mod replay;
mod reserved;
mod revocation_input;
mod revoke;
mod root_crl;
mod root_crl_share;
mod root_revocations;
mod root_revoke;
mod seen;
mod signed;
mod template_use;
mod verify;
mod verify_files;

pub use approve::{carries_attributes, Approval};
pub use list::{normal_fingerprint, ListEntry};
pub use local::{LocalSpec, Presented};
pub use outcome::{IssueOutcome, Stored};
pub use overrides::{enc_json_with_source, Source};
pub use own_crl::{count_own_crl, read_own_crl, read_root_der, NOT_SIGNED_BY_ROOT};
pub use pending::{keep_always, KeepGate};
pub use replay::{claim_once, hold_refused, peek_replay};
pub use reserved::{host_name, names_on_certificate, Holder, ReservedNames};
pub use revocation_input::REASONS;
pub use revoke::ALREADY_REVOKED;
pub use root_crl_share::{take_shared_root_crl, Taken};
pub use root_revocations::{RootRevocation, ROOT_REVOCATIONS};
pub use root_revoke::{RootRevoked, RootTarget, Vouched};
pub use seen::Seen;
pub use template_use::{count_template_use, peek_template_use};
pub use verify::Verified;

use crate::decision;
use crate::error::Error;
use crate::issuance::bootstrap::{self, DataDir};
use crate::issuance::certificate::{self, MasterCa};
use crate::policy::Policy;
use crate::store::group::GroupCommit;
use crate::store::{CertRecord, PendingRequest, ReplayJournal, State, Store, StoreUrl};
use crate::vouching::classification::Classification;
use std::sync::Arc;
use time::OffsetDateTime;

/// A certname given to a command (CLI, API, hook) must pass the certname rules before
/// anything is looked up: it becomes a file name in the store.
fn check_name(certname: &str) -> Result<(), Error> {
    decision::check_certname(certname)
        .map_err(|problem| Error::CertnameInvalid { certname: certname.to_string(), problem })
}

/// The largest refused request kept under `requests/` when no trusted conductor vouched
/// for it (see [`Authority::issue`]).
pub const KEEP_UNVOUCHED_MAX: usize = 16 * 1024;

/// An open CA: its directory, policy, store and master CA.
pub struct Authority {
    pub dir: DataDir,
    pub policy: Policy,
    /// The store: the data directory's files, or an LDAP server shared by several masters.
    pub store: Arc<dyn Store>,
    /// The shared store's replay journal (LDAP); `None` with the file store, whose journal
    /// is the policy's directory ([`Authority::journal`]).
    shared_journal: Option<Arc<dyn ReplayJournal>>,
    ca: MasterCa,
    /// Vouched issuances from concurrent callers (`vouch serve`), stored in batches.
    group: GroupCommit<group_commit::Job, Result<group_commit::Committed, Error>>,
    /// The second (Unix time) of the last [`Authority::maintain`] from [`Authority::issue`].
    maintained: std::sync::atomic::AtomicI64,
    /// The names on the service's and the administrator's certificates: never a node's.
    pub reserved: ReservedNames,
    /// The other master CAs of the fleet sharing the store (their certificates, DER), as last
    /// read and checked ([`masters`]); shared with the TLS layer.
    pub fleet: Arc<masters::Siblings>,
    /// The serials on the CRLs this master serves ([`on_crl`]).
    crl_serials: on_crl::CrlSerials,
    /// The names of the other masters' services, as last read from the store ([`fleet_names`]).
    fleet_names: std::sync::RwLock<ReservedNames>,
    /// The CRLs of the chain (master CA's, then root's), as `vouch serve` hands them out.
    pub crl_document: documents::Cached,
    /// The CA bundle, likewise.
    pub ca_document: documents::Cached,
    /// The audit log's writer (the policy's `audit.log`): chained lines, signed checkpoints.
    audit_log: Option<crate::store::audit::AuditLog>,
    /// The identities of `DIR/ca/root_crl.pem` and `DIR/ca/root_revocations.txt` when the
    /// decisions' copy of them was last read (`None`: never read; `Some((None, _))`: there was
    /// no root CRL): [`Authority::refresh_own_crl`].
    #[allow(clippy::type_complexity)]
    own_crl_seen: std::sync::Mutex<Option<(Option<documents::FileId>, Option<documents::FileId>)>>,
    /// The identities of the root certificate and `DIR/ca/root_crl.pem` when the root CRL last
    /// read as the root's: [`Authority::root_crl_reads`] reads it again only when either changed.
    #[allow(clippy::type_complexity)]
    root_crl_read: std::sync::Mutex<Option<(Option<documents::FileId>, Option<documents::FileId>)>>,
}

/// Reports a failure that must not become a refusal (the certificates exist): a `warning`
/// event in the log (that of `vouch serve`, or what a CLI user sees on stderr), counted
/// as a store error.
fn warn(what: &str, detail: &str) {
    let stage = match what {
        "audit" => crate::obs::metrics::StoreStage::Audit,
        _ => crate::obs::metrics::StoreStage::AfterCommit,
    };
    crate::obs::metrics::METRICS.store_error(stage);
    tracing::warn!(event = "warning", what, detail);
}

/// How [`Authority::open_as`] opens the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// As every command does: a shared store registers this master's CA.
    Joined,
    /// A shared store read without registering this master's CA (nor marking the
    /// directory): `vouch serve`'s refusals, checked before it joins the fleet.
    Unregistered,
    /// The file store even where the directory's master moved to a shared store: the
    /// source of `vouch migrate`.
    MigrateSource,
}

impl Authority {
    /// Opens the CA in `dir` with its `policy.toml`, on the file store.
    pub fn open(dir: &DataDir) -> Result<Self, Error> {
        Self::open_with(dir, &StoreUrl::default())
    }

    /// Opens the CA in `dir` (its keys and policy) on the store `url` names. A shared store
    /// registers this master's CA in it, and marks the directory's file store retired; the
    /// file store of a directory so marked is refused ([`DataDir::refuse_retired_file_store`]).
    pub fn open_with(dir: &DataDir, url: &StoreUrl) -> Result<Self, Error> {
        Self::open_as(dir, url, Opening::Joined)
    }

    /// Opens the CA as `how` says (`vouch serve`'s checks before it joins the fleet,
    /// `vouch migrate`'s copy of a retired file store).
    pub fn open_as(dir: &DataDir, url: &StoreUrl, how: Opening) -> Result<Self, Error> {
        dir.require(bootstrap::CA_CERT)?;
        if url.is_files() && how != Opening::MigrateSource {
            dir.refuse_retired_file_store()?;
        }
        dir.check()?;
        let policy = Policy::load(&dir.policy())?;
        let bootstrap::CertAndKey { cert_der, key } =
            bootstrap::load_cert_and_key(&dir.file(bootstrap::CA_CERT), &dir.file(bootstrap::CA_KEY))?;
        let chain = std::fs::read_to_string(dir.file(bootstrap::CA_BUNDLE)).map_err(|source| Error::Io {
            path: dir.file(bootstrap::CA_BUNDLE),
            op: "read",
            source,
        })?;
        let ca_pem = crate::encoding::pem::encode("CERTIFICATE", &cert_der);
        let register = how != Opening::Unregistered;
        let store = Self::open_store_as(dir, url, how, &policy, &cert_der, &ca_pem)?;
        let shared_journal = if url.is_files() { None } else { crate::store::open_journal(url, None, true)? };
        // The policy's file journal is retired: a hook still pointed at it (run without
        // --store) refuses instead of keeping a one-time use of its own. Not by an
        // unregistered open (a refused `vouch serve` leaves its directory as it was).
        if let (Some(j), Some(dir), true) = (&shared_journal, &policy.replay_journal, register) {
            crate::store::journal::Journal::new(dir).retire(&j.describe()).map_err(|source| Error::Io {
                path: dir.clone(),
                op: "retire the file replay journal in",
                source,
            })?;
        }
        let ca = MasterCa::new(cert_der, key, chain)?;
        let policy_audit_log = policy.audit_log.as_ref().map(crate::store::audit::AuditLog::new);
        let auth = Authority {
            store,
            shared_journal,
            dir: dir.clone(),
            policy,
            ca,
            group: GroupCommit::new(group_commit::MAX_BATCH),
            maintained: std::sync::atomic::AtomicI64::new(i64::MIN),
            reserved: ReservedNames::load(dir),
            fleet: Arc::new(masters::Siblings::default()),
            crl_serials: on_crl::CrlSerials::default(),
            fleet_names: std::sync::RwLock::new(ReservedNames::default()),
            // With a shared store, the other masters' CRLs after this one's and the root's,
            // and the fleet's bundle (every master CA) once it is written.
            crl_document: documents::Cached::new(vec![
                (dir.file("ca_crl.pem"), true),
                (dir.file(bootstrap::ROOT_CRL), false),
                (dir.file(masters::FLEET_CRLS), false),
            ]),
            ca_document: if url.is_files() {
                documents::Cached::new(vec![(dir.file(bootstrap::CA_BUNDLE), true)])
            } else {
                documents::Cached::first_of(vec![dir.file(masters::FLEET_BUNDLE), dir.file(bootstrap::CA_BUNDLE)])
            },
            audit_log: policy_audit_log,
            own_crl_seen: std::sync::Mutex::new(None),
            root_crl_read: std::sync::Mutex::new(None),
        };
        // A shared store: the fleet's root CRL, where it is newer than this directory's (not
        // written by an unregistered open).
        if register && auth.store.shares_root_crl() {
            auth.take_shared_root_crl();
        }
        // The root's CRL in this directory counts in every decision, whatever the policy lists.
        auth.refresh_own_crl();
        Ok(auth)
    }

    /// The store `url` names, opened as `how` says. A shared store that registers this master's
    /// CA marks the directory for it ([`DataDir::mark_shared_store`]); a directory not marked yet
    /// is held meanwhile (its serving lock), and refused while a `vouch serve` (or `vouch
    /// migrate`) holds it: that serve writes its file store, which the mark would retire under
    /// it ([`crate::error::Mistake::SharedStoreBesideServe`]). Nothing is written then.
    fn open_store_as(
        dir: &DataDir,
        url: &StoreUrl,
        how: Opening,
        policy: &Policy,
        cert_der: &[u8],
        ca_pem: &str,
    ) -> Result<Arc<dyn Store>, Error> {
        let register = how != Opening::Unregistered;
        let journal = policy.replay_journal.as_deref();
        let migrate_source = how == Opening::MigrateSource;
        let open = || crate::store::open_store(url, dir.ca(), journal, cert_der, ca_pem, register, migrate_source);
        if !register || url.is_files() {
            return open();
        }
        let join = || -> Result<Arc<dyn Store>, Error> {
            let store = open()?;
            dir.mark_shared_store(&url.url)?;
            Ok(store)
        };
        if dir.shared_store().is_some() {
            return join();
        }
        crate::issuance::serving_lock::while_holding(&dir.dir, join).unwrap_or_else(|(holder, who)| {
            // Marked meanwhile (by a `vouch serve --store` that held the lock): as above.
            if dir.shared_store().is_some() {
                return join();
            }
            Err(Error::Mistake(crate::error::Mistake::SharedStoreBesideServe {
                dir: dir.dir.clone(),
                to: url.url.clone(),
                holder,
                who,
            }))
        })
    }

    /// The command line's open: a wait for the store's lock is told on stderr
    /// ([`Store::announce_lock_waits`]).
    pub fn open_for_cli(dir: &DataDir, url: &StoreUrl) -> Result<Self, Error> {
        Self::open_for_cli_as(dir, url, Opening::Joined)
    }

    /// [`Authority::open_for_cli`], opened as `how` says.
    pub fn open_for_cli_as(dir: &DataDir, url: &StoreUrl, how: Opening) -> Result<Self, Error> {
        let auth = Self::open_as(dir, url, how)?;
        auth.store.announce_lock_waits();
        Ok(auth)
    }

    /// This master CA's id in a shared store ([`crate::store::ca_id`]).
    pub fn ca_id(&self) -> String {
        crate::store::ca_id(&self.ca.cert_der)
    }

    /// This master CA's certificate (DER).
    pub(crate) fn ca_der(&self) -> Vec<u8> {
        self.ca.cert_der.clone()
    }

    /// The PEM chain sent after each certificate: master CA, then root.
    pub fn chain_pem(&self) -> &str {
        &self.ca.chain_pem
    }

    fn audit(&self, value: serde_json::Value) -> Result<(), Error> {
        self.audit_lines(&[value.to_string()])
    }

    fn audit_lines(&self, lines: &[String]) -> Result<(), Error> {
        self.audit_append(lines, false).map(|_| ())
    }

    /// [`Authority::audit_lines`] without waiting for the disk: for the "issued" lines of
    /// certificates whose decisions are already synced (the next synced append makes them
    /// durable).
    fn audit_lines_unsynced(&self, lines: &[String]) -> Result<(), Error> {
        self.audit_write(lines, false, false).map(|_| ())
    }

    /// Appends chained lines to the audit log (and a checkpoint signed with the master CA's
    /// key when one is due, or `checkpoint`): the checkpoint line written, if any.
    fn audit_append(&self, lines: &[String], checkpoint: bool) -> Result<Option<String>, Error> {
        self.audit_write(lines, checkpoint, true)
    }

    fn audit_write(&self, lines: &[String], checkpoint: bool, synced: bool) -> Result<Option<String>, Error> {
        let Some(path) = &self.policy.audit_log else { return Ok(None) };
        // The writer made at open, unless the policy was changed since (a test, a reload).
        let other;
        let log = match &self.audit_log {
            Some(l) if l.path == *path => l,
            _ => {
                other = crate::store::audit::AuditLog::new(path);
                &other
            }
        };
        let sign = |msg: &[u8]| {
            use rcgen::SigningKey;
            self.ca.issuer.key().sign(msg).map_err(|e| e.to_string())
        };
        let now = OffsetDateTime::now_utc();
        let written = if synced {
            log.append(lines, Some(&sign), now, checkpoint)
        } else {
            log.append_unsynced(lines, Some(&sign), now)
        };
        written.map_err(|source| Error::Io { path: log.path.clone(), op: "append to", source })
    }

    /// `vouch audit checkpoint`: a signed checkpoint now (to publish); `None` without an audit log.
    pub fn audit_checkpoint(&self) -> Result<Option<String>, Error> {
        self.audit_append(&[], true)
    }

    /// The master CA's certificate (DER).
    pub fn ca_cert_der(&self) -> &[u8] {
        &self.ca.cert_der
    }

    /// Makes every issuance so far durable in the store's own files (see [`crate::store`]).
    pub fn checkpoint(&self) -> Result<(), Error> {
        // The flush first, without the lock: it writes out whatever the filesystem holds and
        // can take long; the checkpoint's own under the lock then has little left to do.
        self.store.flush_unlocked()?;
        let lock = self.store.lock()?;
        self.store.checkpoint(&lock)?;
        // The "issued" lines written since the last synced append (see `audit_lines_unsynced`).
        if let Some(path) = &self.policy.audit_log {
            let opened = crate::files::durable::open_nofollow(std::fs::OpenOptions::new().read(true), path);
            match opened.and_then(|f| f.sync_data()) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(Error::Io { path: path.clone(), op: "sync", source }),
            }
        }
        Ok(())
    }

    fn audit_raw(&self, line: &str) -> Result<(), Error> {
        self.audit_lines(&[line.to_string()])
    }

    /// The current certificate of `certname`, refused unless it is `certname`'s: its record
    /// names `certname`, and the stored certificate carries that record's serial and
    /// `certname` as its CN. A damaged or tampered store (one node's certificate stored
    /// under another's name) is an error here, so that nothing (revoke, clean, renew, a
    /// supersede) acts on another node's certificate or key in this certname's name.
    pub(crate) fn current_checked(&self, certname: &str) -> Result<Option<crate::store::Current>, Error> {
        self.checked(certname, self.store.current(certname)?)
    }

    /// [`Authority::current_checked`] of a certificate already read (`current`).
    pub(crate) fn checked(
        &self,
        certname: &str,
        current: Option<crate::store::Current>,
    ) -> Result<Option<crate::store::Current>, Error> {
        let Some(current) = current else { return Ok(None) };
        let damaged = |what: String| Error::StoreDamaged { certname: certname.to_string(), what };
        if current.record.certname != certname {
            return Err(damaged(format!(
                "its record is {}'s, serial {}",
                current.record.certname, current.record.serial
            )));
        }
        let (_, der) = crate::encoding::pem::find(current.pem.as_bytes(), &["CERTIFICATE"])
            .map_err(|e| damaged(format!("not a certificate: {e}")))?;
        let (_, cert) =
            x509_parser::parse_x509_certificate(&der).map_err(|e| damaged(format!("not a certificate: {e}")))?;
        let serial = crate::encoding::hex(cert.raw_serial());
        if serial != current.record.serial {
            return Err(damaged(format!("it is serial {serial}, its record {}", current.record.serial)));
        }
        let cn = cert.subject().iter_common_name().next().and_then(|c| c.as_str().ok());
        if cn != Some(certname) {
            return Err(damaged(format!("its CN is {cn:?}")));
        }
        Ok(Some(current))
    }

    /// Checks a certificate chains to this CA (master, then root), or with a shared store to
    /// another master CA under the same root, and is valid at `now`.
    pub fn verify_ours(&self, der: &[u8], now: OffsetDateTime) -> Result<(), Error> {
        let known = self.fleet.get();
        match self.verify_with(der, now, &known) {
            Err(Error::NotValid { .. }) if !self.store.batches() => {
                // A master that joined since: read them again (one search), then decide. Only
                // the master CAs this fleet's root signed count ([`masters::fleet_masters`]).
                let root = own_crl::read_root_der(&self.dir)
                    .map_err(|detail| Error::Cert { path: self.dir.file(bootstrap::ROOT_CERT), detail })?;
                let root_crl = self.policy.trust.own_crl.get();
                let (fresh, _) =
                    masters::fleet_masters(&root, &self.ca.cert_der, self.store.issuers()?, root_crl.as_deref());
                self.fleet.set(fresh.clone());
                self.verify_with(der, now, &fresh)
            }
            r => r,
        }
    }

    fn verify_with(&self, der: &[u8], now: OffsetDateTime, siblings: &[Vec<u8>]) -> Result<(), Error> {
        let root = std::fs::read(self.dir.file(bootstrap::ROOT_CERT)).map_err(|source| Error::Io {
            path: self.dir.file(bootstrap::ROOT_CERT),
            op: "read",
            source,
        })?;
        let (_, root_der) =
            crate::encoding::pem::find(&root, &["CERTIFICATE"]).map_err(|e| Error::Store { detail: e.to_string() })?;
        let root_cd = rustls_pki_types::CertificateDer::from(root_der.as_slice());
        let anchor =
            webpki::anchor_from_trusted_cert(&root_cd).map_err(|e| Error::Store { detail: format!("{e:?}") })?;
        let inter: Vec<rustls_pki_types::CertificateDer<'_>> = std::iter::once(self.ca.cert_der.as_slice())
            .chain(siblings.iter().map(Vec::as_slice))
            .map(rustls_pki_types::CertificateDer::from)
            .collect();
        let ee_cd = rustls_pki_types::CertificateDer::from(der);
        let ee = webpki::EndEntityCert::try_from(&ee_cd).map_err(|e| Error::Store { detail: format!("{e:?}") })?;
        let secs = u64::try_from(now.unix_timestamp()).unwrap_or(0);
        ee.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &[anchor],
            &inter,
            rustls_pki_types::UnixTime::since_unix_epoch(std::time::Duration::from_secs(secs)),
            webpki::KeyUsage::client_auth(),
            None,
            None,
        )
        .map(|_| ())
        .map_err(|e| Error::NotValid { certname: String::new(), detail: why_not_valid(&e) })
    }

    /// `vouch enc CERTNAME`: the classification from the node's current certificate.
    pub fn enc(&self, certname: &str, now: OffsetDateTime) -> Result<Classification, Error> {
        check_name(certname)?;
        // The name's own certificate only: never another node's classification under its name.
        let crate::store::Current { record: rec, pem, .. } =
            self.current_checked(certname)?.ok_or_else(|| Error::NotFound { certname: certname.to_string() })?;
        if rec.state != State::Issued {
            return Err(Error::NotValid {
                certname: certname.to_string(),
                detail: "its certificate is revoked".into(),
            });
        }
        let (_, der) = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"])
            .map_err(|e| Error::Store { detail: e.to_string() })?;
        self.verify_ours(&der, now).map_err(|e| match e {
            Error::NotValid { detail, .. } => Error::NotValid { certname: certname.to_string(), detail },
            other => other,
        })?;
        classification_from_cert(&der, &self.policy.mirror_oid, self.policy.classification_max_bytes, certname)
    }
}

/// The classification a certificate carries, validated, for `vouch enc`.
pub fn classification_from_cert(
    der: &[u8],
    mirror_oid: &[u64],
    max: usize,
    name: &str,
) -> Result<Classification, Error> {
    let b64 = certificate::classification_of(der, mirror_oid)
        .map_err(|detail| Error::NotValid { certname: name.to_string(), detail })?
        .ok_or_else(|| Error::NotValid {
            certname: name.to_string(),
            detail: "its certificate carries no classification".into(),
        })?;
    Classification::from_base64(&b64, max).map_err(|e| Error::NotValid {
        certname: name.to_string(),
        detail: format!("its classification is unusable: {e}"),
    })
}

impl Authority {
    /// One pending request, its reasons and CSR PEM.
    pub fn request(&self, certname: &str) -> Result<Option<(PendingRequest, Vec<u8>)>, Error> {
        Ok(self.store.request(certname)?)
    }

    /// The state of a serial in the store.
    pub fn store_record(&self, serial: &str) -> Result<Option<State>, Error> {
        Ok(self.store.record(serial)?.map(|r| r.state))
    }

    /// The certname's current certificate record and PEM.
    pub fn certificate(&self, certname: &str) -> Result<Option<(CertRecord, String)>, Error> {
        Ok(self.store.current(certname)?.map(|c| (c.record, c.pem)))
    }

    /// Removes the file replay journal's expired buckets for about `budget` at most,
    /// without the store's lock (no claim goes into them). `None`: no file journal.
    pub fn prune_journal(
        &self,
        now: OffsetDateTime,
        budget: std::time::Duration,
    ) -> Result<Option<crate::store::journal::Pruned>, Error> {
        let Some(dir) = self.policy.replay_journal.as_ref().filter(|_| self.shared_journal.is_none()) else {
            return Ok(None);
        };
        crate::store::journal::Journal::new(dir).prune_within(now, budget).map(Some).map_err(|source| Error::Io {
            path: dir.clone(),
            op: "prune",
            source,
        })
    }

    /// The replay journal: the shared store's, else the policy's directory. `synced`: each
    /// entry fsynced (holds, checks); the CA's own claims at issuance are not (the file
    /// store's write-ahead log names each claim and is synced before anyone is answered).
    pub fn journal(&self, synced: bool) -> Option<Arc<dyn ReplayJournal>> {
        if let Some(j) = &self.shared_journal {
            return Some(j.clone());
        }
        self.policy.replay_journal.as_ref().map(|dir| {
            let j = if synced {
                crate::store::journal::Journal::new(dir)
            } else {
                crate::store::journal::Journal::unsynced(dir)
            };
            Arc::new(j) as Arc<dyn ReplayJournal>
        })
    }
}

/// Why a certificate does not verify against this CA, in words (webpki's Debug form prints
/// times as seconds and, for an extended key usage, another OID than the one carried).
fn why_not_valid(e: &webpki::Error) -> String {
    let at = |t: &rustls_pki_types::UnixTime| {
        OffsetDateTime::from_unix_timestamp(i64::try_from(t.as_secs()).unwrap_or(i64::MAX))
            .map(crate::encoding::time::format_rfc3339)
            .unwrap_or_default()
    };
    let why: String = match e {
        webpki::Error::CertExpired { not_after, .. } => format!("it expired at {}", at(not_after)),
        webpki::Error::CertNotValidYet { not_before, .. } => format!("it is not valid before {}", at(not_before)),
        webpki::Error::UnknownIssuer => "this CA (or the fleet's root) did not issue it".into(),
        webpki::Error::InvalidSignatureForPublicKey => {
            "its signature does not verify with this CA's key: another CA of the same name issued it".into()
        }
        webpki::Error::RequiredEkuNotFoundContext(_) => {
            "it is not a client certificate (no clientAuth extended key usage: a conductor's or another \
             CA's certificate, not a node's)"
                .into()
        }
        other => format!("{other:?}"),
    };
    format!("it does not verify against this CA: {why}")
}
