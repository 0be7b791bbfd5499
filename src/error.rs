//! Errors of vouch's commands (not decisions: refusals are [`crate::decision::Refusal`]).
#![deny(clippy::arithmetic_side_effects)]

use crate::files::input::{read_bounded, read_path, Kind};
use std::path::{Path, PathBuf};

/// The flag of `vouch serve`'s own address (see [`Error::Listen`]).
pub const LISTEN_FLAG: &str = "--listen";

/// A command failed. Each variant has a message and a hint.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    Io {
        path: PathBuf,
        op: &'static str,
        source: std::io::Error,
    },
    AlreadyExists {
        path: PathBuf,
    },
    NoCa {
        dir: PathBuf,
    },
    /// The data directory cannot be used: not a directory, or closed to this user.
    DataDir {
        dir: PathBuf,
        detail: String,
    },
    Policy(crate::policy::PolicyError),
    PolicyNotFound {
        tried: Vec<PathBuf>,
    },
    Key {
        path: PathBuf,
        detail: String,
    },
    Cert {
        path: PathBuf,
        detail: String,
    },
    Classification {
        source: String,
        error: crate::vouching::classification::ClassificationError,
    },
    Attributes {
        path: PathBuf,
        detail: String,
    },
    Expiry {
        detail: String,
    },
    Usage {
        detail: String,
    },
    /// Neither --dir nor VOUCH_DIR, and no usable base for the default data directory (a
    /// user other than root whose HOME is relative or unset, with no absolute XDG_DATA_HOME).
    NoDataDir {
        why: String,
    },
    Crypto {
        detail: String,
    },
    Store {
        detail: String,
    },
    /// The store's inventory (`DIR/ca/inventory.txt`) cannot be read by the user vouch runs
    /// as (its owner or mode): the store cannot be opened for writing (its log replayed).
    InventoryUnreadable {
        path: PathBuf,
        op: &'static str,
        source: std::io::Error,
    },
    /// A certname's stored certificate is not its own (another node's record, serial or
    /// CN, or no certificate at all): the store is damaged, and only a restore repairs it.
    StoreDamaged {
        certname: String,
        /// What is wrong with it (as `vouch store verify` would name it).
        what: String,
    },
    /// The store lists `certname` (its inventory line, `vouch list`) but its current
    /// certificate is missing from the store (DIR/ca/signed/NAME.pem deleted).
    CurrentMissing {
        certname: String,
        serial: String,
        /// Where the store keeps it (the file store's path), for the message.
        file: Option<PathBuf>,
    },
    /// Standard output's reader went away (a closed pipe: `vouch list --all | head -1`):
    /// the command ends quietly with [`crate::cli::EXIT_PIPE`], as a process killed by
    /// SIGPIPE would (vouch never dies of SIGPIPE: `vouch serve` writes to sockets).
    StdoutClosed,
    /// The shared store cannot be reached: nothing was decided or written (`vouch serve`
    /// answers 503 with Retry-After; the agent retries).
    StoreUnavailable {
        detail: String,
    },
    /// A change stored on the primary LDAP server that a `--store-replica` did not show in
    /// time (`--store-confirm-replicas`): exit 75, 503; the same command confirms it.
    StoreUnconfirmed {
        detail: String,
    },
    /// A refused request not kept: the store's or the client address's bound (crate::limits).
    Limited(crate::limits::Limited),
    /// A concurrent change won a compare-and-swap on the shared store: nothing was written.
    StoreConflict {
        what: String,
    },
    /// `--store` or an LDAP option cannot be used.
    StoreUrl {
        detail: String,
    },
    /// The LDAP server refused or failed an operation for a reason other than being down
    /// (access, limits, schema, a damaged entry, a TLS certificate it presents).
    StoreLdap {
        detail: String,
    },
    NotFound {
        certname: String,
    },
    /// `vouch revoke --serial`: not a serial as a certificate carries one (hex, at most 20 octets).
    SerialInvalid {
        given: String,
    },
    /// `vouch revoke --serial`: no record and no inventory line of this CA has the serial.
    SerialUnknown {
        serial: String,
    },
    /// `vouch revoke --serial`: the serial is no certificate of this CA but a conductor the
    /// root issued (`root_issued.txt` records it, or the service's own conductor).
    SerialIsConductor {
        serial: String,
        /// The conductor, in words.
        what: String,
    },
    /// `vouch revoke --serial`: the serial was reserved, never issued (nothing to revoke).
    SerialNeverIssued {
        serial: String,
        certname: String,
        state: String,
    },
    /// A certname that fails the certname rules (it would become a file name).
    CertnameInvalid {
        certname: String,
        problem: crate::decision::CertnameProblem,
    },
    NotValid {
        certname: String,
        detail: String,
    },
    /// `vouch renew NAME` (or a node's renewal over the API): NAME's current certificate is
    /// not one that renews.
    NotRenewable {
        certname: String,
        serial: String,
        why: Unrenewable,
    },
    /// `vouch admin new NAME`: NAME cannot be an administrator's; nothing was written.
    AdminNameRefused {
        name: String,
        why: AdminNameTaken,
    },
    /// A command that must pass a policy check was refused (renewal); exit 1 with the reasons.
    Refused {
        certname: String,
        refused: Box<crate::decision::Refused>,
    },
    /// Puppet Server's CA directory (hook mode) is unusable.
    PuppetCa {
        path: PathBuf,
        detail: String,
    },
    /// The CA service at `--ca-url` could not be asked, or answered what vouch cannot use
    /// (`vouch enc --ca-url`, `vouch crl --fetch`).
    Remote {
        url: String,
        detail: String,
    },
    /// `vouch crl --fetch` was answered a CRL older (lower CRL number) than the one of the
    /// same issuer in the file it would replace: a rollback, refused.
    CrlRollback {
        url: String,
        path: PathBuf,
        issuer: String,
        fetched: String,
        current: String,
    },
    /// A CRL a certificate's chain needs is missing: `source` (a CRL file, a cache or the CA's
    /// answer) holds no CRL that `ca` of the bundle signed (`None`: no CRL any CA of the bundle
    /// signed); `foreign` are the issuers of the CRLs there that no CA of the bundle signed
    /// (another CA's: rebuilt, restored, or a master the bundle does not hold).
    CrlNotFromBundle {
        source: String,
        ca: Option<String>,
        bundle: PathBuf,
        foreign: Vec<String>,
    },
    /// Puppet Server's CA has not signed this certname.
    PuppetCaNotSigned {
        certname: String,
        path: PathBuf,
    },
    /// `vouch serve` cannot listen on its address (checked before anything is created).
    Listen {
        addr: std::net::SocketAddr,
        /// The flag that gave the address: `--listen` or `--metrics-listen`.
        flag: &'static str,
        source: std::io::Error,
    },
    /// A file or directory vouch trusts (data directory, `ca/`, policy, CA key) that
    /// another user could change.
    Untrusted(crate::files::trust::Untrusted),
    /// An output path vouch will not write (a symbolic link, a directory).
    Output {
        path: PathBuf,
        detail: String,
    },
    /// A certificate request file (`--csr`) vouch cannot read a certname from.
    Csr {
        path: PathBuf,
        detail: String,
    },
    /// A step failed after the command had already changed something (issued, revoked,
    /// written a key): what was done and where to find it, then the failure.
    Partial {
        done: String,
        error: Box<Error>,
    },
    /// A step failed, but nothing that was done stands in the way of running the command
    /// again, which is how to finish it: a key written first and removed again when what
    /// pairs with it could not be written (`csr`, `conductor new`), a `reconcile` that stopped
    /// part way (running it again does the rest, nothing twice).
    Unfinished {
        done: String,
        error: Box<Error>,
    },
    /// `vouch revoke` / `vouch clean`: the revocation is stored (the certificate IS revoked,
    /// `vouch list --all` shows it so), but the CRL could not be written after it, so relying
    /// parties do not see it yet. Exit [`crate::cli::EXIT_REVOKED_CRL_NOT_WRITTEN`].
    RevokedCrlNotWritten {
        certname: String,
        serial: String,
        /// `vouch clean`: revoked and forgotten.
        cleaned: bool,
        /// Why the CRL could not be written.
        error: Box<Error>,
    },
    /// `vouch reconcile --confirm`: its revocations are stored (the orphans' certificates ARE
    /// revoked), but the CRL could not be written after them: as [`Error::RevokedCrlNotWritten`]
    /// for `vouch revoke`, exit [`crate::cli::EXIT_REVOKED_CRL_NOT_WRITTEN`].
    ReconcileCrlNotWritten {
        revoked: u64,
        /// The first certificates revoked: (certname, serial).
        named: Vec<(String, String)>,
        cleaned: u64,
        requests_dropped: u64,
        /// Why the CRL could not be written.
        error: Box<Error>,
    },
    /// `vouch renew`: the new certificate is stored (and written out) and the old one IS
    /// revoked (superseded), but the CRL could not be written after it. Exit
    /// [`crate::cli::EXIT_REVOKED_CRL_NOT_WRITTEN`], as `vouch revoke`'s.
    RenewedCrlNotWritten {
        certname: String,
        serial: String,
        old_serial: String,
        error: Box<Error>,
    },
    /// `vouch serve`: another `vouch serve` runs on this data directory (it holds an
    /// exclusive `flock` on the directory).
    ServeRunning {
        dir: PathBuf,
        holder: String,
    },
    /// `admin new --key-out`: not a path a new regular file can be created at (stdout, a
    /// device, a FIFO, a socket, a directory): the key would be lost, or not kept as a file,
    /// while the administrator's certificate stays valid in the store.
    KeyOutput {
        path: PathBuf,
        detail: String,
    },
    /// `ca init --root-cert`: the certificate is no root a master CA can be made under.
    RootCa {
        path: PathBuf,
        detail: String,
    },
    /// `ca init --root-key`: the key is not the root certificate's.
    RootKeyMismatch {
        cert: PathBuf,
        key: PathBuf,
    },
    /// A command that signs with the root key, in a data directory without it (a master CA made
    /// with `ca init --root-key`, or a root key moved off the host).
    RootKeyElsewhere {
        dir: PathBuf,
        /// Where the key would be.
        key: PathBuf,
    },
    /// `vouch conductor revoke --cert FILE`: the certificate is not one this CA's root issued
    /// (another issuer, or a signature the root's key did not make).
    ConductorNotOurs {
        path: PathBuf,
        /// The root's subject.
        root: String,
        detail: String,
    },
    /// `vouch conductor revoke --cert FILE`: the root issued it, but it is no conductor (no
    /// extended key usage 1.3.6.1.4.1.34380.2.0).
    NotAConductor {
        path: PathBuf,
        subject: String,
        serial: String,
    },
    /// `vouch conductor revoke`: the serial is a CA's (the root's own, or a master CA's):
    /// revoking it on the root's CRL is not this command's.
    ConductorRevokeCa {
        serial: String,
        /// Which CA, in words.
        what: String,
    },
    /// `vouch conductor revoke --serial`: the serial is a certificate of this CA's store (a
    /// node's, the service's or an administrator's, which the master CA issued), not a
    /// conductor's.
    ConductorRevokeStoreSerial {
        serial: String,
        /// The certname its record names.
        certname: String,
        /// What `vouch revoke --serial` would do to it (the service's and an administrator's
        /// certificate are revoked too, with consequences the operator must know).
        instead: String,
    },
    /// `vouch conductor revoke --serial` without `--cert`: nothing identifies the serial as a
    /// conductor of this root (not in `root_issued.txt` as one, named by no current node's
    /// record, not the service's own conductor). Deny by default: a serial says nothing of what
    /// it is, and another master CA's under this root would revoke all its nodes.
    ConductorRevokeUnknownSerial {
        serial: String,
        /// `DIR/ca/root_issued.txt`.
        issued: PathBuf,
    },
    /// `vouch conductor publish-crl` without a shared store (`--store ldap://...`): a file
    /// store is this master's alone, and nothing travels through it.
    RootCrlNotShared {
        store: String,
    },
    /// `vouch serve --server-name NAME` where NAME is a node's certname with a valid
    /// certificate in the store (any master's): the service would share its name with a node.
    ServerNameOfANode {
        name: String,
        serial: String,
    },
    /// `vouch serve --server-name NAME` where NAME is the certname (first name) of another
    /// master's service sharing the store: each master's first name is its own.
    ServerNameOfAnotherMaster {
        name: String,
    },
    /// `vouch conductor publish-crl` in a data directory without a root CRL.
    RootCrlMissing {
        path: PathBuf,
    },
    /// `vouch conductor publish-crl`: the local root CRL is no CRL signed by this directory's
    /// root (it would be refused by every master): not published.
    RootCrlNotPublishable {
        path: PathBuf,
        detail: String,
    },
    /// `vouch conductor publish-crl` (and `conductor revoke` with a shared store): the shared
    /// store holds a root CRL of this root that lists conductors the local one does not (a
    /// data directory restored from a backup, or another copy of the root's): published, it
    /// would give their revocations back to the fleet. Not published.
    RootCrlDropsRevocations {
        path: PathBuf,
        store: String,
        /// The serials (lowercase hex) the store's lists and the local one does not.
        serials: Vec<String>,
    },
    /// `vouch conductor revoke` in a data directory without the root key (a further master,
    /// or a root key moved off the host): only the root key signs the root's CRL.
    ConductorRevokeNoRootKey {
        dir: PathBuf,
        key: PathBuf,
    },
    /// `vouch conductor revoke`: the revocation is recorded (`root_revocations.txt`), but the
    /// root CRL could not be written after it. Exit [`crate::cli::EXIT_REVOKED_CRL_NOT_WRITTEN`].
    ConductorRevokedCrlNotWritten {
        serial: String,
        error: Box<Error>,
    },
    /// Date arithmetic that leaves the range vouch can represent (years 1 to 9999).
    Date {
        detail: String,
    },
    /// `vouch reconcile --inventory SOURCE`: SOURCE cannot be used (its form, its URL).
    InventorySource {
        source: String,
        detail: String,
    },
    /// `vouch reconcile --inventory cmd:…`: the program failed (non-zero exit, a signal, no
    /// such program): nothing was changed.
    InventoryCommand {
        command: String,
        detail: String,
    },
    /// `vouch reconcile`: the `cmd:` inventory program ran longer than --inventory-timeout.
    InventoryTimeout {
        command: String,
        after: String,
    },
    /// `vouch reconcile`: the inventory holds no name (a failing cloud API looks like this);
    /// refused without --force.
    InventoryEmpty {
        source: String,
        fleet: u64,
    },
    /// `vouch reconcile --confirm`: more changes than --max-changes allows; refused without --force.
    TooManyChanges {
        changes: u64,
        limit: u64,
        fleet: u64,
        max: String,
    },
    /// `vouch purge NAME`: no entry of the store has that generated name (now).
    PurgeUnknown {
        names: Vec<String>,
    },
    /// `vouch audit`: the policy keeps no audit log and no FILE was given.
    NoAuditLog {
        policy: PathBuf,
    },
}

