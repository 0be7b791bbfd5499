//! First run of `vouch serve`: whatever the data directory lacks — the CA, the
//! policy, a conductor credential to start with, the service's certificate, an
//! administrator's certificate — is created; nothing that exists is overwritten.

use super::ServeOptions;
use crate::authority::{Authority, LocalSpec};
use crate::error::Error;
use crate::issuance::bootstrap::{
    self, ConductorSpec, DataDir, ADMIN_CERT, ADMIN_KEY, CONDUCTOR_CERT, CONDUCTOR_KEY, SERVER_CERT, SERVER_KEY,
};
use crate::issuance::certificate::LocalRole;
use crate::store::State;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// Present from the start of `vouch serve`'s first run (before the CA is made) until
/// every credential of that run exists.
pub const FIRST_RUN_MARKER: &str = ".first-run-unfinished";
/// The administrator certificate's certname.
pub const ADMIN_NAME: &str = "vouch-admin";
/// The service certificate is renewed at start when it has less than this left.
const SERVER_RENEW_BEFORE: time::Duration = time::Duration::days(30);

/// What `prepare` found or made, for the start-up banner.
#[derive(Debug, Clone)]
pub struct SetupReport {
    pub dir: PathBuf,
    pub created_ca: bool,
    pub root_fingerprint: String,
    /// SHA-256 of the CA bundle as served: what an agent's `ca_fingerprint` setting is compared with.
    pub bundle_fingerprint: String,
    /// With a shared store: how many master CAs the fleet's bundle names (this one among them).
    pub fleet_masters: Option<usize>,
    pub policy: PathBuf,
    pub conductor: Option<(PathBuf, PathBuf)>,
    pub admin: Option<(PathBuf, PathBuf)>,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub server_certname: String,
    pub server_names: Vec<String>,
    /// What this start finished or found missing that an earlier start should have made
    /// (one line each, for the banner): every credential step is completed on the next start.
    pub notes: Vec<String>,
}

fn io(path: &Path, op: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io { path, op, source }
}

fn mkdir_private(dir: &Path) -> Result<(), Error> {
    bootstrap::create_private_dir(dir)
}

/// Writes a certificate and its key (0600) as a pair, replacing older ones: key first,
/// so a crash leaves at worst a key whose certificate is missing (made again next start).
fn write_pair(cert: &Path, cert_pem: &str, key: &Path, key_pem: &str) -> Result<(), Error> {
    if let Some(parent) = cert.parent() {
        mkdir_private(parent)?;
    }
    crate::files::durable::write_replace(key, key_pem.as_bytes(), 0o600).map_err(io(key, "write"))?;
    crate::files::durable::write_replace(cert, cert_pem.as_bytes(), 0o644).map_err(io(cert, "write"))
}

/// Writes a new private key (0600) where none is; never replaces one.
fn write_new_key(path: &Path, key: &rcgen::KeyPair) -> Result<(), Error> {
    if let Some(parent) = path.parent() {
        mkdir_private(parent)?;
    }
    crate::files::durable::write_new(path, key.serialize_pem().as_bytes(), 0o600).map_err(io(path, "write"))
}

/// Writes a certificate where none is; never replaces one.
fn write_new_cert(path: &Path, pem: &str) -> Result<(), Error> {
    crate::files::durable::write_new(path, pem.as_bytes(), 0o644).map_err(io(path, "write"))
}

fn read_key(path: &Path) -> Result<rcgen::KeyPair, Error> {
    let text = crate::files::input::read_path_text(path, crate::files::input::Kind::Key).map_err(io(path, "read"))?;
    crate::issuance::keys::load_pem(&text).map_err(|detail| Error::Key { path: path.to_path_buf(), detail })
}

/// How a start left a credential (a certificate and its key under DIR).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// Both files were there: nothing touched.
    Found,
    /// Neither was there: a new key, then its certificate.
    Created,
    /// The key was there without its certificate (a start interrupted between the two):
    /// its certificate is written now.
    Completed,
    /// Not made, and why (one banner line).
    Missing(String),
}

