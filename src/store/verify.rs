//! What `vouch store verify` can find wrong in a CA store: one variant per kind of
//! inconsistency, each with a message and a hint. The checks that need only the [`super::Store`]
//! trait are in [`crate::authority`]; a store checks its own layout with
//! [`super::Store::check_layout`].

use serde::Serialize;
use vouch_derive::{Hint, Message};

/// One inconsistency in the store: its message (`Display`) and hint stated beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Message, Hint)]
#[serde(tag = "finding", rename_all = "kebab-case")]
pub enum Finding {
    /// A certname's current certificate cannot be read (no record for its serial, not a
    /// certificate, a damaged entry).
    #[message = "{certname}: its current certificate cannot be read: {detail}"]
    #[hint(with = current_unreadable_hint(detail))]
    CurrentUnreadable { certname: String, detail: String },
    /// A certname the store lists (its inventory, its entry) has no current certificate to read.
    #[message = "{certname}: listed with certificate {serial}, but the store has no current certificate for it"]
    #[hint(with = RESTORE_CURRENT)]
    CurrentMissing { certname: String, serial: String },
    /// The listing names another serial than the certname's current certificate's.
    #[message = "{certname}: listed with certificate {listed}, but its current certificate is {current}"]
    #[hint(with = NOT_NEWEST)]
    ListedNotCurrent { certname: String, listed: String, current: String },
    /// An issued, unexpired certificate that is not its certname's current one (the
    /// certname's file holds another, or none).
    #[message = "{certname}: certificate {serial} is issued and unexpired, but the certname's file holds {file}"]
    #[hint(with = NOT_NEWEST)]
    IssuedNotCurrent { certname: String, serial: String, file: String },
    /// The current certificate's PEM is not one whole X.509 certificate.
    #[message = "{certname}: its current certificate is not a whole certificate: {detail}"]
    #[hint(with = RESTORE_ALL)]
    CertificateDamaged { certname: String, detail: String },
    /// The certificate's serial is not its record's.
    #[message = "{certname}: the certificate's serial is {certificate}, its record's {record}"]
    #[hint(with = RESTORE_ALL)]
    SerialMismatch { certname: String, certificate: String, record: String },
    /// The certificate's CN, or its record's certname, is not the certname it is stored under.
    #[message = "{certname}: stored under this name, the certificate names {certificate:?} and its record {record:?}"]
    #[hint(with = ANOTHER_NODES)]
    NameMismatch { certname: String, certificate: String, record: String },
    /// The certificate's signature does not verify with the key of any master CA of the store.
    #[message = "{certname}: certificate {serial} is not signed by a master CA of this store: {detail}"]
    #[hint(with = NOT_OURS)]
    NotSignedByCa { certname: String, serial: String, detail: String },
    /// The record's notAfter is not the certificate's.
    #[message = "{certname}: certificate {serial} expires {certificate}, its record says {record}"]
    #[hint(with = RESTORE_ALL)]
    NotAfterMismatch { certname: String, serial: String, certificate: String, record: String },
    /// A current certificate whose record is neither issued nor revoked, or whose listing
    /// disagrees with its record.
    #[message = "{certname}: serial {serial}: {detail}"]
    #[hint(with = RESTORE_ALL)]
    StateMismatch { certname: String, serial: String, detail: String },
    /// Two certnames' current certificates carry one serial.
    #[message("serial {serial} is the current certificate of {}", certnames.join(" and "))]
    #[hint(with = ANOTHER_NODES)]
    SerialTwice { serial: String, certnames: Vec<String> },
    /// A serial twice in the inventory.
    #[message = "serial {serial} is in the inventory twice"]
    #[hint(with = INVENTORY_CHANGED)]
    InventorySerialTwice { serial: String },
    /// An inventory line whose serial has no record.
    #[message = "the inventory lists serial {serial} ({certname}), which has no record"]
    #[hint(with = INVENTORY_CHANGED)]
    InventoryWithoutRecord { serial: String, certname: String },
    /// An inventory line that its serial's record contradicts.
    #[message = "the inventory's line for serial {serial}: {detail}"]
    #[hint(with = inventory_disagrees_hint(detail))]
    InventoryDisagrees { serial: String, detail: String },
    /// A current certificate the inventory does not list.
    #[message = "{certname}: its current certificate {serial} is not in the inventory"]
    #[hint(with = INVENTORY_CHANGED)]
    NotInInventory { certname: String, serial: String },
    /// A revoked certificate that no revocation lists: the CRL would not name it.
    #[message = "{certname}: certificate {serial} is revoked in its record, but no revocation lists it"]
    #[hint = "`vouch revoke --serial SERIAL` records the revocation again (its first time and \
              reason): until then the next CRL leaves the certificate out"]
    RevokedNotRecorded { certname: String, serial: String },
    /// A revocation that disagrees with its serial's record (its notAfter).
    #[message = "revocation of serial {serial}: {detail}"]
    #[hint = "restore revocations.txt from a backup of DIR/ca, then `vouch crl`: until then the \
              CRL may drop a revoked certificate early"]
    RevocationDisagrees { serial: String, detail: String },
    /// A revocation whose expiry is not its certificate's: the CRL keeps the serial until the
    /// certificate itself expired, but a writer of the store changed the revocation.
    #[message = "revocation of serial {serial} ({certname}) says the certificate expires {revocation}, the \
                 certificate itself {certificate}"]
    #[hint = "the store's revocation was changed outside vouch (an earlier date would have taken the serial \
              off the CRL; the CRL keeps it until the certificate itself expired): treat it as tampering \
              (who can write the store?), and restore the revocation from a backup (the file store: its \
              line in revocations.txt; LDAP: the revocation entry's vouchRecord)"]
    RevocationNotAfterMismatch { serial: String, certname: String, revocation: String, certificate: String },
    /// The inventory cannot be read at all.
    #[message = "the inventory cannot be read: {detail}"]
    #[hint(with = inventory_unreadable_hint(detail))]
    InventoryUnreadable { detail: String },
    /// The CRL on disk is past its nextUpdate.
    #[message = "the CRL expired at {next_update} (its nextUpdate)"]
    #[hint = "`vouch crl` writes a new CRL now; relying parties refuse every certificate while \
              the CRL they hold is expired"]
    CrlExpired { next_update: String },
    /// A CRL that is due (a revocation since, its nextUpdate near, missing) cannot be
    /// written: the one on disk stays as it is until it expires.
    #[message = "{crl} is due and cannot be written: {detail}"]
    #[hint = "fix the cause named, then `vouch crl`: until then the CRL on disk lists no revocation made \
              since it was written, and relying parties refuse every certificate once it expires"]
    CrlNotWritten { crl: String, detail: String },
    /// A master CA the store names that the fleet's root did not sign.
    #[message = "the store names {subject} as a master CA, but the fleet's root did not sign it: {detail}"]
    #[hint(with = NOT_OURS)]
    ForeignIssuer { subject: String, detail: String },
    /// A trust file is not what vouch wrote: the CA bundle agents are given (this master CA,
    /// then the root) or the root certificate (the root alone).
    #[message = "{path}: {detail}"]
    #[hint = "a trust file holds what vouch did not write (agents or conductors may trust another \
              CA): restore it from a backup (ca_bundle.pem: this master CA's certificate, then \
              the root's; root_crt.pem: the root alone), and find who wrote it"]
    BundleMismatch { path: String, detail: String },
    /// A revocation whose serial's record still says issued.
    #[message = "serial {serial} ({certname}) is listed as revoked, but its record says issued"]
    #[hint = "the revocation list holds the serial, so every CRL from now on lists it; its \
              record says issued: `vouch revoke --serial SERIAL` makes the record say revoked"]
    RevocationNotInRecord { serial: String, certname: String },
    /// The shared store: a revocation entry (the CRL lists the serial) whose certname's
    /// registry entry still holds the certificate as issued (a revocation cut short).
    #[message = "{certname}: certificate {serial} is revoked (the CRL lists it), but the certname's entry still \
                 says issued"]
    #[hint = "a revocation stopped between its two writes (the server gone, the process killed): \
              `vouch revoke CERTNAME` (or `vouch revoke --serial SERIAL`) finishes it (the revocation \
              entry is kept as it is); until then \
              listings and certificate_status show the certificate as valid"]
    RevocationUnfinished { serial: String, certname: String },
    /// A multi-supplier directory's replication conflict entry: two servers each accepted an
    /// add of the same entry (a claim, a certname), so first-use-wins was lost there.
    #[message = "replication conflict entry {dn} ({conflict}): two servers each accepted this entry; certname \
                 {certname}, serial {serial}"]
    #[hint = "every master must write to one directory server (docs/ldap.md, 'Two suppliers: first-use-wins \
              lost'): point them all at one supplier first; then revoke the certificate the conflict entry holds \
              (`vouch revoke --serial SERIAL`: it is valid and listed nowhere else), and delete the conflict entry \
              with ldapdelete as the directory's administrator"]
    ReplicationConflict { dn: String, conflict: String, certname: String, serial: String },
    /// The shared store: a tombstone left `purging` (a purge stopped between its swap and its
    /// delete): the certname refuses every certificate until a purge finishes it.
    #[message = "{certname}: the tombstone of certificate {serial} is being purged (since {since}); the certname \
                 refuses new certificates until the purge is finished"]
    #[hint = "a purge stopped between its two writes (the server gone, the process killed), or is under way: \
              `vouch purge --tombstones --confirm` finishes it once it has been purging for 30 minutes by \
              the server's clock (run it again then)"]
    PurgeUnfinished { serial: String, certname: String, since: String },
    /// The shared store: a registry entry marked `purging` whose certificate was never revoked
    /// (no revocation entry): no purge's (a purge takes only cleaned certnames' tombstones).
    /// It hides the certificate from listings and `vouch revoke CERTNAME`, and blocks the
    /// certname.
    #[message = "{certname}: the entry of certificate {serial} (valid until {not_after}) is marked purging, \
                 but the certificate was never revoked: no purge takes a live certificate's entry"]
    #[hint = "written outside vouch (a writer with the masters' bind DN) or by a defect: the certificate is \
              hidden and the certname refuses new ones. `vouch revoke --serial SERIAL` revokes the \
              certificate; or, if it is good, write the entry's vouchState back to issued (ldapmodify)"]
    PurgingLiveCertificate { serial: String, certname: String, not_after: String },
    /// A revoked serial the CRL should list and does not.
    #[message = "serial {serial} ({certname}) is revoked, but the CRL does not list it"]
    #[hint(with = WRITE_CRL)]
    RevokedNotOnCrl { serial: String, certname: String },
    /// The CRL cannot be read, or is not signed by this master CA.
    #[message = "the CRL: {detail}"]
    #[hint(with = WRITE_CRL)]
    CrlUnreadable { detail: String },
    /// The root CRL (`DIR/ca/root_crl.pem`) is there but cannot count: it does not read, or
    /// the data directory's root did not sign it. Every conductor of this root is refused.
    #[message = "the root CRL cannot count, and no conductor of this root is accepted until it does: {detail}"]
    #[hint = "every conductor of this root is refused (conductor-revocation-unknown) until it counts: copy the \
              root's own CRL (ROOT_DIR/ca/root_crl.pem, signed by the root; a master CA's ca_crl.pem is not it) \
              over DIR/ca/root_crl.pem; where the root key is, verify (as any command that touches the store) \
              writes it again"]
    RootCrlUnreadable { detail: String },
    /// An operation a killed process left half-done, still there after recovery.
    #[message = "{path}: an operation left half-done is still there after recovery"]
    #[hint(with = RECOVERY_UNFINISHED)]
    OperationLeftHalfDone { path: String },
    /// A serial's record that does not parse.
    #[message = "{path}: {detail}"]
    #[hint(with = record_damaged_hint(detail))]
    RecordDamaged { path: String, detail: String },
    /// A serial reserved before signing whose fate recovery never settled.
    #[message = "serial {serial} ({certname}) is still reserved (intent) after recovery"]
    #[hint(with = RECOVERY_UNFINISHED)]
    IntentLeft { serial: String, certname: String },
    /// Two certificates of one certname both issued and unexpired: the older one should have
    /// been revoked as superseded.
    #[message("{certname} has {} unexpired certificates that are not revoked: {}", serials.len(), serials.join(", "))]
    #[hint = "`vouch revoke --serial SERIAL` revokes the one that should not be valid (the older \
              one, superseded, as a renewal would have); `vouch revoke CERTNAME` revokes the current one"]
    TwoValidCertificates { certname: String, serials: Vec<String> },
    /// An issued or revoked record the inventory does not list.
    #[message = "serial {serial} ({certname}) has a record but no inventory line"]
    #[hint(with = INVENTORY_CHANGED)]
    RecordNotInInventory { serial: String, certname: String },
    /// An inventory line that is not whole (four fields: 0x-serial, two times, /CN=certname).
    #[message = "inventory line {line} is not whole: {text:?}"]
    #[hint = "vouch only appends whole lines, so this one was changed outside vouch: write it back \
              as '0xSERIAL NOTBEFORE NOTAFTER /CN=CERTNAME' from its serial's record \
              (serials/<ab>/<serial>.json), or restore inventory.txt from a backup; the records, \
              not the inventory, say what was issued"]
    InventoryLineDamaged { line: usize, text: String },
    /// A line of the revocation list that does not read as a revocation: the CRL leaves it out.
    #[message = "revocation list line {line} is not a revocation: {text:?}"]
    #[hint = "the CRL leaves out what it cannot read: write the line back as 'SERIAL TIME REASON \
              CERTNAME' (or remove it), then `vouch revoke --serial SERIAL` for its certificate \
              if its record does not say revoked; or restore revocations.txt from a backup"]
    RevocationLineDamaged { line: usize, text: String },
    /// An entry with no usable name (see `vouch reconcile`).
    #[message("{name} ({kind} with no usable name: {}): {detail}", files.join(", "))]
    #[hint = "`vouch purge NAME` shows what it would remove; `--confirm` removes it"]
    Junk { name: String, kind: String, detail: String, files: Vec<String> },
}

