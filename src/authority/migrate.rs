//! `vouch migrate --to URL`: the file store's state copied into an LDAP store. Every step
//! is idempotent (an entry already there is kept and counted), so an interrupted run is
//! finished by running it again.

use super::Authority;
use crate::error::Error;
use crate::store::ldap::{Imported, LdapStore};
use crate::store::{Store, StoreUrl, WriteLock};
use time::OffsetDateTime;

#[derive(Default)]
struct Counts {
    copied: usize,
    present: usize,
}

impl Counts {
    fn line(&self, what: &str) -> String {
        format!("{what}: {} copied, {} already there\n", self.copied, self.present)
    }
}

impl Authority {
    /// Copies certificates (each certname's current one), revocations, pending requests,
    /// overrides, unexpired replay-journal entries and template cells into the LDAP store
    /// `to`, as this master's CA. Returns the report.
    pub fn migrate_to(&self, to: &StoreUrl, now: OffsetDateTime) -> Result<String, Error> {
        // The file store's lock for the whole copy: its log is applied first (certificates
        // logged but not yet in its files, claims not yet marked spent), and no writer
        // changes it meanwhile.
        let _lock = self.store.lock()?;
        let ca = crate::store::ca_id(&self.ca.cert_der);
        let target = to.ldap(Some(ca.clone()))?.ok_or_else(|| Error::StoreUrl {
            detail: "--to must be an LDAP URL (ldap://, ldaps:// or ldapi://) whose path is the base DN".into(),
        })?;
        // The base DN must exist (a mistyped --to is an error, never a new store).
        target.init(false)?;
        target.open_ca(&crate::encoding::pem::encode("CERTIFICATE", &self.ca.cert_der))?;
        let mut report = format!("migrating {} into {} as master CA {ca}\n", self.store.describe(), target.describe());
        let mut conflicts = Vec::new();
        report.push_str(&self.copy_certificates(&target, &ca, &mut conflicts)?.line("certificates"));
        report.push_str(&self.copy_revocations(&target, &ca)?.line("revocations"));
        // The LDAP store's lock from the requests on, to the end of the copy.
        let lock = target.lock()?;
        report.push_str(&self.copy_requests(&target, &lock)?.line("pending requests"));
        report.push_str(&self.copy_overrides(&target, now)?.line("overrides"));
        // The file store and its journal retired before they are read: a command on this
        // directory without --store, or a hook, that would issue, claim or count there from
        // now on is refused, so nothing it grants is left behind (a re-run of migrate still
        // reads them).
        self.dir.mark_shared_store(&to.url)?;
        // From here on the directory is marked: a failure says so, and how to finish.
        self.copy_after_mark(&target, to, now, report, conflicts).map_err(|error| Error::Unfinished {
            done: format!(
                "vouch migrate marked {} for the shared store {} ({}: every command without --store refuses \
                 this directory from now on) and did not finish copying into it: run the same `vouch migrate --to \
                 {}` again to finish (it copies nothing twice)",
                self.dir.dir.display(),
                to.url,
                self.dir.file(crate::store::RETIRED_MARKER).display(),
                to.url
            ),
            error: Box::new(error),
        })
    }

    /// [`Authority::migrate_to`] once the directory is marked: the file journal retired, then
    /// its entries and template cells copied. The report.
    fn copy_after_mark(
        &self,
        target: &LdapStore,
        to: &StoreUrl,
        now: OffsetDateTime,
        mut report: String,
        mut conflicts: Vec<String>,
    ) -> Result<String, Error> {
        if let Some(dir) = &self.policy.replay_journal {
            crate::store::journal::Journal::new(dir).retire(&to.url).map_err(|source| Error::Io {
                path: dir.clone(),
                op: "retire",
                source,
            })?;
        }
        // What the journal still keeps, by the earlier of `--now` and the clock: a later
        // `--now` must not leave behind entries that are still live (as the prune refuses it).
        let live_at = now.min(OffsetDateTime::now_utc());
        report.push_str(&self.copy_claims(target, live_at)?.line("replay-journal entries"));
        report.push_str(&self.copy_templates(target, live_at, &mut conflicts)?);
        for c in &conflicts {
            report.push_str(&format!("{c}\n"));
        }
        report.push_str(&format!("done. Point every master at the LDAP store: --store {} (or VOUCH_STORE)\n", to.url));
        Ok(report)
    }