/// The starting conductor credential: made when missing, finished when a start was
/// interrupted after its key (the key is written first), never replaced.
fn conductor_credential(
    dir: &DataDir,
    cert: &Path,
    key: &Path,
    opts: &ServeOptions,
    now: OffsetDateTime,
) -> Result<Step, Error> {
    let spec = ConductorSpec { name: "conductor", key_type: opts.key_type, days: 365 };
    match (cert.exists(), key.exists()) {
        (true, true) => Ok(Step::Found),
        (true, false) => Ok(Step::Missing(format!(
            "{} has no key beside it ({} is missing): it cannot sign; remove the certificate to have a new \
             conductor credential made at the next start, or make one with 'vouch conductor new'",
            cert.display(),
            key.display()
        ))),
        (false, true) => {
            let k = read_key(key)?;
            let (pem, _) = bootstrap::new_conductor_for_key(dir, &spec, &k, now)?;
            write_new_cert(cert, &pem)?;
            Ok(Step::Completed)
        }
        (false, false) => {
            let k = opts.key_type.generate().map_err(|e| Error::Crypto { detail: e.to_string() })?;
            write_new_key(key, &k)?;
            let (pem, _) = bootstrap::new_conductor_for_key(dir, &spec, &k, now)?;
            write_new_cert(cert, &pem)?;
            Ok(Step::Created)
        }
    }
}

/// The administrator credential: made when vouch-admin has no certificate; finished when a
/// start was interrupted after its key (the certificate from the store if it was issued for
/// that key, else issued now); never replaced, and never superseding a vouch-admin
/// certificate whose key is elsewhere.
fn admin_credential(
    auth: &Authority,
    cert: &Path,
    key: &Path,
    opts: &ServeOptions,
    now: OffsetDateTime,
) -> Result<Step, Error> {
    let current = auth.certificate(ADMIN_NAME)?;
    let valid = current.as_ref().filter(|(rec, _)| {
        rec.state == State::Issued && crate::encoding::time::parse_rfc3339(&rec.not_after).ok().is_some_and(|t| t > now)
    });
    let admin = AdminCredential { auth, cert, key, key_type: opts.key_type, now, valid };
    match (cert.exists(), key.exists()) {
        (true, true) => Ok(admin.found()),
        (true, false) => Ok(Step::Missing(format!(
            "{} has no key beside it ({} is missing): remove the certificate and revoke {ADMIN_NAME} ('vouch revoke \
             {ADMIN_NAME}') to have a new one made at the next start, or make one with 'vouch admin new NAME'",
            cert.display(),
            key.display()
        ))),
        (false, true) => admin.key_only(),
        (false, false) => admin.neither(),
    }
}

/// The administrator credential's files, and vouch-admin's current, valid certificate in
/// the store (its record and PEM), if it has one.
struct AdminCredential<'a> {
    auth: &'a Authority,
    cert: &'a Path,
    key: &'a Path,
    key_type: crate::issuance::keys::KeyType,
    now: OffsetDateTime,
    valid: Option<&'a (crate::store::CertRecord, String)>,
}

