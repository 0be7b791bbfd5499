//! One-time use: a journal of attributes already used.
//!
//! Each use is a small file named by the SHA-256 of the replay key (the
//! version 2 nonce, or the version 1 signature), created with link(2) so that
//! of two processes racing with the same attributes exactly one wins. Files
//! live in a directory per UTC hour of the attributes' expiry, so entries
//! expire with the attributes: whole buckets are removed a day after their
//! hour has passed, without scanning entries.

use crate::attrs::format_expiry;
use std::io;
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// The result of claiming attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// First use: recorded now.
    Fresh,
    /// Already used.
    Used { certname: String, time: String },
}

/// Who is about to issue for a claim (see [`Journal::claim_issued`]).
pub struct IssuedBy<'a> {
    /// The serial of the certificate about to be stored.
    pub serial: &'a str,
    /// The store's name ([`crate::store::Store::id`]).
    pub store: &'a str,
    /// Whether this store holds a record of a serial.
    pub landed: &'a dyn Fn(&str) -> io::Result<bool>,
}

/// The journal (a directory; shared by every process that decides with this policy).
#[derive(Debug, Clone)]
pub struct Journal {
    pub dir: PathBuf,
    /// Whether each entry is fsynced. The CA's group commit writes entries
    /// unsynced and makes them durable through its write-ahead log instead
    /// ([`crate::store`]), which names every claim it issued for.
    pub sync: bool,
}

fn bucket(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!("{:04}{:02}{:02}{:02}", t.year(), u8::from(t.month()), t.day(), t.hour())
}

fn parse_bucket(s: &str) -> Option<OffsetDateTime> {
    if s.len() != 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |a: usize, b: usize| s.get(a..b).and_then(|x| x.parse::<u32>().ok());
    let date = time::Date::from_calendar_date(
        i32::try_from(n(0, 4)?).ok()?,
        time::Month::try_from(u8::try_from(n(4, 6)?).ok()?).ok()?,
        u8::try_from(n(6, 8)?).ok()?,
    )
    .ok()?;
    let hour = time::Time::from_hms(u8::try_from(n(8, 10)?).ok()?, 0, 0).ok()?;
    Some(date.with_time(hour).assume_utc())
}