/// Why a certificate does not renew ([`Error::NotRenewable`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unrenewable {
    /// A revoked node certificate.
    Revoked,
    /// A node certificate past its notAfter.
    Expired { not_after: String },
    /// An administrator's certificate (`vouch admin new`, `DIR/admin/`), revoked or not.
    Administrator { revoked: bool },
    /// The certificate `vouch serve` presents (or presented), revoked or not.
    Service { revoked: bool },
}

impl std::fmt::Display for Unrenewable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let revoked = |r: &bool| if *r { ", and revoked" } else { "" };
        match self {
            Unrenewable::Revoked => f.write_str("is revoked"),
            Unrenewable::Expired { not_after } => write!(f, "expired at {not_after}"),
            Unrenewable::Administrator { revoked: r } => {
                write!(f, "is an administrator's (`vouch admin new`), not a node's{}", revoked(r))
            }
            Unrenewable::Service { revoked: r } => {
                write!(f, "is the certificate of the CA service (`vouch serve`), not a node's{}", revoked(r))
            }
        }
    }
}

/// Why a name cannot be an administrator's ([`Error::AdminNameRefused`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdminNameTaken {
    /// Puppet reserves it for its CA ([`crate::decision::RESERVED_CERTNAMES`]).
    Puppet,
    /// A name of this CA's service: on the certificate `vouch serve` presents, one it always
    /// keeps (`localhost`, the loopback addresses), or that of its valid certificate in the store.
    Service,
    /// A node's certname: its current certificate (revoked or not) holds the name until cleaned.
    Node { serial: String, revoked: bool },
    /// An administrator's valid certificate has it already.
    Administrator { serial: String },
    /// A name Puppet servers answer to: `puppet`, this host's name, or one the policy gives
    /// servers (`detail` says which).
    Server { detail: String },
}