impl AdminCredential<'_> {
    fn spec(&self) -> LocalSpec<'static> {
        LocalSpec {
            certname: ADMIN_NAME,
            role: LocalRole::Admin,
            dns_names: &[],
            ip_addresses: &[],
            key_type: self.key_type,
            replace: false,
        }
    }

    /// Both files are present, but is the certificate still vouch-admin's current, valid one?
    fn found(&self) -> Step {
        let der = |pem: &[u8]| crate::encoding::pem::find(pem, &["CERTIFICATE"]).ok().map(|(_, d)| d);
        let file = std::fs::read(self.cert).ok().and_then(|p| der(&p));
        let current = self.valid.and_then(|(_, pem)| der(pem.as_bytes()));
        if file.is_some() && file == current {
            Step::Found
        } else {
            Step::Missing(format!(
                "the administrator credential {} is no longer {ADMIN_NAME}'s valid certificate (revoked, \
                 expired or replaced): it is refused (403); remove it and its key to have a new one made at \
                 the next start, or make another administrator with 'vouch admin new NAME'",
                self.cert.display()
            ))
        }
    }

    /// The key without its certificate (a start interrupted between the two): the store's
    /// certificate if it was issued for this key, else one issued now unless vouch-admin
    /// has a valid one for another key.
    fn key_only(&self) -> Result<Step, Error> {
        let k = read_key(self.key)?;
        let Some((rec, pem)) = self.valid else {
            let issued = self.auth.issue_local_for_key(&self.spec(), &k, self.now)?;
            write_new_cert(self.cert, &issued.pem)?;
            return Ok(Step::Completed);
        };
        let spki = rcgen::PublicKeyData::subject_public_key_info(&k);
        let issued_for = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"]).ok().and_then(|(_, der)| {
            x509_parser::parse_x509_certificate(&der).ok().map(|(_, c)| c.public_key().raw.to_vec())
        });
        if issued_for.is_some_and(|old| crate::encoding::csr::same_key(&old, &spki)) {
            write_new_cert(self.cert, pem)?;
            Ok(Step::Completed)
        } else {
            Ok(Step::Missing(format!(
                "{} has no certificate, and {ADMIN_NAME}'s current certificate (serial {}) is for \
                 another key, held elsewhere: nothing was replaced; revoke it ('vouch revoke \
                 {ADMIN_NAME}') to have one issued for this key at the next start, or make another \
                 administrator with 'vouch admin new NAME'",
                self.key.display(),
                rec.serial
            )))
        }
    }

    /// Neither file: a new key and certificate, unless vouch-admin has a valid certificate.
    fn neither(&self) -> Result<Step, Error> {
        // Issued before and still valid (its files moved elsewhere): never a second one
        // silently. A revoked or expired one holds nothing: a new one is made below.
        if let Some((rec, _)) = self.valid {
            // A shared store: the name is another master's administrator, not a lost one.
            if let Some(other) = rec.issuer.as_ref().filter(|i| **i != self.auth.ca_id()) {
                return Ok(Step::Missing(format!(
                    "no administrator credential in {}: {ADMIN_NAME} is the administrator of another master \
                     sharing this store (master CA {other}), and an administrator of any master of the fleet is \
                     one at every master, so none was made here; 'vouch admin new NAME' makes another",
                    self.cert.parent().unwrap_or(self.cert).display(),
                )));
            }
            return Ok(Step::Missing(format!(
                "no administrator credential in {}: {ADMIN_NAME} already has a valid certificate (serial {}, \
                 held elsewhere), so none was made; revoke it ('vouch revoke {ADMIN_NAME}') to have a new one \
                 made at the next start, or make another administrator with 'vouch admin new NAME'",
                self.cert.parent().unwrap_or(self.cert).display(),
                rec.serial,
            )));
        }
        let k = self.key_type.generate().map_err(|e| Error::Crypto { detail: e.to_string() })?;
        write_new_key(self.key, &k)?;
        let issued = self.auth.issue_local_for_key(&self.spec(), &k, self.now)?;
        write_new_cert(self.cert, &issued.pem)?;
        Ok(Step::Created)
    }
}

/// Whether the CA in `dir` was never used: nothing issued, the store's lock never taken
/// (only `ca init`'s files are there).
fn never_used(dir: &DataDir) -> bool {
    ["serials", "signed", "inventory.txt", "wal.log", ".lock", "ca_crl.pem"].iter().all(|f| !dir.file(f).exists())
}