/// The hint of a certificate that cannot be read, or is missing.
const RESTORE_CURRENT: &str = "restore signed/CERTNAME.pem (and its record) from a backup of DIR/ca, or from the \
     node's own copy (its first PEM block only); a certificate whose serial has no \
     record was not stored by vouch: treat it as tampering. `vouch clean` cannot revoke \
     a certificate it cannot read; `vouch revoke --serial SERIAL` can, by its record or \
     inventory line (on LDAP, run verify again first: another master may have cleaned \
     the name meanwhile)";

/// The hint of a certname whose file holds another node's certificate.
const ANOTHER_NODES: &str = "do not `vouch clean` this name (it refuses: the certificate in the file is \
     another node's). Restore signed/CERTNAME.pem from a backup of DIR/ca";

/// The hint of a certname whose file holds not its newest certificate.
const NOT_NEWEST: &str = "the certificate in signed/CERTNAME.pem is not the certname's newest: restore the \
     file from a backup of DIR/ca (or the node's own copy, its first PEM block only); \
     until then `vouch revoke` and `clean` act on the file's certificate when it is the \
     certname's own, and refuse when it is another node's";

/// The hint of a certificate and its record that disagree.
const RESTORE_ALL: &str = "restore DIR/ca from one backup (all of it from the same time)";