impl std::fmt::Display for AdminNameTaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AdminNameTaken::Puppet => f.write_str("Puppet reserves the name for its CA"),
            AdminNameTaken::Service => f.write_str(
                "it is a name of this CA's service (on the certificate `vouch serve` presents, or one it always \
                 keeps: localhost and the loopback addresses)",
            ),
            AdminNameTaken::Node { serial, revoked: false } => {
                write!(f, "it is a node's certname: the node has a certificate (serial {serial})")
            }
            AdminNameTaken::Node { serial, revoked: true } => {
                write!(f, "it is a node's certname: the node's revoked certificate (serial {serial}) still holds it")
            }
            AdminNameTaken::Administrator { serial } => {
                write!(f, "an administrator already has a valid certificate under it (serial {serial})")
            }
            AdminNameTaken::Server { detail } => write!(f, "it is a Puppet server's name: {detail}"),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io { path, op, source } => write!(f, "cannot {op} {}: {source}", path.display()),
            Error::AlreadyExists { path } => write!(f, "{} already exists; refusing to overwrite it", path.display()),
            Error::NoCa { dir } => write!(f, "no CA in {}", dir.display()),
            Error::DataDir { dir, detail } => {
                write!(f, "cannot use {} as the CA's data directory: {detail}", dir.display())
            }
            Error::Policy(e) => write!(f, "{e}"),
            Error::PolicyNotFound { tried } => write!(
                f,
                "no policy found (tried {})",
                tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            ),
            Error::Key { path, detail } => write!(f, "private key {}: {detail}", path.display()),
            Error::Cert { path, detail } => write!(f, "certificate {}: {detail}", path.display()),
            Error::Classification { source, error } => {
                write!(f, "classification {source}: {error}")
            }
            Error::Attributes { path, detail } => {
                write!(f, "attributes file {}: {detail}", path.display())
            }
            Error::Expiry { detail } => write!(f, "expiry: {detail}"),
            Error::Usage { detail } => f.write_str(detail),
            Error::NoDataDir { why } => write!(
                f,
                "no data directory to use: {why} (a relative one would name a directory under the current one)"
            ),
            Error::Crypto { detail } => write!(f, "cryptographic operation failed: {detail}"),
            Error::Store { detail } => write!(f, "CA store: {detail}"),
            Error::InventoryUnreadable { path, op, source } => {
                write!(f, "CA store: the inventory cannot be read (cannot {op} {}: {source})", path.display())
            }
            Error::StoreDamaged { certname, what } => write!(
                f,
                "CA store: the certificate stored for {certname} is not its own ({what}): the store is damaged; \
                 nothing was changed"
            ),
            Error::CurrentMissing { certname, serial, file } => {
                write!(
                    f,
                    "the inventory lists {certname} (serial {serial}) but its current certificate is missing from \
                     the store"
                )?;
                match file {
                    Some(p) => write!(f, " ({} does not exist); nothing was changed", p.display()),
                    None => f.write_str("; nothing was changed"),
                }
            }
            Error::StdoutClosed => {
                f.write_str("cannot write stdout: its reader closed it (a pipe whose reader exited)")
            }
            Error::StoreUnavailable { detail } => write!(f, "CA store unavailable: {detail}"),
            Error::StoreUnconfirmed { detail } => write!(f, "CA store change not confirmed on the replicas: {detail}"),
            Error::Limited(l) => write!(f, "{l}"),
            Error::StoreConflict { what } => write!(f, "{what}; nothing was written"),
            Error::StoreUrl { detail } => write!(f, "store: {detail}"),
            Error::StoreLdap { detail } => write!(f, "LDAP store: {detail}"),
            Error::NotFound { certname } => write!(f, "no certificate for {certname}"),
            Error::SerialInvalid { given } => {
                write!(f, "{given:?} is not a certificate serial (hex digits, at most 40, colons allowed)")
            }
            Error::SerialUnknown { serial } => {
                write!(f, "this CA has no record of serial {serial} (no serial record, no inventory line)")
            }
            Error::SerialIsConductor { serial, what } => write!(
                f,
                "serial {serial} is {what}, which the root issued, not this master CA: this CA's CRL cannot revoke \
                 it, the root's CRL does; `vouch conductor revoke --serial {serial}` revokes it; nothing was revoked"
            ),
            Error::SerialNeverIssued { serial, certname, state } => write!(
                f,
                "serial {serial} ({certname}) was never issued: its record says {state} (reserved before \
                 signing; no certificate carries it)"
            ),
            Error::CertnameInvalid { certname, problem } => {
                write!(f, "{certname:?} is not a valid certname: {problem}")
            }
            Error::NotValid { certname, detail } => {
                write!(f, "{certname} has no valid certificate: {detail}")
            }
            Error::AdminNameRefused { name, why } => {
                write!(f, "refusing to make an administrator certificate for {name}: {why}; nothing was written")
            }
            Error::NotRenewable { certname, serial, why } => {
                write!(f, "cannot renew {certname}: its certificate (serial {serial}) {why}")
            }
            Error::Refused { certname, refused } => {
                write!(f, "{certname}: refused: ")?;
                let reasons = refused.tagged_reasons();
                f.write_str(&reasons.join("; "))
            }
            Error::PuppetCa { path, detail } => write!(f, "Puppet Server CA file {}: {detail}", path.display()),
            Error::Remote { url, detail } => write!(f, "the CA at {url}: {detail}"),
            Error::CrlRollback { url, path, issuer, fetched, current } => write!(
                f,
                "the CA at {url} answered a CRL of {issuer} numbered {fetched}, older than the one in {} \
                 (number {current}): refusing to roll the CRL back; {} is unchanged",
                path.display(),
                path.display()
            ),
            Error::CrlNotFromBundle { source, ca, bundle, foreign } => {
                match ca {
                    Some(ca) => write!(
                        f,
                        "{source} holds no CRL signed by {ca} of {} (the certificate's chain goes through it)",
                        bundle.display()
                    )?,
                    None => write!(f, "{source} holds no CRL signed by a CA of {}", bundle.display())?,
                }
                if !foreign.is_empty() {
                    write!(f, "; signed by no CA of {}: a CRL of {}", bundle.display(), foreign.join(", a CRL of "))?;
                }
                Ok(())
            }
            Error::PuppetCaNotSigned { certname, path } => {
                write!(f, "Puppet Server's CA has not signed {certname} (no {})", path.display())
            }
            Error::Listen { addr, flag, source } => {
                // The service's own address is "the" address; another one says which it is.
                let which = if *flag == LISTEN_FLAG { String::new() } else { format!(" ({flag})") };
                match source.kind() {
                    std::io::ErrorKind::AddrInUse => {
                        write!(f, "cannot listen on {addr}{which}: the address is already in use")
                    }
                    std::io::ErrorKind::AddrNotAvailable => write!(
                        f,
                        "cannot listen on {addr}{which}: no network interface of this machine has that address"
                    ),
                    std::io::ErrorKind::PermissionDenied => {
                        write!(f, "cannot listen on {addr}{which}: permission denied")
                    }
                    _ => write!(f, "cannot listen on {addr}{which}: {source}"),
                }
            }
            Error::Untrusted(u) => {
                write!(f, "refusing to trust {}: it {}; fix: {}", u.path.display(), u.problem, u.fix)
            }
            Error::Output { path, detail } => write!(f, "cannot write {}: {detail}", path.display()),
            Error::KeyOutput { path, detail } => write!(
                f,
                "refusing --key-out {}: {detail}; an administrator's private key is written only to a new file \
                 (its certificate is kept in the store, so a key sent elsewhere could be lost while the \
                 certificate stays valid); nothing was issued",
                path.display()
            ),
            Error::Csr { path, detail } => write!(f, "certificate request {}: {detail}", path.display()),
            Error::RootCa { path, detail } => write!(f, "root CA certificate {}: {detail}", path.display()),
            Error::RootKeyMismatch { cert, key } => write!(
                f,
                "private key {} does not belong to the root CA certificate {} (their public keys differ)",
                key.display(),
                cert.display()
            ),
            Error::RootKeyElsewhere { dir, key } => write!(
                f,
                "the root CA's key is not in {}: {} is missing (a master CA made with 'vouch ca init --root-cert \
                 --root-key' never keeps it; an operator may also have moved it off this host)",
                dir.display(),
                key.display()
            ),
            Error::ConductorNotOurs { path, root, detail } => write!(
                f,
                "certificate {}: this CA's root ({root}) did not issue it: {detail}; nothing was revoked",
                path.display()
            ),
            Error::NotAConductor { path, subject, serial } => write!(
                f,
                "certificate {} ({subject}, serial {serial}) is not a conductor's: it lacks the extended key usage \
                 1.3.6.1.4.1.34380.2.0; nothing was revoked",
                path.display()
            ),
            Error::ConductorRevokeCa { serial, what } => write!(
                f,
                "serial {serial} is {what}: `vouch conductor revoke` puts conductors on the root's CRL, never a CA \
                 (every certificate under it would fail the chain's revocation check); nothing was revoked"
            ),
            Error::ConductorRevokeStoreSerial { serial, certname, instead } => write!(
                f,
                "serial {serial} is the certificate of {certname} in this CA's store, which the master CA issued (a \
                 node's, the service's or an administrator's), not a conductor: on the root's CRL it would revoke \
                 nothing; nothing was revoked. {instead}"
            ),
            Error::ConductorRevokeUnknownSerial { serial, issued } => write!(
                f,
                "serial {serial} is not a conductor this data directory knows: {} records no conductor with it, no \
                 current node's record names one, and it is not the service's own conductor; a serial alone cannot \
                 tell a conductor from another master CA under this root (on the root's CRL, every node certificate \
                 under that master would fail the chain's revocation check); nothing was revoked",
                issued.display()
            ),
            Error::ServerNameOfAnotherMaster { name } => write!(
                f,
                "--server-name {name}: {name} is the certname of another master's service sharing this store; a \
                 service that carries it would answer as that master; nothing was issued"
            ),
            Error::ServerNameOfANode { name, serial } => write!(
                f,
                "--server-name {name}: {name} is a node's certname, with a valid certificate (serial {serial}) a \
                 conductor vouched for; a service that carries it would share its name with that node; nothing was \
                 issued"
            ),
            Error::RootCrlNotShared { store } => write!(
                f,
                "the store is {store}, not a shared one: the root CRL travels to other masters only through a \
                 shared (LDAP) store; nothing was published"
            ),
            Error::RootCrlMissing { path } => {
                write!(f, "there is no root CRL to publish: {} does not exist; nothing was published", path.display())
            }
            Error::RootCrlDropsRevocations { path, store, serials } => write!(
                f,
                "{} does not list {} conductor(s) the root CRL in {store} revokes (serial {}): published, it \
                 would undo their revocation at every master; nothing was published (this data directory was \
                 restored from a backup, or is another copy of the root's)",
                path.display(),
                serials.len(),
                serials.join(", ")
            ),
            Error::RootCrlNotPublishable { path, detail } => write!(
                f,
                "{} cannot be published: {detail}; every master would refuse it; nothing was published",
                path.display()
            ),
            Error::ConductorRevokeNoRootKey { dir, key } => write!(
                f,
                "the root CA's key is not in {}: {} is missing, and only the root key signs the root's CRL (a master \
                 CA made with 'vouch ca init --root-cert --root-key' never keeps it; an operator may also have moved \
                 it off this host); nothing was revoked",
                dir.display(),
                key.display()
            ),
            Error::ConductorRevokedCrlNotWritten { serial, error } => write!(
                f,
                "serial {serial} IS revoked: the revocation is recorded in ca/{}, but the root CRL could not be \
                 written after it, so it does not list it yet: {error}",
                crate::policy::own_crl::ROOT_REVOCATIONS
            ),
            Error::Date { detail } => write!(f, "date out of range: {detail}"),
            Error::InventorySource { source, detail } => write!(f, "inventory {source:?}: {detail}"),
            Error::InventoryCommand { command, detail } => {
                write!(f, "the inventory command `{command}` failed: {detail}; nothing was changed")
            }
            Error::InventoryTimeout { command, after } => write!(
                f,
                "the inventory command `{command}` did not finish within {after}: it was killed (with its \
                 process group); nothing was changed"
            ),
            Error::InventoryEmpty { source, fleet } => write!(
                f,
                "refusing to reconcile against an empty inventory ({source} gave no name) while the store \
                 holds {fleet} certificates: nothing was changed"
            ),
            Error::TooManyChanges { changes, limit, fleet, max } => write!(
                f,
                "refusing to make {changes} changes: --max-changes {max} allows {limit} for a fleet of {fleet} \
                 certificates; nothing was changed"
            ),
            Error::PurgeUnknown { names } => {
                write!(f, "no entry of the store is named {}: nothing was removed", names.join(", "))
            }
            Error::NoAuditLog { policy } => {
                write!(f, "the policy {} keeps no audit log ([audit] log)", policy.display())
            }
            Error::Partial { done, error } | Error::Unfinished { done, error } => write!(f, "{done}; then: {error}"),
            Error::ServeRunning { dir, holder } => {
                write!(f, "another vouch serve is running on {} ({holder}); nothing was changed", dir.display())
            }
            Error::RevokedCrlNotWritten { certname, serial, cleaned, error } => write!(
                f,
                "{certname} (serial {serial}) IS revoked{}: the revocation is stored, but the CRL could not be \
                 written after it, so the published CRL does not list it yet: {error}",
                if *cleaned { " and cleaned" } else { "" }
            ),
            Error::RenewedCrlNotWritten { certname, serial, old_serial, error } => write!(
                f,
                "{certname} was renewed (serial {serial}) and its old certificate (serial {old_serial}) IS revoked \
                 (superseded), but the CRL could not be written after it, so the published CRL does not list the \
                 old certificate yet: {error}"
            ),
            Error::ReconcileCrlNotWritten { revoked, named, cleaned, requests_dropped, error } => {
                let mut names: Vec<String> =
                    named.iter().map(|(certname, serial)| format!("{certname} (serial {serial})")).collect();
                let more = revoked.saturating_sub(named.len() as u64);
                if more > 0 {
                    names.push(format!("and {more} more"));
                }
                write!(
                    f,
                    "reconcile revoked {revoked} certificate{}: {} (forgot {cleaned}, dropped {requests_dropped} \
                     pending requests); they ARE revoked: the revocations are stored, but the CRL could not be \
                     written after them, so the published CRL does not list them yet: {error}",
                    if *revoked == 1 { "" } else { "s" },
                    names.join(", ")
                )
            }
        }
    }
}