/// The names for the service certificate: the operator's, else the host name and localhost,
/// always with the loopback addresses.
pub fn server_names(opts: &ServeOptions) -> (Vec<String>, Vec<IpAddr>) {
    let mut dns = Vec::new();
    let mut ips: Vec<IpAddr> = Vec::new();
    let wanted: Vec<String> = if opts.server_names.is_empty() {
        crate::authority::host_name().into_iter().chain(["localhost".to_string()]).collect()
    } else {
        opts.server_names.clone()
    };
    for n in wanted {
        match n.parse::<IpAddr>() {
            Ok(ip) => ips.push(ip),
            Err(_) => {
                if !dns.contains(&n) {
                    dns.push(n)
                }
            }
        }
    }
    if dns.is_empty() {
        dns.push("localhost".into());
    }
    for ip in [IpAddr::from([127, 0, 0, 1]), IpAddr::from(std::net::Ipv6Addr::LOCALHOST)] {
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    if !opts.listen.ip().is_unspecified() && !ips.contains(&opts.listen.ip()) {
        ips.push(opts.listen.ip());
    }
    (dns, ips)
}

/// Whether the service certificate on disk is usable: present with its key, valid for
/// a while yet, current in the store, and naming everything asked for.
fn server_cert_ok(auth: &Authority, dir: &Path, dns: &[String], ips: &[IpAddr], now: OffsetDateTime) -> bool {
    let (cert, key) = (dir.join(SERVER_CERT), dir.join(SERVER_KEY));
    let Ok(pem) = std::fs::read(&cert) else { return false };
    if !key.exists() {
        return false;
    }
    let Ok((_, der)) = crate::encoding::pem::find(&pem, &["CERTIFICATE"]) else { return false };
    let Ok((_, c)) = x509_parser::parse_x509_certificate(&der) else { return false };
    if c.validity().not_after.to_datetime() - now < SERVER_RENEW_BEFORE {
        return false;
    }
    let serial = crate::encoding::hex(c.raw_serial());
    if !matches!(auth.store_record(&serial), Ok(Some(State::Issued))) {
        return false;
    }
    let mut have_dns = Vec::new();
    let mut have_ips = Vec::new();
    if let Ok(Some(san)) = c.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                x509_parser::extensions::GeneralName::DNSName(d) => have_dns.push(d.to_string()),
                x509_parser::extensions::GeneralName::IPAddress(b) => {
                    if let Ok(a) = <[u8; 4]>::try_from(*b) {
                        have_ips.push(IpAddr::from(a));
                    } else if let Ok(a) = <[u8; 16]>::try_from(*b) {
                        have_ips.push(IpAddr::from(a));
                    }
                }
                _ => {}
            }
        }
    }
    dns.iter().all(|d| have_dns.contains(d)) && ips.iter().all(|i| have_ips.contains(i))
}

/// Makes the data directory ready to serve.
pub fn prepare(opts: &ServeOptions) -> Result<SetupReport, Error> {
    let now = OffsetDateTime::now_utc();
    // The command line checked these already (clap); a library caller's ServeOptions gets
    // the same rule before anything is created.
    for n in &opts.server_names {
        crate::encoding::server_name::check_server_name(n)
            .map_err(|detail| Error::Usage { detail: format!("--server-name: {detail}") })?;
    }
    let dir = DataDir::new(&opts.dir);
    check_data_dir(&dir)?;
    hold_serving_lock(&dir.dir)?;
    let first_run = FirstRun::start(&dir, opts, now)?;
    let mut notes = Notes { created_ca: first_run.created_ca, lines: Vec::new() };
    complete_policy(&dir, first_run.created_ca, &mut notes)?;
    // Every step below is completed by the next start if this one is interrupted (a full
    // disk, a kill): what is missing is made, what is half made is finished, nothing that
    // exists is replaced, and the banner says what a start had to finish.
    // A conductor credential to start with (first run only).
    let conductor = (dir.dir.join(CONDUCTOR_CERT), dir.dir.join(CONDUCTOR_KEY));
    if first_run.unfinished {
        notes.add("the conductor credential", conductor_credential(&dir, &conductor.0, &conductor.1, opts, now)?);
    }
    let auth = Authority::open_with(&dir, &opts.store)?;
    // The CRLs are made here only if one is missing (a first run: agents fetch them at
    // once). One that is merely due (a revocation not on it yet, its refresh window
    // reached) is regenerated by the server's first maintenance run, just after it
    // listens: start-up does not wait for a CRL of every revocation (0.6 s at 100,000).
    let crls = [dir.file("ca_crl.pem"), dir.file(bootstrap::ROOT_CRL)];
    if crls.iter().any(|f| !f.exists()) {
        auth.maintain(now)?;
    }
    // No name of the service is a node's (any master's, with a shared store: the other
    // masters' service names are read first, and are no node's).
    if let Err(e) = auth.read_fleet_names() {
        tracing::warn!(event = "fleet-not-read", detail = %e);
    }
    for name in &opts.server_names {
        if let Some(serial) = auth.name_of_a_node(name, now)? {
            return Err(Error::ServerNameOfANode { name: name.clone(), serial });
        }
        if auth.another_masters_certname(name) {
            return Err(Error::ServerNameOfAnotherMaster { name: name.clone() });
        }
    }
    let served = server_credential(&auth, &dir, opts, now, &mut notes.lines)?;
    // Its names are reserved at every master of the fleet (the maintenance publishes it again
    // if this fails: whoever may write the store cannot keep a master from starting).
    if let Err(e) = auth.publish_service_certificate() {
        tracing::warn!(event = "service-certificate-not-published", detail = %e);
    }
    let admin = (dir.dir.join(ADMIN_CERT), dir.dir.join(ADMIN_KEY));
    notes.add("the administrator credential", admin_credential(&auth, &admin.0, &admin.1, opts, now)?);
    first_run.finish()?;
    // A shared store: the fleet's master CAs and CRLs, before the banner names the bundle.
    let fleet = match auth.store.shares_root_crl() {
        true => match auth.refresh_fleet(now) {
            Ok(f) => Some(f.siblings + 1),
            Err(e) => {
                tracing::warn!(event = "fleet-not-read", detail = %e, hint = "the maintenance reads it again every 5 s");
                Some(auth.fleet.get().len() + 1)
            }
        },
        false => None,
    };
    let credentials = Credentials { conductor, admin, served };
    report(&dir, first_run.created_ca, credentials, notes.lines, fleet)
}

