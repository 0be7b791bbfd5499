//! `vouch sign`, `check`, `list`, `revoke`, `clean`, `crl`, `renew`: the CA's certificates.

use super::args::{CheckArgs, ListFormat, OutFormat, SignArgs};
use super::output::{after, note, preflight, print_refusals, say, stored_cert, write_out, Replace};
use super::{dir, find_policy, now, read_file, Cli, EXIT_OK, EXIT_REFUSED};
use crate::authority::{Authority, IssueOutcome, ListEntry};
use crate::decision::{self, Request};
use crate::encoding::csr;
use crate::error::Error;
use crate::policy::Policy;
use std::path::{Path, PathBuf};

pub(super) fn sign(cli: &Cli, a: &SignArgs) -> Result<i32, Error> {
    preflight(&[(a.out.as_deref().unwrap_or(Path::new("-")), Replace::Yes)])?;
    let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    let csr = read_file(&a.csr, crate::files::input::Kind::Csr)?;
    let certname = certname_for(&a.csr, &csr, a.certname.as_deref())?;
    match auth.issue(&csr, Some(&certname), now(cli)?)? {
        IssueOutcome::Issued(i) => {
            write_out(a.out.as_deref(), &format!("{}{}", i.pem, auth.chain_pem()), 0o644).map_err(after(format!(
                "the certificate for {} was issued (serial {}) and is in the store: `vouch list --all`, {}",
                i.certname,
                i.serial_hex,
                stored_cert(&auth, &i.certname)
            )))?;
            note(&format!(
                "vouch: issued {} serial {} valid until {}",
                i.certname,
                i.serial_hex,
                crate::encoding::time::format_rfc3339(i.not_after)
            ));
            Ok(EXIT_OK)
        }
        IssueOutcome::Refused(r) => {
            print_refusals(&r, &mut std::io::stderr());
            Ok(EXIT_REFUSED)
        }
    }
}

/// The revocation reasons `vouch revoke --reason` accepts, kebab-case and as RFC 5280 names them.
pub const REVOCATION_REASONS: [(&str, &str); 7] = [
    ("unspecified", "unspecified"),
    ("key-compromise", "keyCompromise"),
    ("ca-compromise", "caCompromise"),
    ("affiliation-changed", "affiliationChanged"),
    ("superseded", "superseded"),
    ("cessation-of-operation", "cessationOfOperation"),
    ("privilege-withdrawn", "privilegeWithdrawn"),
];

/// The certname `sign` and `check` judge: `--certname`, else the request's CN. A file holding no
/// certificate request at all (garbage, empty, another kind of file) is an input error (exit 2)
/// either way; a request that is there but defective is the decision's to refuse (exit 1).
pub(super) fn certname_for(path: &Path, body: &[u8], explicit: Option<&str>) -> Result<String, Error> {
    if let Some(c) = explicit {
        return match csr::parse(body) {
            Err(e @ csr::CsrError::NotFound { .. }) => {
                Err(Error::Csr { path: path.to_path_buf(), detail: e.to_string() })
            }
            _ => Ok(c.to_string()),
        };
    }
    let hint = "vouch takes the certname from the request's CN; give --certname NAME to see every reason it is refused";
    let parsed =
        csr::parse(body).map_err(|e| Error::Csr { path: path.to_path_buf(), detail: format!("{e}; {hint}") })?;
    parsed
        .common_names
        .first()
        .cloned()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| Error::Csr { path: path.to_path_buf(), detail: format!("its subject has no CN; {hint}") })
}