impl Error {
    pub fn hint(&self) -> Option<&'static str> {
        Some(match self {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::FileTooLarge => {
                "is it the right file? vouch reads no more of an input than any real one needs"
            }
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull => {
                "the disk (or quota) is full: free space on that filesystem, or write elsewhere, and retry"
            }
            Error::Io { .. } => "check that the path exists and that this user may access it",
            Error::AlreadyExists { .. } => "choose another path, or move the existing file away first",
            Error::DataDir { .. } => {
                "point --dir / VOUCH_DIR at the CA's data directory, and run vouch as the user that owns it \
                 (or root)"
            }
            Error::NoCa { .. } => "run 'vouch ca init --dir DIR' first, or point --dir / VOUCH_DIR at the CA",
            Error::Policy(p) if p.message.contains("; fix: ") => {
                "another user could change this file or its directory: follow the fix shown, or move the file"
            }
            Error::Policy(p) if p.message.starts_with("cannot read it") => {
                "check the policy's path and that this user may read it; a CA's policy that is gone is restored \
                 from a backup (a CA that has issued is never given a default policy again: its data directory's \
                 CA is kept as it is); only a new CA gets one from 'vouch ca init' or the first 'vouch serve'"
            }
            Error::Policy(_) => "fix the named key; policy/README.md documents every key",
            Error::PolicyNotFound { .. } => "pass --policy FILE, or set VOUCH_POLICY or VOUCH_DIR",
            Error::Key { .. } => "give the PEM private key (PKCS#8, PKCS#1 or SEC1) that belongs to the certificate",
            Error::Cert { .. } => "give a PEM or DER X.509 certificate",
            Error::Classification { error, .. } => {
                error.hint().unwrap_or("write a YAML mapping with classes, parameters and/or environment")
            }
            Error::Attributes { .. } => {
                "give the file written by 'vouch conductor sign' (yaml, txt, json or cloud-config)"
            }
            Error::Expiry { .. } => "use --expires-in 30m|2h|1d or --expires 2030-01-01T00:00:00Z",
            Error::Usage { .. } => "see vouch --help",
            Error::NoDataDir { .. } => {
                "give the data directory with --dir DIR or VOUCH_DIR=DIR (an absolute path); the default, \
                 $XDG_DATA_HOME/vouch or ~/.local/share/vouch, needs an absolute XDG_DATA_HOME or HOME"
            }
            Error::Crypto { .. } => return None,
            Error::Store { detail } if detail.contains("is damaged") => {
                "running the command again cannot help: `vouch store verify` names what is damaged; restore the named \
                 file from a backup of DIR/ca (a certificate: or from the node's own copy, its first PEM block only); \
                 `vouch revoke --serial SERIAL` revokes a certificate whatever its file holds"
            }
            Error::Store { .. } => "the store was left consistent; check the named file and retry",
            Error::InventoryUnreadable { .. } => {
                "give the user vouch runs as read access to DIR/ca/inventory.txt (its owner or mode: vouch writes it \
                 0644), then retry; nothing needs restoring (`vouch store verify` names it as inventory-unreadable)"
            }
            Error::StoreDamaged { .. } => {
                "running the command again cannot help: `vouch store verify` names the damaged entry; restore the certname's \
                 certificate (DIR/ca/signed/CERTNAME.pem and its record) from a backup of DIR/ca, or from the \
                 node's own copy (its first PEM block only), then run the command again; to revoke a certificate \
                 whatever its file holds: `vouch revoke --serial SERIAL`"
            }
            Error::CurrentMissing { .. } => {
                "`vouch store verify` names it (current-missing); restore DIR/ca/signed/CERTNAME.pem from the \
                 node's own copy (its first PEM block only) or from a backup of DIR/ca, then run the command again; \
                 to revoke it without a restore: `vouch revoke --serial SERIAL` (the serial above)"
            }
            Error::StdoutClosed => {
                "the reader of vouch's output exited before reading all of it: read all of it, or write it to \
                 a file (--out FILE where the command has one)"
            }
            Error::StoreUnavailable { .. } => {
                "nothing was issued or changed: start (or reach) the LDAP server and retry; a running vouch \
                 serve answers 503 meanwhile and resumes by itself, one that cannot start exits 75 (the \
                 systemd unit restarts it)"
            }
            Error::StoreUnconfirmed { .. } => {
                "the change is stored on the primary but not yet on every replica (a failover now could lose \
                 it): once the replica answers, run the same command again (it confirms what is stored and \
                 changes nothing twice); a running vouch serve answers 503 and the agent retries"
            }
            Error::Limited(l) => l.hint(),
            Error::StoreConflict { .. } => {
                "read the current state again ('vouch override show NAME' for an override, 'vouch list --all' \
                 for certificates) and retry with what it shows"
            }
            Error::StoreUrl { .. } => {
                "docs/ldap.md lists the --store URL forms (files, ldap://, ldaps:// with --ldap-ca, ldapi://) \
                 and the --ldap-* options"
            }
            Error::StoreLdap { .. } => {
                "check slapd's log, the bind DN's rights in slapd's ACL and limits, and that slapd has \
                 vouch's schema (docs/ldap.md)"
            }
            Error::NotFound { .. } => "'vouch list --all' shows the certificates this CA knows",
            Error::SerialInvalid { .. } => {
                "give the serial as 'openssl x509 -noout -serial' prints it (serial=43A4...) or as \
                 'vouch list --all' does (43a4...)"
            }
            Error::SerialUnknown { .. } => {
                "check the serial against the certificate ('openssl x509 -noout -serial -issuer'): one \
                 another CA issued is revoked by that CA; 'vouch list --all' shows this CA's current ones"
            }
            Error::SerialIsConductor { .. } => {
                "run `vouch conductor revoke` where the root key is (the root's data directory), then copy its \
                 ca/root_crl.pem to the masters without it"
            }
            Error::SerialNeverIssued { .. } => "nothing to revoke: no certificate with this serial exists",
            Error::CertnameInvalid { .. } => {
                "a certname is a lowercase host name: letters, digits, '.', '-' and '_', no empty label \
                 (so no '/' and no '..'), no wildcard, no trailing dot; e.g. web01.example.com"
            }
            Error::NotValid { .. } => "a revoked, expired or foreign certificate has no classification here",
            Error::AdminNameRefused { why: AdminNameTaken::Puppet, .. } => {
                "choose another name for the administrator, such as alice"
            }
            Error::AdminNameRefused { why: AdminNameTaken::Service, .. } => {
                "an administrator needs a name of its own: choose another, such as alice (the service keeps its \
                 names)"
            }
            Error::AdminNameRefused { why: AdminNameTaken::Node { revoked: false, .. }, .. } => {
                "choose another name for the administrator; the node's name is free only once the node is retired \
                 and forgotten (`vouch clean NAME` revokes and forgets its certificate)"
            }
            Error::AdminNameRefused { why: AdminNameTaken::Node { revoked: true, .. }, .. } => {
                "choose another name for the administrator, or free this one: `vouch clean NAME` forgets the \
                 node's revoked certificate, then run `vouch admin new NAME` again"
            }
            Error::AdminNameRefused { why: AdminNameTaken::Server { .. }, .. } => {
                "an administrator needs a name no node or server uses (agents and servers would meet it where they \
                 expect a server): choose another, such as alice"
            }
            Error::AdminNameRefused { why: AdminNameTaken::Administrator { .. }, .. } => {
                "choose another name for the new administrator; to replace that administrator's certificate, \
                 revoke it first (`vouch revoke NAME`)"
            }
            Error::NotRenewable { why: Unrenewable::Revoked, .. } => {
                "a revoked certificate is never renewed: the node gets a new one from a new request with \
                 attributes a conductor signs (`puppet ssl bootstrap` against `vouch serve`, or `vouch sign \
                 --csr FILE`); `vouch clean NAME` forgets the revoked one"
            }
            Error::NotRenewable { why: Unrenewable::Expired { .. }, .. } => {
                "an expired certificate is not renewed (renew before notAfter: `vouch list --all` shows it): the node \
                 gets a new one from a new request with attributes a conductor signs (`puppet ssl bootstrap` \
                 against `vouch serve`, or `vouch sign --csr FILE`)"
            }
            Error::NotRenewable { why: Unrenewable::Administrator { .. }, .. } => {
                "administrator certificates are not renewed: make a new one with `vouch admin new NAME --cert-out \
                 FILE --key-out FILE` (another name, or this one once its certificate is revoked or expired), \
                 then revoke the old one when the new one is in use"
            }
            Error::NotRenewable { why: Unrenewable::Service { .. }, .. } => {
                "the service's certificate is not renewed by `vouch renew`: `vouch serve` replaces it itself when \
                 it starts (30 days before its expiry, once it is revoked, or when --server-name changes): restart \
                 `vouch serve`"
            }
            Error::Refused { refused, .. } => match refused.reasons.first() {
                Some(r) => r.hint(),
                None => return None,
            },
            Error::PuppetCa { .. } => {
                "point --puppet-cadir at Puppet Server's cadir ('puppet config print cadir --section server'); \
                 it holds ca_crt.pem, ca_crl.pem and signed/"
            }
            Error::CrlRollback { .. } => {
                "an older CRL may miss revocations: check that --ca-url is the fleet's current CA (not a \
                 restored backup or another master) and fetch again; remove the file only if you know why it is newer"
            }
            Error::Remote { .. } => {
                "check --ca-url (https://HOST:PORT of vouch serve, as the agents' ca_server/ca_port), that vouch \
                 serve runs there, and that --cacert is its CA bundle (GET /puppet-ca/v1/certificate/ca)"
            }
            Error::CrlNotFromBundle { .. } => {
                "the CRLs and --cacert come from different CAs: if the CA was rebuilt or restored, or a master \
                 joined, take its bundle again (GET /puppet-ca/v1/certificate/ca) into --cacert; check that \
                 --ca-url is that CA (or a master of its fleet); a --crl file is refreshed by `vouch crl --fetch`"
            }
            Error::PuppetCaNotSigned { .. } => {
                "'puppetserver ca list' shows pending requests; the autosign hook's reasons are in the server log"
            }
            Error::Listen { source, flag, .. } if *flag != LISTEN_FLAG => match source.kind() {
                std::io::ErrorKind::AddrInUse => {
                    "another process listens there: stop it, or choose another port with \
                     --metrics-listen ADDRESS:PORT; nothing was created"
                }
                std::io::ErrorKind::AddrNotAvailable => {
                    "listen on an address of this machine (ip addr), such as 127.0.0.1:PORT"
                }
                std::io::ErrorKind::PermissionDenied => "ports below 1024 need root or CAP_NET_BIND_SERVICE",
                _ => "choose another --metrics-listen ADDRESS:PORT",
            },
            Error::Listen { source, .. } => match source.kind() {
                std::io::ErrorKind::AddrInUse => {
                    "another process listens there (another vouch serve, a Puppet Server?): stop it, or choose \
                     another port with --listen ADDRESS:PORT; nothing was created"
                }
                std::io::ErrorKind::AddrNotAvailable => {
                    "listen on an address of this machine (ip addr), or on 0.0.0.0:PORT for all of them"
                }
                std::io::ErrorKind::PermissionDenied => {
                    "ports below 1024 need root or CAP_NET_BIND_SERVICE; Puppet's CA port is 8140"
                }
                _ => "choose another --listen ADDRESS:PORT",
            },
            Error::Untrusted(_) => {
                "vouch refuses a data directory, policy, key or classifier cache that a user other than root or itself \
                 could change: follow the fix shown (as root), or move the files"
            }
            Error::Output { .. } => {
                "give the path of a regular file (new or existing), a device or a FIFO, or - for stdout"
            }
            Error::KeyOutput { .. } => {
                "give --key-out the path of a file that does not exist yet, in an existing directory: vouch writes \
                 the key there once, mode 0600, and keeps no copy"
            }
            Error::Csr { .. } => "give the PEM or DER certificate request a Puppet agent or 'vouch csr' wrote",
            Error::ServeRunning { .. } => {
                "one vouch serve per data directory: a second one would issue its own service certificate and \
                 revoke the running one's; stop the other first, or give this one another --dir (a further master: \
                 'vouch ca init --root-cert … --root-key …', docs/operator-guide.md)"
            }
            Error::Partial { .. } => {
                "what the message says was done stands: do not run the command again unless the message says to \
                 (it would issue, renew or revoke again); fix the cause named after 'then:' (a path that cannot be written, a full disk) \
                 and take the result from where the message says it is"
            }
            Error::Unfinished { .. } => {
                "fix the cause named after 'then:' (a path that cannot be written, a full disk) and run the command \
                 again: what was done before it stopped is not done twice (a key file the message says was left \
                 without its pair: remove it first)"
            }
            Error::RevokedCrlNotWritten { .. }
            | Error::ReconcileCrlNotWritten { .. }
            | Error::RenewedCrlNotWritten { .. } => {
                "the revocation is done, do not repeat it: fix the cause above, then run `vouch crl` to write \
                 the CRL (any command that touches the store also writes it; until then `vouch store verify` \
                 reports the certificate as revoked-not-on-crl)"
            }
            Error::RootCa { .. } => {
                "give --root-cert the root CA's certificate (ca/root_crt.pem in the data directory of the first \
                 'vouch ca init'): a self-signed CA certificate, valid now, that may sign certificates"
            }
            Error::RootKeyMismatch { .. } => {
                "give --root-key the root's own private key (ca/root_key.pem beside the ca/root_crt.pem given to \
                 --root-cert); nothing was written"
            }
            Error::RootKeyElsewhere { .. } => {
                "run this where the root key is: --dir the data directory holding ca/root_key.pem (a master CA \
                 under the same root, with the default policy, trusts the conductors issued there)"
            }
            Error::ConductorNotOurs { .. } => {
                "give the certificate `vouch conductor new` wrote in the data directory of this root (--dir); a \
                 conductor of another root is revoked by that root's CA, whose CRL the policy lists in \
                 conductors.crls"
            }
            Error::NotAConductor { .. } => {
                "give the conductor's certificate (`openssl x509 -noout -ext extendedKeyUsage -in FILE` shows \
                 1.3.6.1.4.1.34380.2.0); a node's certificate is revoked with `vouch revoke NAME`"
            }
            Error::ConductorRevokeCa { .. } => {
                "check the serial: `openssl x509 -noout -serial -in CONDUCTOR.pem` prints a conductor's; to retire \
                 a master CA, stop its service and have every node of it vouched for again under another master"
            }
            Error::ConductorRevokeStoreSerial { .. } => {
                "a conductor's serial is what `openssl x509 -noout -serial -in CONDUCTOR.pem` prints; a certificate \
                 of this CA is revoked with `vouch revoke` (the message says what that does to this one)"
            }
            Error::ConductorRevokeUnknownSerial { .. } => {
                "give the conductor's certificate with --cert FILE: vouch checks that this root issued it, that it \
                 is a conductor (extended key usage 1.3.6.1.4.1.34380.2.0) and that it is not a CA"
            }
            Error::ServerNameOfAnotherMaster { .. } => {
                "give each master its own first --server-name; a name the masters share (the load balancer's) \
                 comes after it, on every master (docs/ldap.md, 'One name, one load balancer')"
            }
            Error::ServerNameOfANode { .. } => {
                "choose another --server-name (a load balancer's name the masters share must be no node's), or \
                 revoke or clean that node first (`vouch revoke NAME`) if the name is the service's"
            }
            Error::RootCrlNotShared { .. } => {
                "give the fleet's shared store: `vouch --store ldap://HOST/BASE conductor publish-crl` (or set \
                 VOUCH_STORE); a master on a file store gets the root CRL only as a copy of ca/root_crl.pem"
            }
            Error::RootCrlMissing { .. } => {
                "run it where the root key is (--dir the data directory holding ca/root_key.pem): `vouch conductor \
                 revoke` writes the root CRL there, and so does any command that touches the store (`vouch list`)"
            }
            Error::RootCrlDropsRevocations { .. } => {
                "record each of those revocations here with `vouch conductor revoke --serial SERIAL` (the root CRL \
                 is written again listing them), then run `vouch conductor publish-crl` again"
            }
            Error::RootCrlNotPublishable { .. } => {
                "where the root key is, `vouch list` writes the root CRL again (signed by the root); then run \
                 `vouch conductor publish-crl` again"
            }
            Error::ConductorRevokeNoRootKey { .. } => {
                "run it where the root key is (--dir the data directory holding ca/root_key.pem), with the fleet's \
                 shared store (--store ldap://...): every master sharing it takes the root CRL from there; a master \
                 on a file store needs a copy of that directory's ca/root_crl.pem as its ca/root_crl.pem (or a copy \
                 listed in conductors.crls of its policy)"
            }
            Error::ConductorRevokedCrlNotWritten { .. } => {
                "the revocation is recorded: fix the cause above, then run the same `vouch conductor revoke` again \
                 (it writes the root CRL and records nothing twice); any command that touches the store writes it \
                 too"
            }
            Error::Date { .. } => "use a shorter duration (or, with --now, a date further from the year 9999)",
            Error::InventorySource { .. } => {
                "give file:PATH (one certname a line), cmd:PROGRAM ARGS… (its output, one name a line) or \
                 ldap:ldap://HOST:PORT/BASE?ATTRIBUTE?SCOPE?FILTER (docs/fleet-operations.md)"
            }
            Error::InventoryTimeout { .. } => {
                "run the command by hand: it must print the names and exit (a program that waits, or a \
                 background child keeping its output open, never ends); or raise --inventory-timeout"
            }
            Error::InventoryCommand { .. } => {
                "run the command by hand and fix it (credentials, network, the cloud API); reconcile acts only \
                 on an inventory read completely"
            }
            Error::InventoryEmpty { .. } => {
                "check the inventory source (did the cloud API fail?); if the fleet really is gone, add --force"
            }
            Error::TooManyChanges { .. } => {
                "review the dry run's list (vouch reconcile --inventory SOURCE -o json); if it is right, raise \
                 --max-changes (N or P%) or add --force"
            }
            Error::PurgeUnknown { .. } => {
                "the names are those 'vouch reconcile' lists under junk, now: run it again and copy them"
            }
            Error::NoAuditLog { .. } => "name the log: vouch audit verify FILE…, or set [audit] log in the policy",
        })
    }
}