/// Where the data directory itself cannot be locked (an NFS mount, whose flock on a
/// directory opened read-only may fail): the lock is taken on this file in it instead.
pub const SERVING_LOCK: &str = "serve.lock";

/// One `vouch serve` per data directory: a second one, started beside it (another
/// `--server-name`, another port), would issue its own service certificate and revoke the
/// running one's, and two first runs at once would race to make the CA. The exclusive
/// `flock` is on the data directory itself (no file of its own: nothing is created, and no
/// lock file can be removed from under the running server, as `rm DIR/serve.lock` could);
/// where a directory cannot be locked, on `DIR/serve.lock`. It is held until the process
/// ends (the system drops it even when the process is killed); a second process is
/// refused before it changes anything. Within one process (a library caller preparing
/// twice, under one path or two) the lock is taken once.
fn hold_serving_lock(dir: &Path) -> Result<(), Error> {
    use rustix::fs::{flock, FlockOperation};
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    static HELD: std::sync::Mutex<Vec<std::fs::File>> = std::sync::Mutex::new(Vec::new());
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    let mut path = dir.to_path_buf();
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(&path)
        .map_err(io(&path, "open"))?;
    for fallback in [false, true] {
        if fallback {
            path = dir.join(SERVING_LOCK);
            file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
                .open(&path)
                .map_err(io(&path, "open"))?;
            if !file.metadata().map_err(io(&path, "read"))?.is_file() {
                return Err(io(&path, "open")(std::io::Error::other("not a regular file")));
            }
        }
        let meta = file.metadata().map_err(io(&path, "read"))?;
        // The same directory under another path (a link to it, relative and absolute),
        // locked already by this process through another open file (a second flock on it
        // would be refused as if another process held it). The new descriptor is closed: an
        // flock belongs to the open file it was taken on, which stays open.
        let same = |m: &std::fs::Metadata| m.dev() == meta.dev() && m.ino() == meta.ino();
        if held.iter().any(|f| f.metadata().is_ok_and(|m| same(&m))) {
            return Ok(());
        }
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                held.push(file);
                return Ok(());
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(Error::ServeRunning { dir: dir.to_path_buf(), holder: crate::store::holder_of_file(&file) })
            }
            Err(e) if fallback => return Err(io(&path, "lock")(e.into())),
            Err(_) => {}
        }
    }
    Err(io(dir, "lock")(std::io::Error::other("no lock could be taken")))
}

