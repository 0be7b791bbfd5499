//! `vouch reconcile` (the store against the fleet's real inventory) and `vouch purge` (the
//! store's entries with no usable name).
//!
//! Reconcile streams: the inventory's names are kept as 12-byte digests (those not yet met
//! in the store), the store's certificates are walked one at a time ([`Store::each_listed`]),
//! and every list the report shows is spooled to an unnamed temporary file, not memory. It
//! plans first (a dry run stops there), refuses an empty inventory and more changes than
//! `--max-changes` unless forced, and only then revokes (and with `--prune` forgets) under
//! the store's lock, writing one CRL at the end.

use super::inventory::{self, Source};
use super::Authority;
use crate::encoding::time::{format_rfc3339, parse_rfc3339};
use crate::error::Error;
use crate::store::{Junk, Listed, StoreError, StoreUrl};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::collections::HashSet;
use std::io::{BufRead, BufWriter, Seek, Write};
use time::OffsetDateTime;

/// The revocation reason of a certificate reconcile revokes.
pub const RECONCILE_REASON: &str = "cessationOfOperation";

/// `--max-changes`: a number, or a percentage of the fleet (its valid certificates).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MaxChanges {
    Count(u64),
    Percent(f64),
}

impl MaxChanges {
    /// `N` or `P%` (P a number from 0 to 100).
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p.trim().parse().map_err(|_| format!("{s:?} is not N or P% (such as 50 or 10%)"))?;
            if !(0.0..=100.0).contains(&v) {
                return Err(format!("{s:?}: a percentage is from 0% to 100%"));
            }
            return Ok(MaxChanges::Percent(v));
        }
        t.parse::<u64>().map(MaxChanges::Count).map_err(|_| match t.strip_prefix('-') {
            Some(n) if n.parse::<f64>().is_ok() => {
                format!("{s:?} is negative: give a number of changes, 0 or more (such as 50), or a percentage (such as 10%)")
            }
            _ => format!("{s:?} is not N or P% (such as 50 or 10%)"),
        })
    }

    /// The number of changes allowed for a fleet of `fleet` certificates.
    pub fn limit(self, fleet: u64) -> u64 {
        match self {
            MaxChanges::Count(n) => n,
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
            MaxChanges::Percent(p) => ((fleet as f64) * p / 100.0).floor() as u64,
        }
    }
}

impl std::fmt::Display for MaxChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MaxChanges::Count(n) => write!(f, "{n}"),
            MaxChanges::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// What `vouch reconcile` is asked to do.
#[derive(Debug, Clone)]
pub struct ReconcileOptions {
    /// SOURCE as given (for messages).
    pub source_text: String,
    pub source: Source,
    /// How an `ldap:` source binds (the `--ldap-*` options).
    pub ldap: StoreUrl,
    pub confirm: bool,
    pub prune: bool,
    pub pending_older_than: std::time::Duration,
    /// A `cmd:` inventory program still running after this is killed.
    pub inventory_timeout: std::time::Duration,
    pub max_changes: MaxChanges,
    pub force: bool,
    /// Progress bars on stderr (a terminal, text output).
    pub progress: bool,
}

/// A list the report shows, spooled to an unnamed temporary file (one JSON line an item).
pub struct Spool {
    w: BufWriter<std::fs::File>,
    pub count: u64,
}

fn spool_err(e: std::io::Error) -> Error {
    Error::Io { path: std::env::temp_dir(), op: "spool to a temporary file in", source: e }
}

impl Spool {
    fn new() -> Result<Self, Error> {
        Ok(Spool { w: BufWriter::new(tempfile::tempfile().map_err(spool_err)?), count: 0 })
    }

    fn push<T: Serialize>(&mut self, item: &T) -> Result<(), Error> {
        serde_json::to_writer(&mut self.w, item).map_err(|e| spool_err(e.into()))?;
        self.w.write_all(b"\n").map_err(spool_err)?;
        self.count = self.count.saturating_add(1);
        Ok(())
    }

    /// Each item, from the first (the spool can be read again).
    pub fn each<T: DeserializeOwned>(&mut self, mut f: impl FnMut(T) -> Result<(), Error>) -> Result<(), Error> {
        self.w.flush().map_err(spool_err)?;
        let file = self.w.get_mut();
        file.rewind().map_err(spool_err)?;
        let mut r = std::io::BufReader::new(&*file);
        let mut line = String::new();
        loop {
            line.clear();
            if r.read_line(&mut line).map_err(spool_err)? == 0 {
                break;
            }
            let item = serde_json::from_str(&line).map_err(|e| spool_err(e.into()))?;
            f(item)?;
        }
        // Back to the end: later pushes append.
        self.w.get_mut().seek(std::io::SeekFrom::End(0)).map_err(spool_err)?;
        Ok(())
    }
}