    /// Each certname's current certificate, recorded as issued by master CA `ca`; a different
    /// serial already there is kept, and said in `conflicts`.
    fn copy_certificates(&self, target: &LdapStore, ca: &str, conflicts: &mut Vec<String>) -> Result<Counts, Error> {
        let mut certs = Counts::default();
        // Streamed: one certificate in memory at a time, whatever the fleet.
        self.for_each_certificate(|l| -> Result<(), Error> {
            let Some(mut c) = self.store.current(&l.certname)? else { return Ok(()) };
            c.record.issuer = Some(ca.to_string());
            match target.import_current(&c)? {
                None => certs.copied += 1,
                Some(serial) if serial == c.record.serial => certs.present += 1,
                Some(serial) => conflicts.push(format!(
                    "conflict: {}: the LDAP store has serial {serial}, this store {}; kept the LDAP store's",
                    l.certname, c.record.serial
                )),
            }
            Ok(())
        })?;
        Ok(certs)
    }

    /// The revocations, each with its certificate's record (a bare one when there is none),
    /// recorded as master CA `ca`'s.
    fn copy_revocations(&self, target: &LdapStore, ca: &str) -> Result<Counts, Error> {
        let mut revs = Counts::default();
        for r in self.store.revocations()? {
            let mut rec = self.store.record(&r.serial)?.unwrap_or_else(|| crate::store::CertRecord {
                revoked_at: Some(r.time.clone()),
                reason: Some(r.reason.clone()),
                ..crate::store::CertRecord::bare(&r.serial, &r.certname, crate::store::State::Revoked)
            });
            rec.issuer = Some(ca.to_string());
            // Its certificate, where the file store still holds it (revoked, not cleaned): the
            // LDAP store lets a serial leave the CRL only by its certificate's expiry.
            let pem = self.store.current(&r.certname)?.filter(|c| c.record.serial == r.serial).map(|c| c.pem);
            if target.import_revocation(&r, &rec, pem.as_deref())? {
                revs.copied += 1;
            } else {
                revs.present += 1;
            }
        }
        Ok(revs)
    }

    /// The pending requests the LDAP store does not hold, under its `lock`.
    fn copy_requests(&self, target: &LdapStore, lock: &WriteLock) -> Result<Counts, Error> {
        let mut reqs = Counts::default();
        for req in self.store.requests()? {
            let Some((req, csr)) = self.store.request(&req.certname)? else { continue };
            if target.request(&req.certname)?.is_some() {
                reqs.present += 1;
            } else {
                target.put_request(lock, &req, &csr)?;
                reqs.copied += 1;
            }
        }
        Ok(reqs)
    }

    /// The overrides (those with a classification) the LDAP store does not hold.
    fn copy_overrides(&self, target: &LdapStore, now: OffsetDateTime) -> Result<Counts, Error> {
        let mut overrides = Counts::default();
        for name in self.override_names()? {
            let Some(o) = self.store.get_override(&name)? else { continue };
            if target.get_override(&name)?.is_some() {
                overrides.present += 1;
            } else if o.classification.is_some() {
                target.put_override(&name, o.classification.as_deref(), Some(0), now)?;
                overrides.copied += 1;
            }
        }
        Ok(overrides)
    }

    /// The file journal's unexpired entries ([`journal_entries`]), when there is a journal.
    fn copy_claims(&self, target: &LdapStore, now: OffsetDateTime) -> Result<Counts, Error> {
        let mut claims = Counts::default();
        if let Some(dir) = &self.policy.replay_journal {
            for (digest, entry) in journal_entries(dir, now)? {
                if target.import_claim(&digest, &entry)? {
                    claims.copied += 1;
                } else {
                    claims.present += 1;
                }
            }
            // Again after the last one: a `vouch ldap init` that marked the journal while the
            // copies ran, before it saw one, has its mark removed.
            target.unmark_no_legacy()?;
        }
        Ok(claims)
    }