/// A new data directory is private; an existing one (and ca/, the policy, every key vouch
/// keeps there) must be owned by root or this user and not writable by group or others:
/// the one rule of `crate::files::trust::check_trusted`, as for every other command.
fn check_data_dir(dir: &DataDir) -> Result<(), Error> {
    dir.usable()?;
    if !dir.dir.exists() {
        bootstrap::create_private_dir(&dir.dir)?;
    }
    crate::files::trust::check_trusted(&dir.dir)?;
    // A directory this user may not read (root's 0700 DIR, run as nobody) would look empty,
    // so a first run; say whose it is instead, as every other command does.
    for d in [dir.dir.clone(), dir.ca()] {
        if std::fs::read_dir(&d).is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied) {
            return dir.require(bootstrap::CA_CERT);
        }
    }
    if dir.ca().exists() {
        crate::files::trust::check_trusted(&dir.ca())?;
    }
    for key in [SERVER_KEY, ADMIN_KEY, CONDUCTOR_KEY] {
        let key = dir.dir.join(key);
        if key.exists() {
            crate::files::trust::check_private_key(&key)?;
        }
    }
    Ok(())
}

/// The first run's own steps (the CA, the conductor credential to start with) are marked
/// unfinished until they all are: a start after an interrupted first run completes them,
/// and only then. After it, a missing conductor credential is the operator's doing (the
/// README says to keep it, and the root key, off a production host): never made again.
struct FirstRun {
    marker: PathBuf,
    /// This start made the CA.
    created_ca: bool,
    /// This start is, or completes, the first run.
    unfinished: bool,
}

impl FirstRun {
    /// Makes the CA if there is none, marking the first run unfinished first.
    fn start(dir: &DataDir, opts: &ServeOptions, now: OffsetDateTime) -> Result<FirstRun, Error> {
        let marker = dir.dir.join(FIRST_RUN_MARKER);
        let created_ca = !dir.file(bootstrap::CA_CERT).exists();
        if created_ca {
            crate::files::durable::write_replace(
                &marker,
                b"vouch serve's first run has not finished: the next start completes it\n",
                0o600,
            )
            .map_err(io(&marker, "write"))?;
            bootstrap::init(dir, opts.key_type, now)?;
        }
        let unfinished = created_ca || marker.exists();
        Ok(FirstRun { marker, created_ca, unfinished })
    }

    /// Every credential of the first run exists: the marker goes.
    fn finish(&self) -> Result<(), Error> {
        if self.unfinished {
            match std::fs::remove_file(&self.marker) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&self.marker, "remove")(e)),
                _ => {}
            }
        }
        Ok(())
    }
}

/// The banner's lines on what this start had to finish or found missing.
struct Notes {
    /// A new CA: what it needs is made, not "completed".
    created_ca: bool,
    lines: Vec<String>,
}

impl Notes {
    fn add(&mut self, what: &str, step: Step) {
        match step {
            Step::Found => {}
            Step::Created if self.created_ca => {}
            Step::Created => self.lines.push(format!("completed: {what} was missing; a new one was made")),
            Step::Completed => self
                .lines
                .push(format!("completed: {what} had its key but no certificate; its certificate was written")),
            Step::Missing(why) => self.lines.push(format!("missing: {why}")),
        }
    }
}

/// `ca init` writes the policy just after the CA appears: a first run stopped between the
/// two left a CA that was never used. Its default policy is written now; a CA that has been
/// used (the store was ever locked or issued) never gets a default policy in place of a
/// lost one (it may have been stricter): that stays an error.
fn complete_policy(dir: &DataDir, created_ca: bool, notes: &mut Notes) -> Result<(), Error> {
    if !created_ca && !dir.policy().exists() && never_used(dir) {
        let text = crate::policy::default_policy_text(&format!("ca/{}", bootstrap::ROOT_CERT));
        crate::files::durable::write_new(&dir.policy(), text.as_bytes(), 0o644).map_err(io(&dir.policy(), "write"))?;
        notes.lines.push(format!(
            "completed: the policy was missing beside a CA never used (a first run that did not finish); \
             the default policy was written to {}",
            dir.policy().display()
        ));
    }
    Ok(())
}