/// A certificate whose certname the inventory does not hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Orphan {
    pub certname: String,
    pub serial: String,
    pub not_after: String,
    /// Already revoked (not yet forgotten): listed with `--prune` only, which forgets it.
    pub revoked: bool,
    pub expired: bool,
}

/// A certificate of a name the inventory holds, past its notAfter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expired {
    pub certname: String,
    pub serial: String,
    pub not_after: String,
}

/// A pending request older than `--pending-older-than`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stale {
    pub certname: String,
    pub time: String,
}

/// What `--confirm` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Applied {
    pub revoked: u64,
    pub cleaned: u64,
    pub requests_dropped: u64,
    /// Certnames whose certificate changed since the plan (renewed, revoked or cleaned
    /// meanwhile): left alone.
    pub skipped: Vec<String>,
}

/// The report of `vouch reconcile`.
pub struct Plan {
    pub source: String,
    /// Distinct names the inventory gave.
    pub inventory: u64,
    /// Certificates the store lists (valid ones, and revoked ones not yet forgotten).
    pub certificates: u64,
    pub valid: u64,
    pub pending: u64,
    pub orphans: Spool,
    pub expired: Spool,
    pub stale: Spool,
    pub missing: Spool,
    pub junk: Spool,
    /// What `--confirm` would change (with `--prune`: forgetting revoked orphans too).
    pub changes: u64,
    pub limit: u64,
    pub max_changes: MaxChanges,
    /// Why `--confirm` would be refused (a dry run reports it).
    pub refusal: Option<String>,
    pub confirm: bool,
    pub prune: bool,
    pub pending_older_than: std::time::Duration,
    pub applied: Option<Applied>,
}

/// A name's key in the inventory's set: the first 12 bytes of its SHA-256 (a collision among
/// a million names has a chance of about 10^-17; 12 bytes a name, no alignment padding).
type Key = [u8; 12];

fn key(name: &str) -> Key {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, name.as_bytes());
    let mut b = [0u8; 12];
    b.copy_from_slice(d.as_ref().get(..12).unwrap_or(&[0u8; 12]));
    b
}

fn store_err(e: StoreError) -> Error {
    Error::from(e)
}

fn spinner(on: bool, what: &str) -> Option<indicatif::ProgressBar> {
    if !on {
        return None;
    }
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} {pos} ({per_sec}, {elapsed})") {
        pb.set_style(style);
    }
    pb.set_message(what.to_string());
    pb.enable_steady_tick(std::time::Duration::from_millis(200));
    Some(pb)
}

/// Reads the inventory: the set of its names' keys not yet seen in the store (all of them,
/// at first), and the names themselves spooled (once each) for the "no certificate" pass.
fn read_inventory(opts: &ReconcileOptions) -> Result<(HashSet<Key>, Spool), Error> {
    let mut seen: HashSet<Key> = HashSet::new();
    let mut names = Spool::new()?;
    let mut spool_failed = None;
    let pb = spinner(opts.progress, "reading the inventory");
    let mut on_name = |n: String| {
        if seen.insert(key(&n)) {
            if let Err(e) = names.push(&n) {
                spool_failed.get_or_insert(e);
            }
        }
        if let Some(pb) = &pb {
            pb.inc(1);
        }
    };
    inventory::read(&opts.source, &opts.ldap, opts.inventory_timeout, &mut on_name)?;
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    match spool_failed {
        Some(e) => Err(e),
        None => Ok((seen, names)),
    }
}

impl Plan {
    /// A plan of nothing yet, for an inventory of `inventory` distinct names.
    fn empty(opts: &ReconcileOptions, inventory: u64) -> Result<Plan, Error> {
        Ok(Plan {
            source: opts.source_text.clone(),
            inventory,
            certificates: 0,
            valid: 0,
            pending: 0,
            orphans: Spool::new()?,
            expired: Spool::new()?,
            stale: Spool::new()?,
            missing: Spool::new()?,
            junk: Spool::new()?,
            changes: 0,
            limit: 0,
            max_changes: opts.max_changes,
            refusal: None,
            confirm: opts.confirm,
            prune: opts.prune,
            pending_older_than: opts.pending_older_than,
            applied: None,
        })
    }
}