pub(super) fn check(cli: &Cli, a: &CheckArgs) -> Result<i32, Error> {
    super::refuse_retired_beside(cli)?;
    let policy_path = find_policy(a.policy.as_deref(), cli.dir.as_deref())?;
    let policy = Policy::load(&policy_path)?;
    let body = read_file(&a.csr, crate::files::input::Kind::Csr)?;
    let certname = certname_for(&a.csr, &body, a.certname.as_deref())?;
    let now = now(cli)?;
    // The names every way of signing keeps from nodes (the service's and administrators' in
    // DIR, localhost and the loopback addresses always), as `vouch sign` and the hook judge them.
    let reserved = cli
        .dir
        .as_deref()
        .map(|d| crate::authority::ReservedNames::load(&crate::issuance::bootstrap::DataDir::new(d)))
        .unwrap_or_else(crate::authority::ReservedNames::service_defaults);
    // Beside a CA (--dir): its own root CRL counts, as in the CA's decisions.
    if let Some(d) = cli.dir.as_deref() {
        crate::authority::count_own_crl(&crate::issuance::bootstrap::DataDir::new(d), &policy);
    }
    let outcome = match reserved.refusal(&certname, crate::encoding::csr::parse(&body).ok().as_ref()) {
        Some(reason) => Err(decision::Refused { reasons: vec![reason], conductor: None, held: None }),
        None => decision::decide(&Request { csr: &body, certname: &certname }, &policy, now),
    };
    // One-time use as the journal stands (read, never written): used attributes are refused.
    let journal = crate::store::open_journal(&cli.store_url(), policy.replay_journal.as_ref(), true)?;
    let outcome = crate::authority::peek_replay(journal.as_deref(), outcome, &certname)?;
    match a.format {
        OutFormat::Json => sayln!("{}", crate::store::audit::decision_line(now, &certname, outcome.as_ref(), "check"))?,
        OutFormat::Text => match &outcome {
            Ok(g) => sayln!(
                "granted {} (vouched by {}, attributes expire {})\n{}",
                g.certname(),
                g.conductor().subject,
                crate::encoding::time::format_rfc3339(g.attributes_expiry()),
                g.classification()
                    .to_enc_json()
                    .map_err(|error| Error::Classification { source: a.csr.display().to_string(), error })?
            )?,
            Err(r) => {
                let mut text = Vec::new();
                print_refusals(r, &mut text);
                say(&String::from_utf8_lossy(&text))?
            }
        },
    }
    Ok(if outcome.is_ok() { EXIT_OK } else { EXIT_REFUSED })
}