/// The service's certificate as presented: its certname and every name on it.
struct Served {
    certname: String,
    names: Vec<String>,
}

/// The service certificate: issued again unless the one on disk is usable, then read back.
fn server_credential(
    auth: &Authority,
    dir: &DataDir,
    opts: &ServeOptions,
    now: OffsetDateTime,
    notes: &mut Vec<String>,
) -> Result<Served, Error> {
    let (dns, ips) = server_names(opts);
    let wanted_certname = dns.first().cloned().unwrap_or_else(|| "localhost".into());
    if !server_cert_ok(auth, &dir.dir, &dns, &ips, now) {
        let spec = LocalSpec {
            certname: &wanted_certname,
            role: LocalRole::Server,
            dns_names: &dns,
            ip_addresses: &ips,
            key_type: opts.key_type,
            replace: true,
        };
        if let Some((name, serial)) = renew_server_cert(auth, &dir.dir, &spec, now)? {
            notes.push(format!(
                "completed: the service certificate was issued again (the one in {} did not cover these names, was not \
                 valid or within 30 days of its end, or had no key); the one presented before ({name}, serial {serial}) is revoked \
                 (superseded)",
                dir.dir.join(SERVER_CERT).display()
            ));
        }
    }
    Ok(presented(&dir.dir, &wanted_certname, &dns, &ips))
}

/// Issues the service certificate as `spec` says and writes it with its new key. Returns the
/// certname and serial of the certificate presented until now if it was valid and is now
/// revoked (superseded).
fn renew_server_cert(
    auth: &Authority,
    dir: &Path,
    spec: &LocalSpec<'_>,
    now: OffsetDateTime,
) -> Result<Option<(String, String)>, Error> {
    let previous = served(dir);
    // Whether the store held it as valid (issued, not revoked), before this issuance.
    let was_valid = previous.as_ref().is_some_and(|(name, serial)| {
        matches!(auth.certificate(name), Ok(Some((rec, _))) if rec.serial == *serial && rec.state == State::Issued
            && crate::encoding::time::parse_rfc3339(&rec.not_after).is_ok_and(|t| t > now))
    });
    let (issued, key) = auth.issue_local(spec, now)?;
    write_pair(&dir.join(SERVER_CERT), &issued.pem, &dir.join(SERVER_KEY), &key)?;
    // The certificate presented until now, under another certname: its key is gone, so
    // nobody holds it any more; revoked, its names are free again (issue_local superseded
    // it already if the certname is the same).
    if let Some((old_name, old_serial)) = previous.as_ref().filter(|(n, _)| n != spec.certname) {
        if let Ok(Some((rec, _))) = auth.certificate(old_name) {
            if rec.serial == *old_serial && rec.state == State::Issued {
                auth.revoke(old_name, "superseded", false, now)?;
            }
        }
    }
    Ok(previous.filter(|_| was_valid))
}