impl Authority {
    /// `vouch reconcile`: plans, and with `confirm` (if not refused) applies.
    pub fn reconcile(&self, opts: &ReconcileOptions, now: OffsetDateTime) -> Result<Plan, Error> {
        // 1. The inventory: a digest set, and the names spooled for the "no certificate" pass.
        // A node that enrolls while it is read (a slow `cmd:` inventory) may be missing from
        // it: no certificate issued after this moment (the real clock's) is an orphan.
        let snapshot = OffsetDateTime::now_utc();
        // A shared store: the other masters' service names, never orphans (read only).
        self.read_fleet_names()?;
        let (mut unseen, mut names) = read_inventory(opts)?;
        // 2. The store's certificates, one at a time.
        let mut plan = Plan::empty(opts, unseen.len() as u64)?;
        self.walk_certificates(&mut unseen, &mut plan, opts.progress, (now, snapshot))?;
        if plan.inventory == 0 && !opts.force {
            return Err(Error::InventoryEmpty { source: opts.source_text.clone(), fleet: plan.certificates });
        }
        // 3. Pending requests older than the limit.
        let older = time::Duration::try_from(opts.pending_older_than).unwrap_or(time::Duration::MAX);
        for r in self.store.requests().map_err(store_err)? {
            plan.pending = plan.pending.saturating_add(1);
            let old = parse_rfc3339(&r.time).map(|t| now - t > older).unwrap_or(true);
            if old {
                plan.stale.push(&Stale { certname: r.certname, time: r.time })?;
                plan.changes = plan.changes.saturating_add(1);
            }
        }
        // 4. Inventory names with no certificate.
        {
            let missing = &mut plan.missing;
            names.each(|n: String| if unseen.contains(&key(&n)) { missing.push(&n) } else { Ok(()) })?;
        }
        drop(unseen);
        // 5. Entries with no usable name.
        {
            let junk = &mut plan.junk;
            let mut failed = None;
            self.store
                .junk(&mut |j: Junk| {
                    if let Err(e) = junk.push(&j) {
                        failed.get_or_insert(e);
                    }
                    Ok(())
                })
                .map_err(store_err)?;
            if let Some(e) = failed {
                return Err(e);
            }
        }
        plan.limit = opts.max_changes.limit(plan.valid);
        if plan.changes > plan.limit && !opts.force {
            let e = Error::TooManyChanges {
                changes: plan.changes,
                limit: plan.limit,
                fleet: plan.valid,
                max: opts.max_changes.to_string(),
            };
            if opts.confirm {
                return Err(e);
            }
            plan.refusal = Some(e.to_string());
        }
        if opts.confirm {
            let applied = self.apply(&mut plan, opts, now, snapshot)?;
            plan.applied = Some(applied);
        }
        Ok(plan)
    }

    /// The store's certificates, one at a time: each marks its name seen in the inventory,
    /// or is an orphan; an expired one of a name the inventory holds is listed as such.
    fn walk_certificates(
        &self,
        unseen: &mut HashSet<Key>,
        plan: &mut Plan,
        progress: bool,
        (now, snapshot): (OffsetDateTime, OffsetDateTime),
    ) -> Result<(), Error> {
        let pb = spinner(progress, "reading the store's certificates");
        let mut failed: Option<Error> = None;
        let (orphans, expired) = (&mut plan.orphans, &mut plan.expired);
        let (mut certificates, mut valid, mut changes) = (0u64, 0u64, 0u64);
        let prune = plan.prune;
        let mut each = |l: Listed| -> Result<(), StoreError> {
            certificates = certificates.saturating_add(1);
            if !l.revoked {
                valid = valid.saturating_add(1);
            }
            let is_expired = parse_rfc3339(&l.not_after).map(|t| t < now).unwrap_or(false);
            // The CA's own certificates (the service's, the administrators') are no node's: no
            // fleet inventory names them, and revoking them would lock the operator out.
            if self.reserved_holder(&l.certname).is_some() {
                unseen.remove(&key(&l.certname));
                if let Some(pb) = &pb {
                    pb.inc(1);
                }
                return Ok(());
            }
            // Each certname is listed once: its key leaves the set when its certificate is met.
            let r = match unseen.remove(&key(&l.certname)) {
                true => {
                    if !l.revoked && is_expired {
                        expired.push(&Expired { certname: l.certname, serial: l.serial, not_after: l.not_after })
                    } else {
                        Ok(())
                    }
                }
                // A revoked orphan is done, unless --prune forgets it.
                false if l.revoked && !prune => Ok(()),
                // An administrator's (`vouch admin new`): no node's, whatever its name.
                false if self.administrator(&l.certname) => Ok(()),
                // Issued after the inventory was read: not known to be an orphan.
                false if self.issued_after(&l.serial, snapshot) => Ok(()),
                false => {
                    changes = changes.saturating_add(1);
                    orphans.push(&Orphan {
                        certname: l.certname,
                        serial: l.serial,
                        not_after: l.not_after,
                        revoked: l.revoked,
                        expired: is_expired,
                    })
                }
            };
            if let Err(e) = r {
                failed.get_or_insert(e);
            }
            if let Some(pb) = &pb {
                pb.inc(1);
            }
            Ok(())
        };
        self.store.each_listed(&mut each).map_err(store_err)?;
        if let Some(e) = failed {
            return Err(e);
        }
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        plan.certificates = certificates;
        plan.valid = valid;
        plan.changes = changes;
        Ok(())
    }