/// The RFC 5280 name of a revocation reason given kebab-case (key-compromise) or as
/// RFC 5280 spells it (keyCompromise); any other is a usage error listing both spellings.
pub(super) fn canonical_reason(r: &str) -> Result<&'static str, Error> {
    REVOCATION_REASONS
        .iter()
        .find(|(kebab, rfc)| r == *kebab || r == *rfc || r.eq_ignore_ascii_case(rfc) || r.replace('_', "-") == *kebab)
        .map(|(_, rfc)| *rfc)
        .ok_or_else(|| Error::Usage {
            detail: format!(
                "unknown revocation reason {r:?}; one of {}",
                REVOCATION_REASONS
                    .iter()
                    .map(|(k, rfc)| if k == rfc { k.to_string() } else { format!("{k} ({rfc})") })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

pub(super) fn list(cli: &Cli, all: &bool, format: &ListFormat, conductor: Option<&str>) -> Result<i32, Error> {
    let conductor = conductor
        .map(|c| {
            crate::authority::normal_fingerprint(c).ok_or_else(|| Error::Usage {
                detail: format!(
                    "--conductor {c:?} is not a SHA-256 fingerprint (64 hex digits, colons allowed), as `vouch \
                     conductor new` and `vouch conductor revoke` print it"
                ),
            })
        })
        .transpose()?;
    let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    // A CRL that cannot be written (a warning) does not keep the store from being listed.
    auth.maintain_or_warn(now(cli)?)?;
    let mut out = ListWriter::new(*format, *all);
    match &conductor {
        Some(fp) => auth.list_each_vouched_by(fp, |e| out.entry(&e))?,
        None => auth.list_each(*all, |e| out.entry(&e))?,
    }
    out.finish()?;
    Ok(EXIT_OK)
}

/// `vouch list`'s output, written as the entries come (requests first, then certificates
/// in the store's order): nothing of the fleet is kept but the text format's revoked lines,
/// which follow the signed ones (in memory up to [`SPILL_AFTER`] bytes, then in an
/// unnamed temporary file).
struct ListWriter {
    out: std::io::BufWriter<std::io::Stdout>,
    format: ListFormat,
    all: bool,
    /// Whether any was written (json: the separator; text: "(none)" for an empty section).
    requested: bool,
    signed: bool,
    /// Text: past the requests (the signed section's heading is out).
    certificates: bool,
    revoked: Spill,
    json_started: bool,
}

/// The revoked section kept in memory up to this size; beyond it, in a temporary file.
const SPILL_AFTER: usize = 1 << 20;

struct Spill {
    /// Bytes kept in memory before they go to the temporary file.
    limit: usize,
    lines: Vec<u8>,
    file: Option<std::fs::File>,
    any: bool,
}

use super::output::stdout_error as stdout_err;

impl Spill {
    fn new(limit: usize) -> Self {
        Spill { limit, lines: Vec::new(), file: None, any: false }
    }

    fn push(&mut self, line: &str) -> Result<(), Error> {
        use std::io::Write;
        self.any = true;
        self.lines.extend_from_slice(line.as_bytes());
        if self.lines.len() >= self.limit {
            let tmp = std::env::temp_dir();
            let file = match &mut self.file {
                Some(f) => f,
                None => self.file.insert(tempfile::tempfile().map_err(|source| Error::Io {
                    path: tmp.clone(),
                    op: "create a temporary file (vouch list's revoked certificates) in",
                    source,
                })?),
            };
            file.write_all(&self.lines).map_err(|source| Error::Io {
                path: tmp,
                op: "write a temporary file (vouch list's revoked certificates) in",
                source,
            })?;
            self.lines.clear();
        }
        Ok(())
    }

    /// Everything pushed, in order, to `out`.
    fn copy_to(&mut self, out: &mut impl std::io::Write) -> Result<(), Error> {
        use std::io::Seek;
        if let Some(f) = &mut self.file {
            let tmp_err = |source| Error::Io {
                path: std::env::temp_dir(),
                op: "read back a temporary file (vouch list's revoked certificates) in",
                source,
            };
            f.rewind().map_err(tmp_err)?;
            // Read and write apart: a closed stdout is stdout's error, not the file's.
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                let n = match std::io::Read::read(f, &mut chunk) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(tmp_err(e)),
                };
                out.write_all(chunk.get(..n).unwrap_or_default()).map_err(stdout_err)?;
            }
        }
        out.write_all(&self.lines).map_err(stdout_err)
    }
}

impl ListWriter {
    fn new(format: ListFormat, all: bool) -> Self {
        ListWriter {
            out: std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout()),
            format,
            all,
            requested: false,
            signed: false,
            certificates: false,
            revoked: Spill::new(SPILL_AFTER),
            json_started: false,
        }
    }

    fn write(&mut self, text: &str) -> Result<(), Error> {
        use std::io::Write;
        self.out.write_all(text.as_bytes()).map_err(stdout_err)
    }

    fn entry(&mut self, e: &ListEntry) -> Result<(), Error> {
        match self.format {
            ListFormat::Json => {
                // As serde_json's pretty array: each element indented by two spaces.
                let item = serde_json::to_string_pretty(e).map_err(|err| Error::Usage { detail: err.to_string() })?;
                let sep = if self.json_started { ",\n  " } else { "[\n  " };
                self.json_started = true;
                self.write(&format!("{sep}{}", item.replace('\n', "\n  ")))
            }
            ListFormat::Jsonl => {
                let item = serde_json::to_string(e).map_err(|err| Error::Usage { detail: err.to_string() })?;
                self.write(&format!("{item}\n"))
            }
            ListFormat::Text => {
                if !self.requested && !self.certificates && e.state == "requested" {
                    self.write("Requested Certificates:\n")?;
                }
                match e.state {
                    "requested" => {
                        self.requested = true;
                        self.write(&format!("    {}  ({})\n", e.name, e.reasons.join("; ")))
                    }
                    state => {
                        self.end_requests()?;
                        let line = format!(
                            "    {}  serial {}  expires {}\n",
                            e.name,
                            e.serial.as_deref().unwrap_or("?"),
                            e.not_after.as_deref().unwrap_or("?")
                        );
                        if state == "revoked" {
                            self.revoked.push(&line)
                        } else {
                            self.signed = true;
                            self.write(&line)
                        }
                    }
                }
            }
        }
    }

    /// Text: closes the requests' section and opens the signed one (once).
    fn end_requests(&mut self) -> Result<(), Error> {
        if self.certificates {
            return Ok(());
        }
        self.certificates = true;
        if !self.requested {
            self.write("Requested Certificates:\n    (none)\n")?;
        }
        if self.all {
            self.write("Signed Certificates:\n")?;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<(), Error> {
        use std::io::Write;
        match self.format {
            ListFormat::Json if !self.json_started => self.write("[]\n")?,
            ListFormat::Json => self.write("\n]\n")?,
            ListFormat::Jsonl => {}
            ListFormat::Text => {
                if self.requested {
                    super::output::note(
                        "vouch: note: where the policy lets an administrator approve nodes no conductor launched \
                         (issuance.admin_approval), `vouch approve NAME --fingerprint SHA256` signs a request above: \
                         pin the fingerprint the node's agent printed when it asked (`puppetserver ca list` \
                         against vouch serve prints each request's)",
                    );
                }
                self.end_requests()?;
                if self.all {
                    if !self.signed {
                        self.write("    (none)\n")?;
                    }
                    self.write("Revoked Certificates:\n")?;
                    if !self.revoked.any {
                        self.write("    (none)\n")?;
                    }
                    self.revoked.copy_to(&mut self.out)?;
                }
            }
        }
        self.out.flush().map_err(stdout_err)
    }
}

/// What makes a revocation count beyond this CA, said on stderr after `revoke` and `clean`
/// (stdout keeps its one line). As measured with stock Puppet Server 7.9.5 as a compile
/// server (docs/compile-servers.md, step 4): a replaced `hostcrl` is reread within about
/// 0.2 s (its filesystem-watch-service), Jetty checks the CRL at each handshake, and open
/// connections are not cut; `vouch serve` answers the CRL from the file as it is now.
pub(super) const AFTER_REVOCATION: &str = "vouch: note: the CRL lists it now, and vouch serve on this data directory \
     serves that CRL at once; a Puppet Server compile server refuses the certificate from its next TLS handshake \
     once its hostcrl is replaced (its `vouch crl --fetch` timer, or run that now; it rereads the file: no \
     restart or reload), while connections already open stay up until they close";

/// [`AFTER_REVOCATION`] with a shared store: the certificate may be another master's.
pub(super) const AFTER_SHARED_REVOCATION: &str = "vouch: note: the store records it now, and every master refuses \
     the certificate from its next request; the CRL of the master CA that issued it lists it once that master \
     writes its CRL (this one's now, if it issued it; another master's at its next maintenance run, within 5 s \
     while its vouch serve runs), and every master serves that CRL after its own next run (docs/ldap.md, 'One \
     fleet'); a Puppet Server compile server refuses it once its hostcrl is replaced (its `vouch crl --fetch` timer)";

/// The note said after a revocation, as this store makes it count.
fn after_revocation(auth: &Authority) -> &'static str {
    if auth.store.shares_root_crl() {
        AFTER_SHARED_REVOCATION
    } else {
        AFTER_REVOCATION
    }
}

pub(super) fn revoke(cli: &Cli, certname: &str, reason: &str, force: bool) -> Result<i32, Error> {
    let reason = canonical_reason(reason)?;
    let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    let done = auth
        .revoke_guarded(certname, reason, false, force, now(cli)?)
        .map_err(|e| no_current(cli, &auth, certname, e))?;
    say_done!("{done}")?;
    if !done.ends_with(crate::authority::ALREADY_REVOKED) {
        note(after_revocation(&auth));
    }
    Ok(EXIT_OK)
}

pub(super) fn revoke_serial(cli: &Cli, serial: &str, reason: &str, force: bool) -> Result<i32, Error> {
    let reason = canonical_reason(reason)?;
    let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    let done = auth.revoke_serial_guarded(serial, reason, force, now(cli)?)?;
    say_done!("{done}")?;
    if !done.ends_with(crate::authority::ALREADY_REVOKED) {
        note(after_revocation(&auth));
    }
    Ok(EXIT_OK)
}

/// [`Error::NotFound`] from revoke, clean, renew or enc, made precise: a certname the store still
/// lists whose certificate is missing is [`Error::CurrentMissing`] (the not-found hint's
/// `vouch list --all` would list it again: a loop); any other error unchanged.
pub(super) fn no_current(cli: &Cli, auth: &Authority, certname: &str, e: Error) -> Error {
    match e {
        Error::NotFound { .. } => {
            let file = cli.store_url().is_files().then(|| stored_cert(auth, certname).into());
            auth.no_current(certname, file)
        }
        e => e,
    }
}

pub(super) fn clean(cli: &Cli, certname: &String, force: bool) -> Result<i32, Error> {
    let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    auth.refuse_unforced(certname, force, now(cli)?)?;
    // Like revoke and renew, a name the CA knows nothing about is an error (exit 2); so is
    // one the store lists without its certificate (clean would only remove a request).
    let revokes = auth.certificate(certname)?.is_some();
    if !revokes {
        match no_current(cli, &auth, certname, Error::NotFound { certname: certname.clone() }) {
            Error::NotFound { .. } if auth.list(false)?.iter().any(|e| e.name == *certname) => {}
            e => return Err(e),
        }
    }
    say_done!("{}", auth.revoke_guarded(certname, "cessationOfOperation", true, force, now(cli)?)?)?;
    if revokes {
        note(after_revocation(&auth));
    }
    Ok(EXIT_OK)
}

pub(super) fn crl(cli: &Cli, out: &Option<PathBuf>) -> Result<i32, Error> {
    preflight(&[(out.as_deref().unwrap_or(Path::new("-")), Replace::Yes)])?;
    let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    let pem = auth.crl(now(cli)?)?;
    write_out(out.as_deref(), &pem, 0o644)?;
    Ok(EXIT_OK)
}

pub(super) fn renew(cli: &Cli, certname: &str, out: &Option<PathBuf>) -> Result<i32, Error> {
    preflight(&[(out.as_deref().unwrap_or(Path::new("-")), Replace::Yes)])?;
    let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    let now = now(cli)?;
    auth.maintain(now)?;
    let stored = auth.renew(certname, now).map_err(|e| no_current(cli, &auth, certname, e))?;
    let i = stored.issued;
    // Said with the output's failure too: the CRL's would otherwise go unreported.
    let crl_missing = match &stored.superseded_crl {
        Some((old, e)) => format!(
            " (but the CRL could not be written after it, so it does not list serial {old} yet: {e}; run \
             `vouch crl` once that is fixed)"
        ),
        None => String::new(),
    };
    write_out(out.as_deref(), &format!("{}{}", i.pem, auth.chain_pem()), 0o644).map_err(after(format!(
        "{} was renewed: the new certificate (serial {}) is in the store and the old one is revoked \
             (superseded){crl_missing}: `vouch list --all`, {}",
        i.certname,
        i.serial_hex,
        stored_cert(&auth, &i.certname)
    )))?;
    note(&format!(
        "vouch: renewed {} serial {} valid until {}",
        i.certname,
        i.serial_hex,
        crate::encoding::time::format_rfc3339(i.not_after)
    ));
    match stored.superseded_crl {
        None => Ok(EXIT_OK),
        Some((old_serial, error)) => Err(Error::RenewedCrlNotWritten {
            certname: i.certname,
            serial: i.serial_hex,
            old_serial,
            error: Box::new(error),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::Spill;

    /// The revoked lines come back complete and in order, from memory and from the
    /// temporary file alike.
    #[test]
    fn spill_keeps_every_line_in_order() {
        for limit in [1 << 20, 64, 1] {
            let mut spill = Spill::new(limit);
            let lines: Vec<String> = (0..1000).map(|i| format!("    node-{i}  serial {i:032x}\n")).collect();
            for l in &lines {
                spill.push(l).unwrap();
            }
            assert_eq!(spill.file.is_some(), limit < 1 << 20);
            let mut out = Vec::new();
            spill.copy_to(&mut out).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), lines.concat());
        }
    }
}
