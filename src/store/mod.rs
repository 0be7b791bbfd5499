//! The CA store behind a narrow trait, and its embedded default: local files.
//!
//! File layout under `DIR/ca/` (after Puppet's cadir):
//!
//! ```text
//! signed/<certname>.pem      the current certificate of each certname
//! requests/<certname>.pem    pending (refused) requests, with <certname>.json: the reasons
//! serials/<ab>/<serial>.json one record per serial ever issued (a serial is used once: checked under the lock)
//! inventory.txt              Puppet's inventory: "0x<serial> <notBefore> <notAfter> /CN=<certname>"
//! revocations.txt            "<serial> <time> <reason> <certname> [cleaned]", one line per revocation
//! pending/                   redo journal: one marker per operation in flight
//! tmp/                       staging for atomic writes (emptied by recovery)
//! ca_crl.pem, crl_number     the CRL and its counter
//! .lock                      flock: one writer at a time, across processes; holds the
//!                            mark of the process that took it last (see below)
//! wal.log                    write-ahead log of issuances since the last checkpoint
//! ```
//!
//! **Issuance** is a group commit: a batch of signed certificates is appended
//! to `wal.log` in one write, closed by a commit line (entry count, SHA-256), and
//! made durable with one `fdatasync`; only then
//! are the files above written (records, `signed/`, inventory, the replay
//! journal's entries) without fsync: a new file is made nameless (O_TMPFILE) and
//! linked under its name, so it appears whole or not at all; a file that exists is
//! replaced (temporary file, rename); the inventory gets the batch's lines in one
//! write; the replay journal's entry, claimed under the lock a moment before, is
//! marked spent in place (a reader that meets it half-written takes it as spent).
//! A *checkpoint* (`syncfs`, then a fresh `wal.log` whose header records the
//! inventory's length) makes those files durable on their own; it runs when the
//! log passes 8 MiB, before any revocation, and when `vouch serve` is idle. The
//! size-triggered one flushes without the lock (the log's and the inventory's
//! lengths noted when the log passed the size), then, under the lock, starts the log
//! over with the batches logged since, unless the log changed otherwise meanwhile
//! ([`Store::checkpoint_unlocked`]); the others flush once without the lock first
//! ([`Store::flush_unlocked`]).
//! Recovery: a process trusts the files only for log entries it applied itself;
//! whoever takes the lock and finds a log it did not write (a killed process's,
//! or one from before a power loss) truncates the inventory to the header's
//! length (writing back the whole lines after it that the log does not hold and
//! whose serial has a record: an import's), re-applies every entry in order (each
//! step is idempotent) and checkpoints. A torn last batch was never acknowledged and is dropped.
//!
//! **Memory**: the process that stored a certificate answers `GET certificate` for it
//! from memory, as long as `.lock` still holds the mark (16 random bytes) it wrote when
//! it took the lock: every lock holder writes its own mark before it changes anything,
//! so a process that finds another's mark forgets everything it remembered. A
//! revocation forgets its certname; a replayed log, a redo or a purge forgets all.
//!
//! **Revocation** (rare) keeps the per-operation protocol: every write atomic
//! and synced (temporary file, fsync, rename or link, fsync the directory); the
//! operation first writes its marker under `pending/`, then its steps, each
//! idempotent, then removes the marker; whoever takes the lock next redoes
//! what a killed process left. It checkpoints first, so no entry written before a
//! revocation is ever replayed after it.

pub mod admin_lock;
pub mod audit;
mod file;
pub(crate) use file::holder_of_file;
mod error;
pub mod group;
pub mod journal;
pub mod junk;
pub mod ldap;
mod open;
mod records;
mod retired;
pub mod templates;
pub mod verify;