    /// Whether `certname`'s current certificate is an administrator's
    /// ([`Authority::is_admin_certificate`]; the service's names are reserved). A certificate
    /// that cannot be read is not known to be (the apply step reads it again, under the lock).
    fn administrator(&self, certname: &str) -> bool {
        matches!(self.store.current(certname), Ok(Some(c)) if self.is_admin_certificate(&c.pem))
    }

    /// Whether the certificate `serial` was issued after `t` (its record's notBefore, which
    /// the profile backdates, plus that backdate). A record that cannot be read says no: the
    /// apply step reads it again, under the lock.
    fn issued_after(&self, serial: &str, t: OffsetDateTime) -> bool {
        matches!(self.store.record(serial), Ok(Some(rec)) if self.record_issued_after(&rec, t))
    }

    /// [`Authority::issued_after`] for a record already read.
    pub(super) fn record_issued_after(&self, rec: &crate::store::CertRecord, t: OffsetDateTime) -> bool {
        let backdate = time::Duration::try_from(self.policy.profile.backdate).unwrap_or(time::Duration::DAY);
        // A notBefore too late to add the backdate to (a damaged record) is after any `t`.
        parse_rfc3339(&rec.not_before).is_ok_and(|nb| nb.checked_add(backdate).is_none_or(|issued| issued > t))
    }

    /// `vouch purge NAME…`: the junk entries named (all must exist now); with `confirm`,
    /// removed under the store's lock, each audited.
    pub fn purge(&self, names: &[String], confirm: bool, now: OffsetDateTime) -> Result<Vec<Junk>, Error> {
        let lock = if confirm { Some(self.store.lock()?) } else { None };
        let mut found: Vec<Junk> = Vec::new();
        self.store
            .junk(&mut |j: Junk| {
                if names.contains(&j.name) {
                    found.push(j);
                }
                Ok(())
            })
            .map_err(store_err)?;
        let unknown: Vec<String> = names.iter().filter(|n| !found.iter().any(|j| &j.name == *n)).cloned().collect();
        if !unknown.is_empty() {
            return Err(Error::PurgeUnknown { names: unknown });
        }
        if let Some(lock) = &lock {
            for j in &found {
                self.store.purge(lock, j).map_err(store_err)?;
                self.audit(serde_json::json!({
                    "time": format_rfc3339(now), "event": "purged", "name": j.name, "kind": j.kind,
                    "detail": j.detail, "files": j.files,
                }))?;
            }
        }
        Ok(found)
    }
}

impl Authority {
    /// `vouch purge --tombstones`: the shared store's tombstones of cleaned certnames whose
    /// certificate expired a CRL period (the policy's `crl.validity`) before `now`, off every
    /// CRL by then; with `confirm`, removed under the store's lock, each audited.
    pub fn purge_tombstones(&self, confirm: bool, now: OffsetDateTime) -> Result<Vec<crate::store::Tombstone>, Error> {
        let period = time::Duration::try_from(self.policy.crl_validity).unwrap_or(time::Duration::days(30));
        let before = now.checked_sub(period).unwrap_or(now);
        let lock = if confirm { Some(self.store.lock()?) } else { None };
        let found = self.store.purge_tombstones(lock.as_ref(), before, now).map_err(store_err)?;
        if confirm {
            for t in &found {
                self.audit(serde_json::json!({
                    "time": format_rfc3339(now), "event": "tombstone-purged", "certname": t.certname,
                    "serial": t.serial, "not_after": t.not_after,
                }))?;
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_changes_parse_and_limit() {
        assert_eq!(MaxChanges::parse("10%").unwrap().limit(10_000), 1_000);
        assert_eq!(MaxChanges::parse("50").unwrap().limit(10_000), 50);
        assert_eq!(MaxChanges::parse("2.5%").unwrap().limit(1_000), 25);
        for bad in ["", "x", "-1", "101%", "%"] {
            assert!(MaxChanges::parse(bad).is_err(), "{bad}");
        }
    }
}