impl From<crate::files::trust::Untrusted> for Error {
    fn from(e: crate::files::trust::Untrusted) -> Self {
        Error::Untrusted(e)
    }
}

impl From<crate::policy::PolicyError> for Error {
    fn from(e: crate::policy::PolicyError) -> Self {
        Error::Policy(e)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::Listen { source, .. } => Some(source),
            Error::Policy(e) => Some(e),
            Error::Classification { error, .. } => Some(error),
            Error::Untrusted(u) => Some(u),
            Error::Partial { error, .. }
            | Error::Unfinished { error, .. }
            | Error::RevokedCrlNotWritten { error, .. }
            | Error::ReconcileCrlNotWritten { error, .. }
            | Error::RenewedCrlNotWritten { error, .. }
            | Error::ConductorRevokedCrlNotWritten { error, .. } => Some(error.as_ref()),
            _ => None,
        }
    }
}

/// [`read_path`], its failure as a command error naming the file.
pub fn read_input(path: &Path, kind: Kind) -> Result<Vec<u8>, Error> {
    read_path(path, kind).map_err(|source| Error::Io { path: path.to_path_buf(), op: "read", source })
}

/// Standard input up to the kind's limit.
pub fn read_stdin(kind: Kind) -> Result<Vec<u8>, Error> {
    read_bounded(std::io::stdin().lock(), kind).map_err(|source| Error::Io { path: "stdin".into(), op: "read", source })
}