    /// The journal's unexpired template cells (signature version 3): use counts, use records
    /// and instance claims; a count the LDAP store holds lower is raised to this store's, an
    /// instance claim another use holds there is kept (said in `notes`). The report's lines.
    fn copy_templates(
        &self,
        target: &LdapStore,
        now: OffsetDateTime,
        notes: &mut Vec<String>,
    ) -> Result<String, Error> {
        let Some(dir) = &self.policy.replay_journal else { return Ok(String::new()) };
        let cells = crate::store::journal::Journal::new(dir).template_cells_at(now)?;
        let (mut counts, mut uses, mut instances) = (Counts::default(), Counts::default(), Counts::default());
        // Counts, use records, then claims: each step keeps what is there, so an interrupted
        // run is finished by the next (a master meanwhile writes a missing record of a
        // count's last instance with the count's number, the file store's too). Counts
        // first: a master that uses a template after its count was copied counts on from it.
        // A count the shared store holds is this store's, copied by an earlier run (and maybe
        // counted on since), when this store's last use was recorded there before this run
        // (only a copy of this store's count, or the master counting past it, writes that
        // record), or when its own last use is one of this store's; else it was counted there
        // on its own, from zero, and the two are summed.
        let ours: std::collections::HashSet<String> = cells.uses.iter().map(|u| u.digest.clone()).collect();
        for c in &cells.counts {
            let copied_before = !c.value.last.is_empty() && target.template_use_present(&c.value.last)?;
            let imported = target.import_template_count(c, &|last| copied_before || ours.contains(last))?;
            match imported {
                Imported::Raised { from } => notes.push(format!(
                    "raised: template count {} from {from} to {} uses (this store's; never lowered)",
                    c.digest, c.value.uses
                )),
                Imported::Summed { shared } => notes.push(format!(
                    "conflict: template count {}: counted in both stores ({shared} uses in the LDAP store, {} in this \
                     one); set to their sum, {} (no more than the template's max-uses are given in all)",
                    c.digest,
                    c.value.uses,
                    shared.saturating_add(c.value.uses)
                )),
                _ => {}
            }
            counts_of(&mut counts, &imported);
        }
        for u in &cells.uses {
            counts_of(&mut uses, &target.import_template_use(u)?);
        }
        for i in &cells.instances {
            let imported = target.import_instance_claim(i)?;
            if let Imported::HeldByAnother { holder } = &imported {
                notes.push(format!(
                    "conflict: instance claim {}: the LDAP store's is held by use {holder}, this store's by use {}; kept the LDAP store's",
                    i.digest, i.value
                ));
            }
            counts_of(&mut instances, &imported);
        }
        Ok([counts.line("template counts"), uses.line("template use records"), instances.line("instance claims")]
            .concat())
    }

    /// The certnames with an override file (file store).
    fn override_names(&self) -> Result<Vec<String>, Error> {
        let dir = self.dir.ca().join("overrides");
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(source) => return Err(Error::Io { path: dir, op: "read directory", source }),
        };
        let mut out = Vec::new();
        for e in entries {
            let e = e.map_err(|source| Error::Io { path: dir.clone(), op: "read directory", source })?;
            if let Some(name) = e.file_name().to_str().and_then(|n| n.strip_suffix(".json")) {
                if crate::decision::check_certname(name).is_ok() {
                    out.push(name.to_string());
                }
            }
        }
        out.sort();
        Ok(out)
    }
}

/// Counted as copied (a count raised too) or already there (a claim held by another too).
fn counts_of(counts: &mut Counts, imported: &Imported) {
    match imported {
        Imported::Copied | Imported::Raised { .. } | Imported::Summed { .. } => counts.copied += 1,
        Imported::Present | Imported::HeldByAnother { .. } => counts.present += 1,
    }
}

/// The file journal's entries whose attributes have not expired (their bucket's hour ended
/// less than a day ago, as the journal prunes): (file name = digest, JSON).
fn journal_entries(dir: &std::path::Path, now: OffsetDateTime) -> Result<Vec<(String, serde_json::Value)>, Error> {
    let io = |path: &std::path::Path, source| Error::Io { path: path.to_path_buf(), op: "read directory", source };
    let buckets = match std::fs::read_dir(dir) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(io(dir, e)),
    };
    let mut out = Vec::new();
    for b in buckets {
        let b = b.map_err(|e| io(dir, e))?;
        let Some(hour) = b.file_name().to_str().and_then(crate::store::journal::parse_bucket) else { continue };
        if hour.checked_add(time::Duration::hours(25)).is_some_and(|t| t < now) {
            continue;
        }
        let path = b.path();
        for e in std::fs::read_dir(&path).map_err(|e| io(&path, e))? {
            let e = e.map_err(|err| io(&path, err))?;
            let Some(name) = e.file_name().to_str().map(str::to_string) else { continue };
            if name.len() != 64 || !name.bytes().all(|c| c.is_ascii_hexdigit()) {
                continue;
            }
            let bytes = std::fs::read(e.path()).map_err(|source| Error::Io { path: e.path(), op: "read", source })?;
            let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
            if v.is_object() {
                out.push((name, v));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}
