//! Errors of vouch's commands (not decisions: refusals are [`crate::decision::Refusal`]).
//! Each variant states its message (`#[message]`, its `Display`) and its hint (`#[hint]`)
//! where it is declared; the few that depend on a field call a named function of `error/wording.rs`.
#![deny(clippy::arithmetic_side_effects)]

mod approval;
mod busy;
mod input;
mod mistake;
mod puppet_ca;
mod serving;
mod template;
mod why;
mod wording;

pub use approval::NotApprovable;
pub use busy::Busy;
pub use input::{read_input, read_stdin};
pub use mistake::Mistake;
pub use puppet_ca::PuppetCaDefect;
pub use serving::ServingHolder;
pub use template::TemplateProblem;
pub use why::{AdminNameTaken, NeedsForce, Unrenewable};
pub use wording::LISTEN_FLAG;

use crate::decision::Refusal;
use std::path::PathBuf;
use vouch_derive::{Hint, Message};
use wording::{
    crl_not_from_bundle, current_missing, io_hint, listen_hint, listen_message, no_ca_hint, policy_hint,
    reconcile_crl_not_written, staged_note, store_hint, CRL_AFTER_REVOCATION,
};

/// A command failed. Each variant has a message and a hint.
#[derive(Debug, Message, Hint)]
#[hint(optional)]
#[non_exhaustive]
pub enum Error {
    #[message("cannot {op} {}: {source}", path.display())]
    #[hint(with = Some(io_hint(source)))]
    Io { path: PathBuf, op: &'static str, source: std::io::Error },
    #[message("{} already exists; refusing to overwrite it", path.display())]
    #[hint = "choose another path, or move the existing file away first"]
    AlreadyExists { path: PathBuf },
    #[message("no CA in {}{}", dir.display(), staged_note(staged))]
    #[hint(with = Some(no_ca_hint(staged)))]
    NoCa { dir: PathBuf, staged: Option<PathBuf> },
    /// The data directory cannot be used: not a directory, or closed to this user.
    #[message("cannot use {} as the CA's data directory: {detail}", dir.display())]
    #[hint = "point --dir / VOUCH_DIR at the CA's data directory, and run vouch as the user that owns it \
              (or root)"]
    DataDir { dir: PathBuf, detail: String },
    #[message = "{_0}"]
    #[hint(with = Some(policy_hint(_0)))]
    Policy(crate::policy::PolicyError),
    #[message("no policy found (tried {})",
              tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    #[hint = "pass --policy FILE, or set VOUCH_POLICY or VOUCH_DIR"]
    PolicyNotFound { tried: Vec<PathBuf> },
    #[message("private key {}: {detail}", path.display())]
    #[hint = "give the PEM private key (PKCS#8, PKCS#1 or SEC1) that belongs to the certificate"]
    Key { path: PathBuf, detail: String },
    #[message("certificate {}: {detail}", path.display())]
    #[hint = "give a PEM or DER X.509 certificate"]
    Cert { path: PathBuf, detail: String },
    #[message = "classification {source}: {error}"]
    #[hint(with = Some(error.hint().unwrap_or("write a YAML mapping with classes, parameters and/or environment")))]
    Classification { source: String, error: crate::vouching::classification::ClassificationError },
    #[message("attributes file {}: {detail}", path.display())]
    #[hint = "give the file written by 'vouch conductor sign' (yaml, txt, json or cloud-config)"]
    Attributes { path: PathBuf, detail: String },
    #[message = "expiry: {detail}"]
    #[hint = "use --expires-in 30m|2h|1d or --expires 2030-01-01T00:00:00Z"]
    Expiry { detail: String },
    #[message = "{detail}"]
    #[hint = "see vouch --help"]
    Usage { detail: String },
    /// `vouch bench serve`: every certificate of a level failed (the figures would mean nothing).
    #[message = "no certificate was served at {agents} agents: {cause}"]
    #[hint = "check --addr (is the service listening?), --host (a name on its certificate) and --ca-bundle"]
    BenchNothingServed { agents: usize, cause: String },
    /// Neither --dir nor VOUCH_DIR, and no usable base for the default data directory (a
    /// user other than root whose HOME is relative or unset, with no absolute XDG_DATA_HOME).
    #[message = "no data directory to use: {why} (a relative one would name a directory under the current one)"]
    #[hint = "give the data directory with --dir DIR or VOUCH_DIR=DIR (an absolute path); the default, \
              $XDG_DATA_HOME/vouch or ~/.local/share/vouch, needs an absolute XDG_DATA_HOME or HOME"]
    NoDataDir { why: String },
    #[message = "cryptographic operation failed: {detail}"]
    #[hint(with = None)]
    Crypto { detail: String },
    #[message = "CA store: {detail}"]
    #[hint(with = Some(store_hint(detail)))]
    Store { detail: String },
    /// The store's inventory (`DIR/ca/inventory.txt`) cannot be read by the user vouch runs
    /// as (its owner or mode): the store cannot be opened for writing (its log replayed).
    #[message("CA store: the inventory cannot be read (cannot {op} {}: {source})", path.display())]
    #[hint = "give the user vouch runs as read access to DIR/ca/inventory.txt (its owner or mode: vouch writes it \
              0644), then retry; nothing needs restoring (`vouch store verify` names it as inventory-unreadable)"]
    InventoryUnreadable { path: PathBuf, op: &'static str, source: std::io::Error },
    /// A certname's stored certificate is not its own (another node's record, serial or
    /// CN, or no certificate at all): the store is damaged, and only a restore repairs it.
    #[message = "CA store: the certificate stored for {certname} is not its own ({what}): the store is damaged; \
                 nothing was changed"]
    #[hint = "running the command again cannot help: `vouch store verify` names the damaged entry; restore the certname's \
              certificate (DIR/ca/signed/CERTNAME.pem and its record) from a backup of DIR/ca, or from the \
              node's own copy (its first PEM block only), then run the command again; to revoke a certificate \
              whatever its file holds: `vouch revoke --serial SERIAL`"]
    StoreDamaged {
        certname: String,
        /// What is wrong with it (as `vouch store verify` would name it).
        what: String,
    },
    /// The store lists `certname` (its inventory line, `vouch list`) but its current
    /// certificate is missing from the store (DIR/ca/signed/NAME.pem deleted).
    #[message("{}", current_missing(certname, serial, file))]
    #[hint = "`vouch store verify` names it (current-missing); restore DIR/ca/signed/CERTNAME.pem from the \
              node's own copy (its first PEM block only) or from a backup of DIR/ca, then run the command again; \
              to revoke it without a restore: `vouch revoke --serial SERIAL` (the serial above)"]
    CurrentMissing {
        certname: String,
        serial: String,
        /// Where the store keeps it (the file store's path), for the message.
        file: Option<PathBuf>,
    },
    /// Standard output's reader went away (a closed pipe: `vouch list --all | head -1`):
    /// the command ends quietly with [`crate::cli::EXIT_PIPE`], as a process killed by
    /// SIGPIPE would (vouch never dies of SIGPIPE: `vouch serve` writes to sockets).
    #[message = "cannot write stdout: its reader closed it (a pipe whose reader exited)"]
    #[hint = "the reader of vouch's output exited before reading all of it: read all of it, or write it to \
              a file (--out FILE where the command has one)"]
    StdoutClosed,
    /// The shared store cannot be reached: nothing was decided or written (`vouch serve`
    /// answers 503 with Retry-After; the agent retries).
    #[message = "CA store unavailable: {detail}"]
    #[hint = "nothing was issued or changed: start (or reach) the LDAP server and retry; a running vouch \
              serve answers 503 meanwhile and resumes by itself, one that cannot start exits 75 (the \
              systemd unit restarts it)"]
    StoreUnavailable { detail: String },
    /// A change stored on the primary LDAP server that a `--store-replica` did not show in
    /// time (`--store-confirm-replicas`): exit 75, 503; the same command confirms it.
    #[message = "CA store change not confirmed on the replicas: {detail}"]
    #[hint = "the change is stored on the primary but not yet on every replica (a failover now could lose \
              it): once the replica answers, run the same command again (it confirms what is stored and \
              changes nothing twice); a running vouch serve answers 503 and the agent retries"]
    StoreUnconfirmed { detail: String },
    /// A refused request not kept: the store's or the client address's bound (crate::limits).
    #[message = "{_0}"]
    #[hint(with = Some(_0.hint()))]
    Limited(crate::limits::Limited),
    /// Another master held what the command waited for, past its bounded wait: exit 75, 503.
    #[message = "{_0}"]
    #[hint(with = Some(_0.hint()))]
    Busy(Busy),
    /// A concurrent change won a compare-and-swap on the shared store: nothing was written.
    #[message = "{what}; nothing was written"]
    #[hint = "read the current state again ('vouch override show NAME' for an override, 'vouch list --all' \
              for certificates) and retry with what it shows"]
    StoreConflict { what: String },
    /// A command without `--store` on the data directory of a master that uses a shared
    /// store (`DIR/ca/MOVED-TO-SHARED-STORE`): its file store is retired; nothing was read
    /// or written.
    #[message("{} is the data directory of a master of the shared store {to}: its file store is retired, and \
               this command would answer from (and write to) that empty file store; nothing was read or written",
              dir.display())]
    #[hint = "give the store as the master's vouch serve does: --store URL or VOUCH_STORE=URL (with its \
              --ldap-bind-dn and --ldap-password-file, or VOUCH_LDAP_*); only if this directory left the \
              shared store for good, remove DIR/ca/MOVED-TO-SHARED-STORE (docs/data-directory.md)"]
    FileStoreRetired { dir: PathBuf, to: String },
    /// `vouch revoke` / `vouch clean` of a master's service certname or of the last valid
    /// administrator certificate, without `--force`: nothing was revoked.
    #[message = "{certname} {why}; nothing was revoked"]
    #[hint(with = Some(why.hint()))]
    NeedsForce { certname: String, why: NeedsForce },
    /// `--store` or an LDAP option cannot be used.
    #[message = "store: {detail}"]
    #[hint = "docs/ldap.md lists the --store URL forms (files, ldap://, ldaps:// with --ldap-ca, ldapi://) \
              and the --ldap-* options"]
    StoreUrl { detail: String },
    /// The LDAP server refused or failed an operation for a reason other than being down
    /// (access, limits, schema, a damaged entry, a TLS certificate it presents).
    #[message = "LDAP store: {detail}"]
    #[hint = "check the server's log, the bind DN's rights (slapd's ACL, 389 Directory Server's ACI) and \
              search limits, and that the server has vouch's schema (docs/ldap.md)"]
    StoreLdap { detail: String },
    #[message = "no certificate for {certname}"]
    #[hint = "'vouch list --all' shows the certificates this CA knows"]
    NotFound { certname: String },
    /// `vouch revoke --serial`: not a serial as a certificate carries one (hex, at most 20 octets).
    #[message = "{given:?} is not a certificate serial (hex digits, at most 40, colons allowed)"]
    #[hint = "give the serial as 'openssl x509 -noout -serial' prints it (serial=43A4...) or as \
              'vouch list --all' does (43a4...)"]
    SerialInvalid { given: String },
    /// `vouch revoke --serial`: no record and no inventory line of this CA has the serial.
    #[message = "this CA has no record of serial {serial} (no serial record, no inventory line)"]
    #[hint = "check the serial against the certificate ('openssl x509 -noout -serial -issuer'): one \
              another CA issued is revoked by that CA; 'vouch list --all' shows this CA's current ones"]
    SerialUnknown { serial: String },
    /// `vouch revoke --serial`: the serial is no certificate of this CA but a conductor the
    /// root issued (`root_issued.txt` records it, or the service's own conductor).
    #[message = "serial {serial} is {what}, which the root issued, not this master CA: this CA's CRL cannot revoke \
                 it, the root's CRL does; `vouch conductor revoke --serial {serial}` revokes it; nothing was revoked"]
    #[hint = "run `vouch conductor revoke` where the root key is (the root's data directory), then copy its \
              ca/root_crl.pem to the masters without it"]
    SerialIsConductor {
        serial: String,
        /// The conductor, in words.
        what: String,
    },
    /// `vouch revoke --serial`: the serial was reserved, never issued (nothing to revoke).
    #[message = "serial {serial} ({certname}) was never issued: its record says {state} (reserved before \
                 signing; no certificate carries it)"]
    #[hint = "nothing to revoke: no certificate with this serial exists"]
    SerialNeverIssued { serial: String, certname: String, state: String },
    /// A certname that fails the certname rules (it would become a file name).
    #[message = "{certname:?} is not a valid certname: {problem}"]
    #[hint = "a certname is a lowercase host name: letters, digits, '.', '-' and '_', no empty label \
              (so no '/' and no '..'), no wildcard, no trailing dot; e.g. web01.example.com"]
    CertnameInvalid { certname: String, problem: crate::decision::CertnameProblem },
    #[message = "{certname} has no valid certificate: {detail}"]
    #[hint = "a revoked, expired or foreign certificate has no classification here"]
    NotValid { certname: String, detail: String },
    /// `vouch renew NAME` (or a node's renewal over the API): NAME's current certificate is
    /// not one that renews.
    #[message = "cannot renew {certname}: its certificate (serial {serial}) {why}"]
    #[hint(with = Some(why.hint()))]
    NotRenewable { certname: String, serial: String, why: Unrenewable },
    /// `vouch admin new NAME`: NAME cannot be an administrator's; nothing was written.
    #[message = "refusing to make an administrator certificate for {name}: {why}; nothing was written"]
    #[hint(with = Some(why.hint()))]
    AdminNameRefused { name: String, why: AdminNameTaken },
    /// `vouch approve NAME` (an administrator's approval): nothing was issued.
    #[message = "cannot approve {certname}: {why}; nothing was issued"]
    #[hint(with = Some(why.hint()))]
    NotApproved { certname: String, why: NotApprovable },
    /// A command that must pass a policy check was refused (renewal); exit 1 with the reasons.
    #[message("{certname}: refused: {}", refused.tagged_reasons().join("; "))]
    #[hint(with = refused.reasons.first().map(Refusal::hint))]
    Refused { certname: String, refused: Box<crate::decision::Refused> },
    /// Puppet Server's CA directory (hook mode) is unusable.
    #[message("Puppet Server CA file {}: {detail}", path.display())]
    #[hint = "point --puppet-cadir at Puppet Server's cadir ('puppet config print cadir --section server'); \
              it holds ca_crt.pem, ca_crl.pem and signed/"]
    PuppetCa { path: PathBuf, detail: String },
    /// `vouch import --puppet-cadir`: the Puppet CA directory cannot be taken over as it is;
    /// nothing was written.
    #[message("cannot import the Puppet CA in {}: [{}] {defect}; nothing was written", cadir.display(), defect.code())]
    #[hint(with = Some(defect.hint()))]
    PuppetImport { cadir: PathBuf, defect: PuppetCaDefect },
    /// `vouch conductor sign --template`: nothing was signed or written.
    #[message("cannot sign the template: [{}] {problem}{}; nothing was written", problem.code(),
              policy.as_ref().map(|p| format!(" (policy {})", p.display())).unwrap_or_default())]
    #[hint(with = Some(problem.hint()))]
    Template { problem: TemplateProblem, policy: Option<PathBuf> },
    /// A command given what it cannot take, where the plain reading would mislead.
    #[message = "{_0}"]
    #[hint(with = Some(_0.hint()))]
    Mistake(Mistake),
    /// The CA service at `--ca-url` could not be asked, or answered what vouch cannot use
    /// (`vouch enc --ca-url`, `vouch crl --fetch`).
    #[message = "the CA at {url}: {detail}"]
    #[hint = "check --ca-url (https://HOST:PORT of vouch serve, as the agents' ca_server/ca_port), that vouch \
              serve runs there, and that --cacert is its CA bundle (GET /puppet-ca/v1/certificate/ca)"]
    Remote { url: String, detail: String },
    /// `vouch crl --fetch` was answered a CRL older (lower CRL number) than the one of the
    /// same issuer in the file it would replace: a rollback, refused.
    #[message("the CA at {url} answered a CRL of {issuer} numbered {fetched}, older than the one in {} \
               (number {current}): refusing to roll the CRL back; {} is unchanged", path.display(), path.display())]
    #[hint = "an older CRL may miss revocations: check that --ca-url is the fleet's current CA (not a \
              restored backup or another master) and fetch again; remove the file only if you know why it is newer"]
    CrlRollback { url: String, path: PathBuf, issuer: String, fetched: String, current: String },
    /// A CRL a certificate's chain needs is missing: `source` (a CRL file, a cache or the CA's
    /// answer) holds no CRL that `ca` of the bundle signed (`None`: no CRL any CA of the bundle
    /// signed); `foreign` are the issuers of the CRLs there that no CA of the bundle signed
    /// (another CA's: rebuilt, restored, or a master the bundle does not hold).
    #[message("{}", crl_not_from_bundle(source, ca, bundle, foreign))]
    #[hint = "the CRLs and --cacert come from different CAs: if the CA was rebuilt or restored, or a master \
              joined, take its bundle again (GET /puppet-ca/v1/certificate/ca) into --cacert; check that \
              --ca-url is that CA (or a master of its fleet); a --crl file is refreshed by `vouch crl --fetch`"]
    CrlNotFromBundle { source: String, ca: Option<String>, bundle: PathBuf, foreign: Vec<String> },
    /// Puppet Server's CA has not signed this certname.
    #[message("Puppet Server's CA has not signed {certname} (no {})", path.display())]
    #[hint = "'puppetserver ca list' shows pending requests; the autosign hook's reasons are in the server log"]
    PuppetCaNotSigned { certname: String, path: PathBuf },
    /// `vouch serve` cannot listen on its address (checked before anything is created).
    #[message("{}", listen_message(addr, flag, source))]
    #[hint(with = Some(listen_hint(flag, source)))]
    Listen {
        addr: std::net::SocketAddr,
        /// The flag that gave the address: `--listen` or `--metrics-listen`.
        flag: &'static str,
        source: std::io::Error,
    },
    /// A file or directory vouch trusts (data directory, `ca/`, policy, CA key) that
    /// another user could change.
    #[message("refusing to trust {}: it {}; fix: {}", _0.path.display(), _0.problem, _0.fix)]
    #[hint = "vouch refuses a data directory, policy, key or classifier cache that a user other than root or itself \
              could change: follow the fix shown (as root), or move the files"]
    Untrusted(crate::files::trust::Untrusted),
    /// An output path vouch will not write (a symbolic link, a directory).
    #[message("cannot write {}: {detail}", path.display())]
    #[hint = "give the path of a regular file (new or existing), a device or a FIFO, or - for stdout"]
    Output { path: PathBuf, detail: String },
    /// A certificate request file (`--csr`) vouch cannot read a certname from.
    #[message("certificate request {}: {detail}", path.display())]
    #[hint = "give the PEM or DER certificate request a Puppet agent or 'vouch csr' wrote"]
    Csr { path: PathBuf, detail: String },
    /// A step failed after the command had already changed something (issued, revoked,
    /// written a key): what was done and where to find it, then the failure.
    #[message = "{done}; then: {error}"]
    #[hint = "what the message says was done stands: do not run the command again unless the message says to \
              (it would issue, renew or revoke again); fix the cause named after 'then:' (a path that cannot be written, a full disk) \
              and take the result from where the message says it is"]
    Partial { done: String, error: Box<Error> },
    /// A step failed, but nothing that was done stands in the way of running the command
    /// again, which is how to finish it: a key written first and removed again when what
    /// pairs with it could not be written (`csr`, `conductor new`), a `reconcile` that stopped
    /// part way (running it again does the rest, nothing twice).
    #[message = "{done}; then: {error}"]
    #[hint = "fix the cause named after 'then:' (a path that cannot be written, a full disk) and run the command \
              again: what was done before it stopped is not done twice (a key file the message says was left \
              without its pair: remove it first)"]
    Unfinished { done: String, error: Box<Error> },
    /// `vouch revoke` / `vouch clean`: the revocation is stored (the certificate IS revoked,
    /// `vouch list --all` shows it so), but the CRL could not be written after it, so relying
    /// parties do not see it yet. Exit [`crate::cli::EXIT_REVOKED_CRL_NOT_WRITTEN`].
    #[message("{certname} (serial {serial}) IS revoked{}: the revocation is stored, but the CRL could not be \
               written after it, so the published CRL does not list it yet: {error}",
              if *cleaned { " and cleaned" } else { "" })]
    #[hint(with = Some(CRL_AFTER_REVOCATION))]
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
    #[message("{}", reconcile_crl_not_written(*revoked, named, *cleaned, *requests_dropped, error))]
    #[hint(with = Some(CRL_AFTER_REVOCATION))]
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
    #[message = "{certname} was renewed (serial {serial}) and its old certificate (serial {old_serial}) IS revoked \
                 (superseded), but the CRL could not be written after it, so the published CRL does not list the \
                 old certificate yet: {error}"]
    #[hint(with = Some(CRL_AFTER_REVOCATION))]
    RenewedCrlNotWritten { certname: String, serial: String, old_serial: String, error: Box<Error> },
    /// `vouch serve`: another process holds this data directory's serving lock (`who`, as recorded).
    #[message("{who} is running on {} ({holder}); nothing was changed", dir.display())]
    #[hint(with = Some(who.hint()))]
    ServeRunning { dir: PathBuf, holder: String, who: ServingHolder },
    /// `admin new --key-out`: not a path a new regular file can be created at (stdout, a
    /// device, a FIFO, a socket, a directory): the key would be lost, or not kept as a file,
    /// while the administrator's certificate stays valid in the store.
    #[message("refusing --key-out {}: {detail}; an administrator's private key is written only to a new file \
               (its certificate is kept in the store, so a key sent elsewhere could be lost while the \
               certificate stays valid); nothing was issued", path.display())]
    #[hint = "give --key-out the path of a file that does not exist yet, in an existing directory: vouch writes \
              the key there once, mode 0600, and keeps no copy"]
    KeyOutput { path: PathBuf, detail: String },
    /// `ca init --root-cert`: the certificate is no root a master CA can be made under.
    #[message("root CA certificate {}: {detail}", path.display())]
    #[hint = "give --root-cert the root CA's certificate (ca/root_crt.pem in the data directory of the first \
              'vouch ca init'): a self-signed CA certificate, valid now, that may sign certificates"]
    RootCa { path: PathBuf, detail: String },
    /// `ca init --root-key`: the key is not the root certificate's.
    #[message("private key {} does not belong to the root CA certificate {} (their public keys differ)",
              key.display(), cert.display())]
    #[hint = "give --root-key the root's own private key (ca/root_key.pem beside the ca/root_crt.pem given to \
              --root-cert); nothing was written"]
    RootKeyMismatch { cert: PathBuf, key: PathBuf },
    /// A command that signs with the root key, in a data directory without it (a master CA made
    /// with `ca init --root-key`, or a root key moved off the host).
    #[message("the root CA's key is not in {}: {} is missing (a master CA made with 'vouch ca init --root-cert \
               --root-key' never keeps it; an operator may also have moved it off this host)",
              dir.display(), key.display())]
    #[hint = "run this where the root key is: --dir the data directory holding ca/root_key.pem (a master CA \
              under the same root, with the default policy, trusts the conductors issued there)"]
    RootKeyElsewhere {
        dir: PathBuf,
        /// Where the key would be.
        key: PathBuf,
    },
    /// `vouch conductor revoke --cert FILE`: the certificate is not one this CA's root issued
    /// (another issuer, or a signature the root's key did not make).
    #[message("certificate {}: this CA's root ({root}) did not issue it: {detail}; nothing was revoked",
              path.display())]
    #[hint = "give the certificate `vouch conductor new` wrote in the data directory of this root (--dir); a \
              conductor of another root is revoked by that root's CA, whose CRL the policy lists in \
              conductors.crls"]
    ConductorNotOurs {
        path: PathBuf,
        /// The root's subject.
        root: String,
        detail: String,
    },
    /// `vouch conductor revoke --cert FILE`: the root issued it, but it is no conductor (no
    /// extended key usage 1.3.6.1.4.1.34380.2.0).
    #[message("certificate {} ({subject}, serial {serial}) is not a conductor's: it lacks the extended key usage \
               1.3.6.1.4.1.34380.2.0; nothing was revoked", path.display())]
    #[hint = "give the conductor's certificate (`openssl x509 -noout -ext extendedKeyUsage -in FILE` shows \
              1.3.6.1.4.1.34380.2.0); a node's certificate is revoked with `vouch revoke NAME`"]
    NotAConductor { path: PathBuf, subject: String, serial: String },
    /// `vouch conductor revoke`: the serial is a CA's (the root's own, or a master CA's):
    /// revoking it on the root's CRL is not this command's.
    #[message = "serial {serial} is {what}: `vouch conductor revoke` puts conductors on the root's CRL, never a CA \
                 (every certificate under it would fail the chain's revocation check); nothing was revoked"]
    #[hint = "check the serial: `openssl x509 -noout -serial -in CONDUCTOR.pem` prints a conductor's; to retire \
              a master CA, stop its service and have every node of it vouched for again under another master"]
    ConductorRevokeCa {
        serial: String,
        /// Which CA, in words.
        what: String,
    },
    /// `vouch conductor revoke --serial`: the serial is a certificate of this CA's store (a
    /// node's, the service's or an administrator's, which the master CA issued), not a
    /// conductor's.
    #[message = "serial {serial} is the certificate of {certname} in this CA's store, which the master CA issued (a \
                 node's, the service's or an administrator's), not a conductor: on the root's CRL it would revoke \
                 nothing; nothing was revoked. {instead}"]
    #[hint = "a conductor's serial is what `openssl x509 -noout -serial -in CONDUCTOR.pem` prints; a certificate \
              of this CA is revoked with `vouch revoke` (the message says what that does to this one)"]
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
    #[message("serial {serial} is not a conductor this data directory knows: {} records no conductor with it, no \
               current node's record names one, and it is not the service's own conductor; a serial alone cannot \
               tell a conductor from another master CA under this root (on the root's CRL, every node certificate \
               under that master would fail the chain's revocation check); nothing was revoked", issued.display())]
    #[hint = "give the conductor's certificate with --cert FILE: vouch checks that this root issued it, that it \
              is a conductor (extended key usage 1.3.6.1.4.1.34380.2.0) and that it is not a CA"]
    ConductorRevokeUnknownSerial {
        serial: String,
        /// `DIR/ca/root_issued.txt`.
        issued: PathBuf,
    },
    /// `vouch conductor publish-crl` without a shared store (`--store ldap://...`): a file
    /// store is this master's alone, and nothing travels through it.
    #[message = "the store is {store}, not a shared one: the root CRL travels to other masters only through a \
                 shared (LDAP) store; nothing was published"]
    #[hint = "give the fleet's shared store: `vouch --store ldap://HOST/BASE conductor publish-crl` (or set \
              VOUCH_STORE); a master on a file store gets the root CRL only as a copy of ca/root_crl.pem"]
    RootCrlNotShared { store: String },
    /// `vouch serve --server-name NAME` where NAME is a node's certname with a valid
    /// certificate in the store (any master's): the service would share its name with a node.
    #[message = "--server-name {name}: {name} is a node's certname, with a valid certificate (serial {serial}) a \
                 conductor vouched for; a service that carries it would share its name with that node; nothing was \
                 issued"]
    #[hint = "choose another --server-name (a load balancer's name the masters share must be no node's), or \
              revoke or clean that node first (`vouch revoke NAME`) if the name is the service's"]
    ServerNameOfANode { name: String, serial: String },
    /// `vouch serve --server-name NAME` where NAME is the certname (first name) of another
    /// master's service sharing the store: each master's first name is its own.
    #[message = "--server-name {name}: {name} is the certname of another master's service sharing this store; a \
                 service that carries it would answer as that master; nothing was issued"]
    #[hint = "give each master its own first --server-name; a name the masters share (the load balancer's) \
              comes after it, on every master (docs/ldap.md, 'One name, one load balancer')"]
    ServerNameOfAnotherMaster { name: String },
    /// `vouch conductor publish-crl` in a data directory without a root CRL.
    #[message("there is no root CRL to publish: {} does not exist; nothing was published", path.display())]
    #[hint = "run it where the root key is (--dir the data directory holding ca/root_key.pem): `vouch conductor \
              revoke` writes the root CRL there, and so does any command that touches the store (`vouch list`)"]
    RootCrlMissing { path: PathBuf },
    /// `vouch conductor publish-crl`: the local root CRL is no CRL signed by this directory's
    /// root (it would be refused by every master): not published.
    #[message("{} cannot be published: {detail}; every master would refuse it; nothing was published", path.display())]
    #[hint = "where the root key is, `vouch list` writes the root CRL again (signed by the root); then run \
              `vouch conductor publish-crl` again"]
    RootCrlNotPublishable { path: PathBuf, detail: String },
    /// `vouch conductor publish-crl` (and `conductor revoke` with a shared store): the shared
    /// store holds a root CRL of this root that lists conductors the local one does not (a
    /// data directory restored from a backup, or another copy of the root's): published, it
    /// would give their revocations back to the fleet. Not published.
    #[message("{} does not list {} conductor(s) the root CRL in {store} revokes (serial {}): published, it \
               would undo their revocation at every master; nothing was published (this data directory was \
               restored from a backup, or is another copy of the root's)",
              path.display(), serials.len(), serials.join(", "))]
    #[hint = "record each of those revocations here with `vouch conductor revoke --serial SERIAL` (the root CRL \
              is written again listing them), then run `vouch conductor publish-crl` again"]
    RootCrlDropsRevocations {
        path: PathBuf,
        store: String,
        /// The serials (lowercase hex) the store's lists and the local one does not.
        serials: Vec<String>,
    },
    /// `vouch conductor revoke` in a data directory without the root key (a further master,
    /// or a root key moved off the host): only the root key signs the root's CRL.
    #[message("the root CA's key is not in {}: {} is missing, and only the root key signs the root's CRL (a master \
               CA made with 'vouch ca init --root-cert --root-key' never keeps it; an operator may also have moved \
               it off this host); nothing was revoked", dir.display(), key.display())]
    #[hint = "run it where the root key is (--dir the data directory holding ca/root_key.pem), with the fleet's \
              shared store (--store ldap://...): every master sharing it takes the root CRL from there; a master \
              on a file store needs a copy of that directory's ca/root_crl.pem as its ca/root_crl.pem (or a copy \
              listed in conductors.crls of its policy)"]
    ConductorRevokeNoRootKey { dir: PathBuf, key: PathBuf },
    /// `vouch conductor revoke`: the revocation is recorded (`root_revocations.txt`), but the
    /// root CRL could not be written after it. Exit [`crate::cli::EXIT_REVOKED_CRL_NOT_WRITTEN`].
    #[message(
        "serial {serial} IS revoked: the revocation is recorded in ca/{}, but the root CRL could not be \
         written after it, so it does not list it yet: {error}",
        crate::policy::own_crl::ROOT_REVOCATIONS
    )]
    #[hint = "the revocation is recorded: fix the cause above, then run the same `vouch conductor revoke` again \
              (it writes the root CRL and records nothing twice); any command that touches the store writes it \
              too"]
    ConductorRevokedCrlNotWritten { serial: String, error: Box<Error> },
    /// Date arithmetic that leaves the range vouch can represent (years 1 to 9999).
    #[message = "date out of range: {detail}"]
    #[hint = "use a shorter duration (or, with --now, a date further from the year 9999)"]
    Date { detail: String },
    /// `vouch reconcile --inventory SOURCE`: SOURCE cannot be used (its form, its URL).
    #[message = "inventory {source:?}: {detail}"]
    #[hint = "give file:PATH (one certname a line), cmd:PROGRAM ARGS… (its output, one name a line) or \
              ldap:ldap://HOST:PORT/BASE?ATTRIBUTE?SCOPE?FILTER (docs/fleet-operations.md)"]
    InventorySource { source: String, detail: String },
    /// `vouch reconcile --inventory cmd:…`: the program failed (non-zero exit, a signal, no
    /// such program): nothing was changed.
    #[message = "the inventory command `{command}` failed: {detail}; nothing was changed"]
    #[hint = "run the command by hand and fix it (credentials, network, the cloud API); reconcile acts only \
              on an inventory read completely"]
    InventoryCommand { command: String, detail: String },
    /// `vouch reconcile`: the `cmd:` inventory program ran longer than --inventory-timeout.
    #[message = "the inventory command `{command}` did not finish within {after}: it was killed (with its \
                 process group); nothing was changed"]
    #[hint = "run the command by hand: it must print the names and exit (a program that waits, or a \
              background child keeping its output open, never ends); or raise --inventory-timeout"]
    InventoryTimeout { command: String, after: String },
    /// `vouch reconcile`: the inventory holds no name (a failing cloud API looks like this);
    /// refused without --force.
    #[message = "refusing to reconcile against an empty inventory ({source} gave no name) while the store \
                 holds {fleet} certificates: nothing was changed"]
    #[hint = "check the inventory source (did the cloud API fail?); if the fleet really is gone, add --force"]
    InventoryEmpty { source: String, fleet: u64 },
    /// `vouch reconcile --confirm`: more changes than --max-changes allows; refused without --force.
    #[message = "refusing to make {changes} changes: --max-changes {max} allows {limit} for a fleet of {fleet} \
                 certificates; nothing was changed"]
    #[hint = "review the dry run's list (vouch reconcile --inventory SOURCE -o json); if it is right, raise \
              --max-changes (N or P%) or add --force"]
    TooManyChanges { changes: u64, limit: u64, fleet: u64, max: String },
    /// `vouch purge NAME`: no entry of the store has that generated name (now).
    #[message("no entry of the store is named {}: nothing was removed", names.join(", "))]
    #[hint = "the names are those 'vouch reconcile' lists under junk, now: run it again and copy them"]
    PurgeUnknown { names: Vec<String> },
    /// `vouch audit`: the policy keeps no audit log and no FILE was given.
    #[message("the policy {} keeps no audit log ([audit] log)", policy.display())]
    #[hint = "name the log: vouch audit verify FILE…, or set [audit] log in the policy"]
    NoAuditLog { policy: PathBuf },
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