/// What the service presents, as it is (its names are the reserved ones, whatever the flags).
fn presented(dir: &Path, wanted_certname: &str, dns: &[String], ips: &[IpAddr]) -> Served {
    match std::fs::read(dir.join(SERVER_CERT))
        .ok()
        .and_then(|pem| crate::encoding::pem::find(&pem, &["CERTIFICATE"]).ok())
    {
        Some((_, der)) => {
            let mut names: Vec<String> = Vec::new();
            for n in crate::authority::names_on_certificate(&der) {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
            Served { certname: names.first().cloned().unwrap_or_else(|| wanted_certname.to_string()), names }
        }
        None => Served {
            certname: wanted_certname.to_string(),
            names: dns.iter().cloned().chain(ips.iter().map(IpAddr::to_string)).collect(),
        },
    }
}

/// The credentials `prepare` leaves (each pair: certificate, key).
struct Credentials {
    conductor: (PathBuf, PathBuf),
    admin: (PathBuf, PathBuf),
    served: Served,
}

/// The banner's report: the fingerprints of the root and the bundle, the credentials present.
fn report(
    dir: &DataDir,
    created_ca: bool,
    credentials: Credentials,
    notes: Vec<String>,
    fleet_masters: Option<usize>,
) -> Result<SetupReport, Error> {
    let root = std::fs::read(dir.file(bootstrap::ROOT_CERT)).map_err(io(&dir.file(bootstrap::ROOT_CERT), "read"))?;
    let root_der = crate::encoding::pem::find(&root, &["CERTIFICATE"])
        .map(|(_, d)| d)
        .map_err(|e| Error::Cert { path: dir.file(bootstrap::ROOT_CERT), detail: e.to_string() })?;
    // The bundle served: the fleet's, where a shared store made one.
    let fleet_bundle = dir.file(crate::authority::masters::FLEET_BUNDLE);
    let served_bundle = match fleet_masters {
        Some(_) if fleet_bundle.exists() => fleet_bundle,
        _ => dir.file(bootstrap::CA_BUNDLE),
    };
    let bundle = std::fs::read(&served_bundle).map_err(io(&served_bundle, "read"))?;
    let Credentials { conductor, admin, served } = credentials;
    Ok(SetupReport {
        dir: dir.dir.clone(),
        created_ca,
        root_fingerprint: bootstrap::fingerprint(&root_der),
        bundle_fingerprint: bootstrap::fingerprint(&bundle),
        fleet_masters,
        policy: dir.policy(),
        conductor: (conductor.0.exists() && conductor.1.exists()).then_some(conductor),
        admin: (admin.0.exists() && admin.1.exists()).then_some(admin),
        server_cert: dir.dir.join(SERVER_CERT),
        server_key: dir.dir.join(SERVER_KEY),
        server_certname: served.certname,
        server_names: served.names,
        notes,
    })
}

/// The certname and serial of the certificate the service presents now, if readable.
fn served(dir: &Path) -> Option<(String, String)> {
    let pem = std::fs::read(dir.join(SERVER_CERT)).ok()?;
    let (_, der) = crate::encoding::pem::find(&pem, &["CERTIFICATE"]).ok()?;
    let (_, c) = x509_parser::parse_x509_certificate(&der).ok()?;
    let cn = c.subject().iter_common_name().next()?.as_str().ok()?.to_string();
    Some((cn, crate::encoding::hex(c.raw_serial())))
}

#[cfg(test)]
mod tests {
    /// A library caller preparing one data directory twice, under two paths (a link to it):
    /// the second is not refused as if another `vouch serve` ran on it, nor is a process
    /// given a second path for another `vouch serve`'s directory let through.
    #[test]
    fn the_serving_lock_is_taken_once_per_directory_whatever_path_names_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vouch");
        std::fs::create_dir(&dir).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        super::hold_serving_lock(&dir).unwrap();
        super::hold_serving_lock(&link).unwrap_or_else(|e| panic!("the same directory by a link: {e}"));
        super::hold_serving_lock(&tmp.path().join("link/.")).unwrap();
        // Another open file on it (as another process would take it): refused.
        let other = std::fs::File::open(&dir).unwrap();
        assert!(rustix::fs::flock(&other, rustix::fs::FlockOperation::NonBlockingLockShared).is_err());
    }

    /// A library caller's ServeOptions get the command line's name rule, before anything
    /// is created (the command line checks the flag in clap).
    #[test]
    fn prepare_refuses_a_server_name_that_is_no_name_before_creating_anything() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vouch");
        for bad in ["*.example.test", "a..b", "1.2.3.4.5", ""] {
            let mut opts = crate::serve::ServeOptions::new(dir.clone());
            opts.server_names = vec!["ca.example.test".into(), bad.into()];
            let e = super::prepare(&opts).err().unwrap_or_else(|| panic!("{bad:?} was accepted"));
            assert!(e.to_string().contains("--server-name"), "{bad:?}: {e}");
            assert!(!dir.exists(), "{bad:?}: a data directory was created");
        }
    }
}