impl Journal {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Journal { dir: dir.into(), sync: true }
    }

    /// A journal whose entries are not fsynced (see [`Journal::sync`]).
    pub fn unsynced(dir: impl Into<PathBuf>) -> Self {
        Journal { dir: dir.into(), sync: false }
    }

    fn replace(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        if self.sync {
            crate::fsutil::write_replace(path, bytes, 0o644)
        } else {
            let tmp = path.parent().unwrap_or(Path::new("."));
            crate::fsutil::write_replace_unsynced_in(tmp, path, bytes, 0o644)
        }
    }

    fn entry(&self, key: &str, expiry: OffsetDateTime) -> PathBuf {
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, key.as_bytes());
        let name: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(bucket(expiry)).join(name)
    }

    /// Records the use of `key` (attributes expiring at `expiry`) for `certname`
    /// by `holder` (a digest of the requesting public key), unless another holder
    /// used it before. Atomic across processes. The same holder may claim again:
    /// a node that resubmits its own CSR after a crash is not locked out, and
    /// nobody else can use a certificate for its key.
    pub fn claim(
        &self,
        key: &str,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        reusable: bool,
        now: OffsetDateTime,
    ) -> io::Result<Claim> {
        self.claim_as(key, expiry, certname, holder, reusable, None, now)
    }

    /// [`Journal::claim`] (reusable) for the certificate with `serial`, about to be
    /// stored: a fresh claim is written already marked issued (with the serial), in one
    /// write. If storing then fails, the caller takes the mark back with
    /// [`Journal::unissue`]; if the process dies first, the mark names a serial the store
    /// never recorded (`landed` says false), and the holder's next claim is fresh.
    ///
    /// `issued.store` names the CA's store: only a mark made by this same store is judged
    /// by `issued.landed` (several masters may share the journal, each with its own store).
    pub fn claim_issued(
        &self,
        key: &str,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        issued: &IssuedBy<'_>,
        now: OffsetDateTime,
    ) -> io::Result<Claim> {
        self.claim_as(key, expiry, certname, holder, true, Some(issued), now)
    }

    /// Takes back the mark [`Journal::claim_issued`] wrote: the claim stays this
    /// holder's, and the holder may claim again.
    pub fn unissue(
        &self,
        key: &str,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        now: OffsetDateTime,
    ) -> io::Result<()> {
        self.replace(&self.entry(key, expiry), Self::record(certname, holder, expiry, now, false).as_bytes())
    }

    #[allow(clippy::too_many_arguments)]
    fn claim_as(
        &self,
        key: &str,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        reusable: bool,
        issued: Option<&IssuedBy<'_>>,
        now: OffsetDateTime,
    ) -> io::Result<Claim> {
        let mut record = Self::record(certname, holder, expiry, now, false);
        if let Some(by) = issued {
            let mut v: serde_json::Value = serde_json::from_str(&record).unwrap_or_default();
            v["issued"] = serde_json::Value::Bool(true);
            v["serial"] = serde_json::Value::String(by.serial.to_string());
            v["store"] = serde_json::Value::String(by.store.to_string());
            record = v.to_string();
        }
        let (path, prior) = self.create(key, expiry, &record, now)?;
        let Some(prior) = prior else { return Ok(Claim::Fresh) };
        // An entry that does not read as JSON was written unsynced by a CA (a hook's entries
        // are synced before they appear) and lost its content in a power loss; that CA's
        // log restores every claim it issued for before it decides again. Under the CA's
        // lock such an entry is as good as absent.
        if issued.is_some() && prior.is_null() {
            self.replace(&path, record.as_bytes())?;
            return Ok(Claim::Fresh);
        }
        let same = prior["holder"].as_str() == Some(holder) && prior["certname"].as_str() == Some(certname);
        // Held by this key when an earlier request with them was refused for
        // another reason: this is the first approval; from now on it counts as one.
        if same && prior["held"].as_bool() == Some(true) {
            self.replace(&path, record.as_bytes())?;
            return Ok(Claim::Fresh);
        }
        // Re-claim by the same key and name only where allowed (the CA, until it has
        // issued for this claim; never the hook, whose approval Puppet Server acts on).
        // Marked issued for a serial the store never recorded: the process that claimed
        // died before storing it. Nothing was issued; the holder may claim again.
        let never_landed = match (issued, prior["issued"].as_bool(), prior["serial"].as_str()) {
            (Some(by), Some(true), Some(serial)) if same && prior["store"].as_str() == Some(by.store) => {
                !(by.landed)(serial)?
            }
            _ => false,
        };
        if same && reusable && (prior["issued"].as_bool() != Some(true) || never_landed) {
            if issued.is_some() {
                self.replace(&path, record.as_bytes())?;
            }
            return Ok(Claim::Fresh);
        }
        Ok(Self::used(&prior))
    }

    /// Makes attributes from a refused request this key's (`holder`) without approving
    /// anything: a later request with them and another key is refused as a replay, the
    /// same key may still be approved once. Returns `Used` if another key holds them.
    pub fn hold(
        &self,
        key: &str,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        now: OffsetDateTime,
    ) -> io::Result<Claim> {
        let record = Self::record(certname, holder, expiry, now, true);
        match self.create(key, expiry, &record, now)?.1 {
            None => Ok(Claim::Fresh),
            Some(prior) if prior["holder"].as_str() == Some(holder) && prior["certname"].as_str() == Some(certname) => {
                Ok(Claim::Fresh)
            }
            Some(prior) => Ok(Self::used(&prior)),
        }
    }

    fn record(certname: &str, holder: &str, expiry: OffsetDateTime, now: OffsetDateTime, held: bool) -> String {
        let mut v = serde_json::json!({
            "certname": certname, "holder": holder, "time": format_expiry(now), "expiry": format_expiry(expiry),
        });
        if held {
            v["held"] = serde_json::Value::Bool(true);
        }
        v.to_string()
    }

    /// Creates the entry for `key` with `record` unless it exists (link(2): atomic across
    /// processes); returns its path and, if it existed, what it holds.
    fn create(
        &self,
        key: &str,
        expiry: OffsetDateTime,
        record: &str,
        now: OffsetDateTime,
    ) -> io::Result<(PathBuf, Option<serde_json::Value>)> {
        self.prune_now_and_then(now)?;
        let path = self.entry(key, expiry);
        let created = crate::fsutil::in_dir(&path, || {
            if self.sync {
                crate::fsutil::write_new(&path, record.as_bytes(), 0o644)
            } else {
                crate::fsutil::write_new_unsynced(&path, record.as_bytes(), 0o644)
            }
        });
        match created {
            Ok(()) => Ok((path, None)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let prior = std::fs::read(&path)
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .unwrap_or(serde_json::Value::Null);
                Ok((path, Some(prior)))
            }
            Err(e) => Err(e),
        }
    }

    fn used(prior: &serde_json::Value) -> Claim {
        Claim::Used {
            certname: prior["certname"].as_str().unwrap_or("?").to_string(),
            time: prior["time"].as_str().unwrap_or("?").to_string(),
        }
    }

    /// Marks a claim as spent: a certificate was issued for it, so even its holder
    /// cannot claim it again (e.g. after the certificate is revoked).
    pub fn mark_issued(&self, key: &str, expiry: OffsetDateTime) -> io::Result<()> {
        let path = self.entry(key, expiry);
        let mut v: serde_json::Value =
            std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        v["issued"] = serde_json::Value::Bool(true);
        self.replace(&path, v.to_string().as_bytes())
    }

    /// Makes sure the entry for `key` says it was issued to `holder` for `certname`:
    /// what the store's write-ahead log replays after a crash, for a claim whose
    /// unsynced entry may have been lost. Idempotent. Returns false, changing nothing,
    /// if the entry names another holder or certname (it was lost, and someone else
    /// claimed the attributes meanwhile: the caller reports it).
    pub fn restore_issued(
        &self,
        key: &str,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        time: OffsetDateTime,
    ) -> io::Result<bool> {
        let path = self.entry(key, expiry);
        let prior: Option<serde_json::Value> = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(p) = &prior {
            if p["holder"].as_str() != Some(holder) || p["certname"].as_str() != Some(certname) {
                return Ok(false);
            }
            if p["issued"].as_bool() == Some(true) {
                return Ok(true);
            }
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut v: serde_json::Value =
            serde_json::from_str(&Self::record(certname, holder, expiry, time, false)).unwrap_or_default();
        v["issued"] = serde_json::Value::Bool(true);
        self.replace(&path, v.to_string().as_bytes())?;
        Ok(true)
    }

    /// [`Journal::prune`], at most once a minute per directory in a long-running
    /// process (`vouch serve` claims for every certificate; a hook process prunes once).
    fn prune_now_and_then(&self, now: OffsetDateTime) -> io::Result<()> {
        static LAST: std::sync::Mutex<Vec<(PathBuf, OffsetDateTime)>> = std::sync::Mutex::new(Vec::new());
        {
            let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
            match last.iter_mut().find(|(d, _)| *d == self.dir) {
                Some((_, t)) if (now - *t).abs() < time::Duration::minutes(1) => return Ok(()),
                Some((_, t)) => *t = now,
                None => last.push((self.dir.clone(), now)),
            }
        }
        self.prune(now)
    }

    /// Removes buckets whose hour ended more than a day ago (their attributes
    /// expired long since; the day covers clocks that disagree).
    pub fn prune(&self, now: OffsetDateTime) -> io::Result<()> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for e in entries {
            let path = e?.path();
            let hour = path.file_name().and_then(|n| n.to_str()).and_then(parse_bucket);
            if let Some(h) = hour {
                if h + time::Duration::hours(25) < now {
                    let _ = std::fs::remove_dir_all(&path);
                }
            }
        }
        Ok(())
    }

    /// Whether the journal directory exists (for status output).
    pub fn exists(&self) -> bool {
        Path::new(&self.dir).is_dir()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn once_then_used_then_pruned() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::new(d.path());
        let now = datetime!(2030-06-01 12:00 UTC);
        let exp = datetime!(2030-06-01 13:30 UTC);
        assert_eq!(j.claim("k", exp, "a", "key1", true, now).unwrap(), Claim::Fresh);
        assert_eq!(j.claim("k", exp, "a", "key1", true, now).unwrap(), Claim::Fresh, "the same requester again");
        let used = Claim::Used { certname: "a".into(), time: "2030-06-01T12:00:00Z".into() };
        assert_eq!(j.claim("k", exp, "a", "key1", false, now).unwrap(), used, "not reusable (hook)");
        assert_eq!(j.claim("k", exp, "b", "key1", true, now).unwrap(), used, "another certname");
        assert_eq!(j.claim("k", exp, "a", "key2", true, now).unwrap(), used, "another key");
        j.mark_issued("k", exp).unwrap();
        assert_eq!(j.claim("k", exp, "a", "key1", true, now).unwrap(), used, "spent once issued");
        assert_eq!(j.claim("other", exp, "b", "key2", true, now).unwrap(), Claim::Fresh);
        assert!(d.path().join("2030060113").is_dir());
        j.prune(datetime!(2030-06-02 14:00 UTC)).unwrap();
        assert!(d.path().join("2030060113").is_dir(), "kept for a day after its hour");
        j.prune(datetime!(2030-06-02 15:00 UTC)).unwrap();
        assert!(!d.path().join("2030060113").exists());
        assert_eq!(parse_bucket("2030060113"), Some(datetime!(2030-06-01 13:00 UTC)));
        assert_eq!(parse_bucket("20300601"), None);
    }

    #[test]
    fn claimed_as_issued_then_taken_back() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::unsynced(d.path());
        let now = datetime!(2030-06-01 12:00 UTC);
        let exp = datetime!(2030-06-01 13:30 UTC);
        let used = Claim::Used { certname: "a".into(), time: "2030-06-01T12:00:00Z".into() };
        let landed = |_: &str| Ok(true);
        let lost = |_: &str| Ok(false);
        let by = |serial, store, landed| IssuedBy { serial, store, landed };
        let here = |serial| by(serial, "s1", &landed);
        assert_eq!(j.claim_issued("k", exp, "a", "key1", &here("01"), now).unwrap(), Claim::Fresh);
        assert_eq!(j.claim("k", exp, "a", "key1", true, now).unwrap(), used, "spent at once");
        assert_eq!(j.claim_issued("k", exp, "a", "key1", &here("02"), now).unwrap(), used, "its serial landed");
        assert_eq!(j.claim_issued("k", exp, "a", "key2", &by("03", "s1", &lost), now).unwrap(), used, "another key");
        let elsewhere = by("04", "s2", &lost);
        assert_eq!(j.claim_issued("k", exp, "a", "key1", &elsewhere, now).unwrap(), used, "another store's mark");
        let never = by("04", "s1", &lost);
        assert_eq!(j.claim_issued("k", exp, "a", "key1", &never, now).unwrap(), Claim::Fresh, "never stored");
        j.unissue("k", exp, "a", "key1", now).unwrap();
        assert_eq!(j.claim("k", exp, "a", "key2", true, now).unwrap(), used, "still this key's");
        assert_eq!(j.claim_issued("k", exp, "a", "key1", &here("05"), now).unwrap(), Claim::Fresh, "its retry");
        assert_eq!(j.claim("k", exp, "a", "key1", true, now).unwrap(), used, "spent again");
        assert!(j.restore_issued("k2", exp, "b", "key3", now).unwrap());
        let used_b = Claim::Used { certname: "b".into(), time: "2030-06-01T12:00:00Z".into() };
        assert_eq!(j.claim("k2", exp, "b", "key3", true, now).unwrap(), used_b, "restored as spent");
        assert!(!j.restore_issued("k2", exp, "b", "key4", now).unwrap(), "another holder's entry is kept");
        assert_eq!(j.claim("k2", exp, "b", "key3", true, now).unwrap(), used_b);
        // An entry a power loss emptied: absent for the CA, under its lock.
        let empty = j.entry("k3", exp);
        std::fs::create_dir_all(empty.parent().unwrap()).unwrap();
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(j.claim_issued("k3", exp, "c", "key5", &here("06"), now).unwrap(), Claim::Fresh);
    }
}