#[cfg(feature = "fault-injection")]
pub(crate) use crate::files::fault::fail_point;
pub(crate) use crate::files::fault::{crash_point, pause_point};
pub use error::StoreError;
pub use file::{FileStore, WAL};
pub use open::{open_journal, open_store, parse_ldap_url, LdapUrl, StoreUrl};
pub use records::{
    CertRecord, Current, Expected, InventoryEntry, Issuance, IssuanceView, Junk, Listed, Override, PendingRequest,
    Published, Revocation, SpentClaim, State, Supersede, Tombstone,
};
pub use retired::{retired_to, RETIRED_MARKER};

use std::fs::File;
use std::ops::ControlFlow;
use std::path::PathBuf;

/// The conflict of an override change that expected revision `expected` and met `have`.
pub(crate) fn override_conflict(certname: &str, expected: u64, have: u64) -> StoreError {
    let why = if expected > have {
        format!("revision {expected} was never reached")
    } else {
        "changed by someone else meanwhile".to_string()
    };
    StoreError::Conflict { what: format!("the override of {certname} is at revision {have}, not {expected}: {why}") }
}

/// The name of a replay key's claim in a shared store: SHA-256 of the key, lowercase hex.
pub fn claim_digest(key: &str) -> String {
    crate::encoding::sha256_hex(key.as_bytes())
}

/// A master CA's id in a shared store: the first 16 bytes of the SHA-256 of its
/// certificate, lowercase hex.
pub fn ca_id(ca_cert_der: &[u8]) -> String {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, ca_cert_der);
    crate::encoding::hex(d.as_ref().get(..16).unwrap_or_default())
}

/// Proof that the caller holds the store's write lock (the file store's flock); a shared
/// store takes none and orders writers by compare-and-swap instead.
pub struct WriteLock {
    _file: Option<File>,
}

impl WriteLock {
    /// The "lock" of a store whose writes are each atomic and guarded (LDAP).
    pub fn shared() -> Self {
        WriteLock { _file: None }
    }
}

/// Which replay-journal use a claim is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimUse {
    /// The CA's: the same key may claim again until a certificate is stored for the claim.
    Reusable,
    /// The hook's: spent at once (Puppet Server signs on the answer).
    Once,
}

/// One-time use of vouched attributes, shared by every process that decides for a fleet:
/// the file journal ([`journal::Journal`]) or the LDAP store.
pub trait ReplayJournal: Send + Sync {
    /// Records the use of `key` by `holder` for `certname` (see [`journal::Journal::claim`]);
    /// `serial`: the certificate the CA is about to store for it (a shared store uses it to
    /// tell a claim whose certificate was never stored, which the same key may claim again).
    #[allow(clippy::too_many_arguments)]
    fn claim(
        &self,
        key: &crate::vouching::replay_key::ReplayKey,
        expiry: time::OffsetDateTime,
        certname: &str,
        holder: &str,
        usage: ClaimUse,
        serial: Option<&str>,
        now: time::OffsetDateTime,
    ) -> Result<journal::Claim, StoreError>;
    /// Makes the attributes of a refused request this key's (see [`journal::Journal::hold`]).
    fn hold(
        &self,
        key: &crate::vouching::replay_key::ReplayKey,
        expiry: time::OffsetDateTime,
        certname: &str,
        holder: &str,
        now: time::OffsetDateTime,
    ) -> Result<journal::Claim, StoreError>;
    /// What a claim would meet, writing nothing (`vouch check`).
    fn peek(
        &self,
        key: &crate::vouching::replay_key::ReplayKey,
        expiry: time::OffsetDateTime,
        certname: &str,
        holder: &str,
    ) -> Result<journal::Claim, StoreError>;
    /// Counts one instance's use of a template (signature version 3), fleet-wide, by
    /// compare-and-swap ([`templates`]).
    fn count_use(&self, u: &templates::TemplateUse) -> Result<templates::Counted, StoreError>;
    /// What [`ReplayJournal::count_use`] would meet, writing nothing (`vouch check`).
    fn peek_use(&self, u: &templates::TemplateUse) -> Result<templates::Counted, StoreError>;
    /// Where the journal is, for messages.
    fn describe(&self) -> String;
}