/// The hint of a certificate the fleet's CAs did not sign.
const NOT_OURS: &str = "a certificate this fleet's CAs did not sign is in the store: treat it as tampering \
     (who can write the store?); restore it from a backup";

/// The hint of an inventory changed outside vouch.
const INVENTORY_CHANGED: &str = "restore DIR/ca from one backup (all of it from the same time): vouch only \
     appends whole lines to the inventory, so a line missing, doubled or cut was \
     changed outside vouch";

/// The hint of a CRL that does not list what it should.
const WRITE_CRL: &str = "`vouch crl` writes a new CRL now (`vouch serve` does within a minute); compile \
     servers fetch it with `vouch crl --fetch`";

/// The hint of what recovery left.
const RECOVERY_UNFINISHED: &str =
    "recovery could not finish it: see the error of the last command that took the store's lock";

/// The hint of a record its user may not read.
const RECORD_NOT_READABLE: &str =
    "give the user vouch runs as read access to the record (its owner or mode: vouch writes \
     records 0644), then run verify again; nothing needs restoring";

/// [`Finding::CurrentUnreadable`]'s hint: a file its user may not read needs no restore.
fn current_unreadable_hint(detail: &str) -> &'static str {
    if detail.contains("Permission denied") {
        "give the user vouch runs as read access to the file (its owner or mode: vouch writes \
         certificates 0644), then run verify again; nothing needs restoring"
    } else {
        RESTORE_CURRENT
    }
}