/// [`Store::for_each_listed`] with a callback that may fail (with any error a store error
/// converts into): the first error stops the walk and is returned.
pub fn each_until_error<S: Store + ?Sized, E: From<StoreError> + Send>(
    store: &S,
    mut f: impl FnMut(Listed) -> Result<(), E> + Send,
) -> Result<(), E> {
    let mut failed = None;
    store.for_each_listed(&mut |l| match f(l) {
        Ok(()) => ControlFlow::Continue(()),
        Err(e) => {
            failed = Some(e);
            ControlFlow::Break(())
        }
    })?;
    failed.map_or(Ok(()), Err)
}

/// The operations vouch needs from a CA store: the file store (one host, or a shared POSIX
/// filesystem) and the LDAP store (several masters) implement it.
/// Mutations take a [`WriteLock`]: one writer at a time for the file store; the LDAP store
/// guards each write with the LDAP server's own atomicity (an add fails if the entry exists,
/// a modify carries an assertion), and reports [`StoreError::Conflict`] when it loses a race.
pub trait Store: Send + Sync {
    /// Takes the write lock (blocking) and finishes any operation a killed process left.
    fn lock(&self) -> Result<WriteLock, StoreError>;
    /// Asks [`Store::lock`] to say on stderr when it keeps this process waiting (the command
    /// line's commands, which would otherwise seem to hang; never `vouch serve`, whose
    /// requests wait their turn quietly). A store whose lock never waits on another
    /// process ignores it.
    fn announce_lock_waits(&self) {}
    /// The fleet's lock on revocations of valid administrator certificates ([`admin_lock`]),
    /// taken before the last-administrator guard counts and held until the revocation it
    /// allows is written (given back when the hold is dropped); waits a bounded time for
    /// another holder, then fails closed ([`StoreError::AdminRevocationBusy`]). `None`: the
    /// store needs none (the file store: its write lock, which the caller holds, already keeps
    /// the count and the revocation together).
    fn hold_admin_revocations(&self, lock: &WriteLock) -> Result<Option<Box<dyn admin_lock::Hold + '_>>, StoreError> {
        let _ = lock;
        Ok(None)
    }
    /// Whether concurrent issuances should be stored in batches (one synchronous write for
    /// many: the file store); otherwise each request stores its own.
    fn batches(&self) -> bool;
    /// The current certificate of `certname`, with its record and its entry's revision.
    fn current(&self, certname: &str) -> Result<Option<Current>, StoreError>;
    /// The current certificate of `certname` if this process holds it in memory and still
    /// knows it to be current, without waiting on any I/O but one read of a local file (the
    /// file store: what it stored lately; see its `memory` module); `None`: ask [`Store::current`].
    fn remembered_current(&self, certname: &str) -> Option<Current> {
        let _ = certname;
        None
    }
    /// [`Store::for_each_listed`]'s walk, each listed certname handed to `f` with a read of
    /// its current certificate that `f` may make or skip (as [`Store::current`] answers the
    /// listed certname), until `f` breaks. A store that reads the walk and the certificates
    /// together (the LDAP store: one paged search, entries whole) answers the reads from it.
    fn for_each_current(
        &self,
        f: &mut (dyn FnMut(Listed, &CurrentRead) -> ControlFlow<()> + Send),
    ) -> Result<(), StoreError> {
        self.for_each_listed(&mut |l| {
            let name = l.certname.clone();
            f(l, &|| self.current(&name))
        })
    }
    /// A serial's record.
    fn record(&self, serial: &str) -> Result<Option<CertRecord>, StoreError>;
    /// What issuance reads of `certname` before storing a certificate `serial` for it: its
    /// current certificate ([`Store::current`]), and whether `serial` was ever used
    /// ([`Store::record`]); a store that can tells in the same read whether a request is
    /// pending under the name (the LDAP store: one search for all three).
    fn issuance_view(&self, certname: &str, serial: Option<&str>) -> Result<IssuanceView, StoreError> {
        let current = self.current(certname)?;
        let serial = match serial {
            Some(s) => Some((s.to_string(), self.record(s)?.is_some())),
            None => None,
        };
        Ok(IssuanceView { current, request: None, serial })
    }
    /// Whether every issuance write compares the certname's entry with what admission read
    /// (a compare-and-swap: the LDAP store), so that an [`IssuanceView`] read before the
    /// write lock is as good as one read under it: a change in between makes the write fail
    /// with [`StoreError::Conflict`], storing nothing, and the issuance is admitted again on
    /// a fresh reading. False for the file store, whose lock orders its writers and whose
    /// admission reads under it.
    fn writes_compare(&self) -> bool {
        false
    }
    /// Stores a batch of signed certificates, each becoming its certname's current one.
    /// Ok: all of them are durable. [`StoreError::AfterCommit`]: all of them are durable
    /// too, but a later step failed. Any other error: none was stored. Fails with
    /// [`StoreError::SerialTaken`], storing nothing, if a serial was ever used.
    fn issue(&self, lock: &WriteLock, batch: &[Issuance]) -> Result<(), StoreError>;
    /// Makes everything stored so far durable in the store's own layout (the file
    /// store: flushes its write-ahead log into its files).
    fn checkpoint(&self, lock: &WriteLock) -> Result<(), StoreError>;
    /// What the store put off until no lock is held: the file store's checkpoint once its
    /// log has passed its size (the flush, which can take long, runs without the lock).
    /// Called after an issuance by whoever made it, once the lock is released; nothing to do
    /// most of the time, and never required for correctness (only for the log's size).
    fn checkpoint_unlocked(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Writes out, without the lock, what a [`Store::checkpoint`] would otherwise wait for
    /// under it (the file store: `syncfs` when its log holds entries), so that the
    /// checkpoint right after holds the lock briefly. Never required for correctness.
    fn flush_unlocked(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Revokes a serial; `cleaned` also forgets the certname's current certificate.
    /// `rec`: the serial's record as read (its issuer names where the revocation goes in a
    /// shared store); `expected`: the certname's entry as read, when this is its current one.
    fn revoke(
        &self,
        lock: &WriteLock,
        rev: &Revocation,
        rec: &CertRecord,
        expected: Option<&Expected>,
    ) -> Result<(), StoreError>;
    /// The revocations of this CA's serials (what its CRL lists), oldest first.
    fn revocations(&self) -> Result<Vec<Revocation>, StoreError>;
    /// The certificate (PEM) a revocation of this CA's serial `serial` keeps beside it, where
    /// the store keeps one (the LDAP store, for a certificate revoked while it was its
    /// certname's current one): unchecked, whoever reads it checks its signature. `None`
    /// by default (the file store keeps none).
    fn revoked_certificate(&self, serial: &str) -> Result<Option<String>, StoreError> {
        let _ = serial;
        Ok(None)
    }
    /// Whether every revocation this store records keeps its certificate
    /// ([`Store::revoked_certificate`]), because its writers need not hold the CA key (the
    /// shared LDAP store): a revoked serial then leaves the CRL only when its certificate,
    /// signed by this CA, says it expired, never by the store's word alone. False by default
    /// (the file store: whoever may write its data directory may read the CA key there).
    fn keeps_revoked_certificates(&self) -> bool {
        false
    }
    /// A value that changes whenever [`Store::revocations`] does (the CRL is due then).
    fn revocations_stamp(&self) -> Result<String, StoreError>;
    /// All issued certificates, oldest first.
    fn inventory(&self) -> Result<Vec<InventoryEntry>, StoreError>;
    /// Hands `f` each certname's current certificate (unless cleaned: a cleaned certname has
    /// none), one at a time as the store reads it, until `f` answers
    /// [`ControlFlow::Break`]. In the store's own order, not sorted (sorting a fleet
    /// would hold it in memory): the file store's is its inventory's (by issuance, oldest
    /// first), the LDAP store's the server's. Memory does not grow with the store (the
    /// file store: two fixed-size filters and one line; the LDAP store: one page);
    /// nothing is locked, so a certificate issued or revoked meanwhile may or may not be
    /// seen.
    fn for_each_listed(&self, f: &mut (dyn FnMut(Listed) -> ControlFlow<()> + Send)) -> Result<(), StoreError>;
    /// [`Store::for_each_listed`] for a caller whose every step may fail (`vouch reconcile`):
    /// the first error stops the walk and is returned.
    fn each_listed(&self, f: &mut (dyn FnMut(Listed) -> Result<(), StoreError> + Send)) -> Result<(), StoreError> {
        each_until_error(self, f)
    }
    /// Every entry with no usable name ([`Junk`]), handed to `f` (none by default: a store
    /// whose entries are named by their certname alone has none).
    fn junk(&self, f: &mut dyn FnMut(Junk) -> Result<(), StoreError>) -> Result<(), StoreError> {
        let _ = f;
        Ok(())
    }
    /// Removes a junk entry (as [`Store::junk`] just listed it).
    fn purge(&self, lock: &WriteLock, junk: &Junk) -> Result<(), StoreError> {
        let _ = (lock, junk);
        Err(StoreError::Corrupt { path: PathBuf::from(self.describe()), detail: "this store lists no junk".into() })
    }
    /// The tombstones of cleaned certnames whose certificate expired before `before`
    /// (a CRL period before now: off every CRL), each removed when `lock` is given (a dry
    /// run without). `now`: when a purge another process left unfinished may be taken over.
    /// None by default (a store that forgets a cleaned certname keeps no tombstone).
    fn purge_tombstones(
        &self,
        lock: Option<&WriteLock>,
        before: time::OffsetDateTime,
        now: time::OffsetDateTime,
    ) -> Result<Vec<Tombstone>, StoreError> {
        let _ = (lock, before, now);
        Ok(Vec::new())
    }
    /// The administrator's classification for `certname`, if any was ever set.
    fn get_override(&self, certname: &str) -> Result<Option<Override>, StoreError>;
    /// Sets (`Some`) or clears (`None`) the override; with `expect`, only if the revision is
    /// still that ([`StoreError::Conflict`] otherwise; 0: none was ever set). Returns the new state.
    fn put_override(
        &self,
        certname: &str,
        classification: Option<&str>,
        expect: Option<u64>,
        now: time::OffsetDateTime,
    ) -> Result<Override, StoreError>;
    /// Keeps a refused request for the operator to see (under the lock: its CSR and its
    /// reasons are two files, written by one writer at a time).
    fn put_request(&self, lock: &WriteLock, req: &PendingRequest, csr_pem: &[u8]) -> Result<(), StoreError>;
    fn remove_request(&self, certname: &str) -> Result<(), StoreError>;
    /// [`Store::remove_request`] for each of `certnames` (a batch just issued), each failure
    /// reported and the others still removed; the file store opens its directory once.
    fn remove_requests(&self, certnames: &[&str]) -> Vec<Result<(), StoreError>> {
        certnames.iter().map(|c| self.remove_request(c)).collect()
    }
    fn requests(&self) -> Result<Vec<PendingRequest>, StoreError>;
    /// How many pending requests the store keeps, counted up to `at_most` at least.
    fn count_requests(&self, at_most: usize) -> Result<usize, StoreError> {
        let _ = at_most;
        Ok(self.requests()?.len())
    }
    /// One pending request with its CSR (PEM), if there is one.
    fn request(&self, certname: &str) -> Result<Option<(PendingRequest, Vec<u8>)>, StoreError>;
    /// The certificates (DER) of every master CA sharing the store (none for the file store):
    /// a node of one master is verified at another.
    fn issuers(&self) -> Result<Vec<Vec<u8>>, StoreError>;
    /// Whether the store is shared by several masters, so that the root CRL travels through
    /// it ([`Store::shared_root_crl`], [`Store::publish_root_crl`]). The file store is not.
    fn shares_root_crl(&self) -> bool {
        false
    }
    /// The root CRL (DER) published in the shared store, unchecked: whoever takes it verifies
    /// it against its own root certificate. `None`: none was published, or the store is not
    /// shared.
    fn shared_root_crl(&self) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(None)
    }
    /// Publishes the root CRL `der` in the shared store, in place of the one there only if
    /// `replaces` says so of it (its CRL number is lower): a compare-and-swap, retried a few
    /// times when another master changed it meanwhile ([`StoreError::Conflict`] after that).
    /// The file store, not shared, publishes nothing.
    fn publish_root_crl(&self, der: &[u8], replaces: &dyn Fn(&[u8]) -> bool) -> Result<Published, StoreError> {
        let _ = (der, replaces);
        Ok(Published::NotShared)
    }
    /// The CRL (DER) the master CA `ca_id` ([`ca_id`]) last published in the shared store,
    /// unchecked: whoever takes it verifies it against that master CA's certificate. `None`:
    /// none was published, or the store is not shared.
    fn master_crl(&self, ca_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let _ = ca_id;
        Ok(None)
    }
    /// The revision of master CA `ca_id`'s CRL entry (every publication changes it), read
    /// without the CRL: whether to read the CRL again. `None`: no entry, or not shared.
    fn master_crl_revision(&self, ca_id: &str) -> Result<Option<u64>, StoreError> {
        let _ = ca_id;
        Ok(None)
    }
    /// Publishes master CA `ca_id`'s CRL `der` in the shared store, in place of the one there
    /// only if `replaces` says so of it, as [`Store::publish_root_crl`] does. The file store
    /// publishes nothing.
    fn publish_master_crl(
        &self,
        ca_id: &str,
        der: &[u8],
        replaces: &dyn Fn(&[u8]) -> bool,
    ) -> Result<Published, StoreError> {
        let _ = (ca_id, der, replaces);
        Ok(Published::NotShared)
    }
    /// Registers this master's CA (PEM) in the shared store again where its entry is gone
    /// (removed while the master runs): whether it was added. The file store: nothing.
    fn register_ca(&self, ca_cert_pem: &str) -> Result<bool, StoreError> {
        let _ = ca_cert_pem;
        Ok(false)
    }
    /// Publishes the certificate (DER) the service of master CA `ca_id` presents, in place
    /// of the one published before: every master reserves its names. The file store: nothing.
    fn publish_service_certificate(&self, ca_id: &str, der: &[u8]) -> Result<Published, StoreError> {
        let _ = (ca_id, der);
        Ok(Published::NotShared)
    }
    /// The service certificates the masters of `ca_ids` published: (master CA id, DER),
    /// unchecked.
    fn service_certificates(&self, ca_ids: &[String]) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let _ = ca_ids;
        Ok(Vec::new())
    }
    /// Whether the store holds nothing that only taking its lock settles (the file store:
    /// its log verifies to its end and is applied; a log with a damaged, unfinished or
    /// unapplied batch is replayed, cut or refused by the next lock holder). `vouch store verify` reads a store that is
    /// not settled only with the lock held.
    fn settled_unlocked(&self) -> bool {
        true
    }
    /// Checks what the trait's reads cannot see of the store's own layout (`vouch store
    /// verify`), handing each inconsistency to `f` (the file store: its operation markers,
    /// records, inventory lines, junk; nothing by default). `now`: which certificates are
    /// unexpired. Reads only. `lock`: held (a settled store), or `None` for a first reading
    /// beside writers, which may meet what a writer is doing (an operation marker, a line
    /// being appended) as a finding: the caller then checks again with the lock held.
    fn check_layout(
        &self,
        lock: Option<&WriteLock>,
        now: time::OffsetDateTime,
        f: &mut dyn FnMut(verify::Finding),
    ) -> Result<(), StoreError> {
        let _ = (lock, now, f);
        Ok(())
    }
    /// Where the store is, for messages.
    fn describe(&self) -> String;
}

/// A read of one listed certname's current certificate, made only if wanted
/// ([`Store::for_each_current`]).
pub type CurrentRead<'a> = dyn Fn() -> Result<Option<Current>, StoreError> + 'a;