/// [`Finding::InventoryDisagrees`]'s hint: a record its user may not read needs no restore.
fn inventory_disagrees_hint(detail: &str) -> &'static str {
    if detail.contains("Permission denied") {
        RECORD_NOT_READABLE
    } else {
        INVENTORY_CHANGED
    }
}

/// [`Finding::RecordDamaged`]'s hint: a record its user may not read needs no restore.
fn record_damaged_hint(detail: &str) -> &'static str {
    if detail.contains("Permission denied") {
        RECORD_NOT_READABLE
    } else {
        "restore the record from a backup; a file vouch did not write (not \
         serials/<ab>/<serial>.json) can be removed by hand: vouch never reads it"
    }
}

/// [`Finding::InventoryUnreadable`]'s hint: an inventory its user may not read needs no restore.
fn inventory_unreadable_hint(detail: &str) -> &'static str {
    if detail.contains("Permission denied") {
        "give the user vouch runs as read access to DIR/ca/inventory.txt (its owner or mode: vouch \
         writes it 0644), then run verify again; nothing needs restoring, but nothing was checked \
         against it (nor, in the file store, each certname's current certificate)"
    } else {
        "restore the inventory from a backup of DIR/ca; nothing was checked against it"
    }
}

impl Finding {
    /// A short kebab-case name of the kind of finding (the JSON's `finding`).
    pub fn kind(&self) -> &'static str {
        match self {
            Finding::CurrentUnreadable { .. } => "current-unreadable",
            Finding::CurrentMissing { .. } => "current-missing",
            Finding::ListedNotCurrent { .. } => "listed-not-current",
            Finding::IssuedNotCurrent { .. } => "issued-not-current",
            Finding::RevocationDisagrees { .. } => "revocation-disagrees",
            Finding::RevocationNotAfterMismatch { .. } => "revocation-not-after-mismatch",
            Finding::InventoryUnreadable { .. } => "inventory-unreadable",
            Finding::CrlExpired { .. } => "crl-expired",
            Finding::CrlNotWritten { .. } => "crl-not-written",
            Finding::ForeignIssuer { .. } => "foreign-issuer",
            Finding::BundleMismatch { .. } => "bundle-mismatch",
            Finding::CertificateDamaged { .. } => "certificate-damaged",
            Finding::SerialMismatch { .. } => "serial-mismatch",
            Finding::NameMismatch { .. } => "name-mismatch",
            Finding::NotSignedByCa { .. } => "not-signed-by-ca",
            Finding::NotAfterMismatch { .. } => "not-after-mismatch",
            Finding::StateMismatch { .. } => "state-mismatch",
            Finding::SerialTwice { .. } => "serial-twice",
            Finding::InventorySerialTwice { .. } => "inventory-serial-twice",
            Finding::InventoryWithoutRecord { .. } => "inventory-without-record",
            Finding::InventoryDisagrees { .. } => "inventory-disagrees",
            Finding::NotInInventory { .. } => "not-in-inventory",
            Finding::RevokedNotRecorded { .. } => "revoked-not-recorded",
            Finding::RevocationNotInRecord { .. } => "revocation-not-in-record",
            Finding::RevocationUnfinished { .. } => "revocation-unfinished",
            Finding::ReplicationConflict { .. } => "replication-conflict",
            Finding::PurgeUnfinished { .. } => "purge-unfinished",
            Finding::PurgingLiveCertificate { .. } => "purging-live-certificate",
            Finding::RevokedNotOnCrl { .. } => "revoked-not-on-crl",
            Finding::CrlUnreadable { .. } => "crl-unreadable",
            Finding::RootCrlUnreadable { .. } => "root-crl-unreadable",
            Finding::OperationLeftHalfDone { .. } => "operation-left-half-done",
            Finding::RecordDamaged { .. } => "record-damaged",
            Finding::IntentLeft { .. } => "intent-left",
            Finding::TwoValidCertificates { .. } => "two-valid-certificates",
            Finding::RecordNotInInventory { .. } => "record-not-in-inventory",
            Finding::InventoryLineDamaged { .. } => "inventory-line-damaged",
            Finding::RevocationLineDamaged { .. } => "revocation-line-damaged",
            Finding::Junk { .. } => "junk",
        }
    }
}
