//! Entries as vouch reads and writes them: what a search returned for an entry (its
//! attributes by lowercase name), and the encoding of the values vouch puts into entries,
//! filters and assertions (GeneralizedTime, hex, certnames).

use crate::store::{CertRecord, StoreError};
use ldap3::SearchEntry;
use std::collections::{HashMap, HashSet};
use time::OffsetDateTime;

/// What one search returned for an entry: attribute name (lowercase) → values (bytes).
#[derive(Debug, Default)]
pub(super) struct Entry {
    pub(super) dn: String,
    pub(super) attrs: HashMap<String, Vec<Vec<u8>>>,
}

impl Entry {
    pub(super) fn from(e: SearchEntry) -> Entry {
        let mut attrs: HashMap<String, Vec<Vec<u8>>> = HashMap::new();
        for (k, vs) in e.attrs {
            attrs.entry(k.to_ascii_lowercase()).or_default().extend(vs.into_iter().map(String::into_bytes));
        }
        for (k, vs) in e.bin_attrs {
            attrs.entry(k.to_ascii_lowercase()).or_default().extend(vs);
        }
        Entry { dn: e.dn, attrs }
    }

    pub(super) fn bytes(&self, name: &str) -> Option<&[u8]> {
        self.attrs.get(&name.to_ascii_lowercase()).and_then(|v| v.first()).map(Vec::as_slice)
    }

    pub(super) fn text(&self, name: &str) -> Option<String> {
        self.bytes(name).map(|b| String::from_utf8_lossy(b).into_owned())
    }

    pub(super) fn damaged(&self, detail: impl Into<String>) -> StoreError {
        StoreError::Ldap { op: "read", dn: self.dn.clone(), detail: format!("damaged entry: {}", detail.into()) }
    }

    pub(super) fn need(&self, name: &str) -> Result<String, StoreError> {
        self.text(name).ok_or_else(|| self.damaged(format!("no {name}")))
    }

    pub(super) fn revision(&self) -> Result<u64, StoreError> {
        self.need("vouchRevision")?.parse::<u64>().map_err(|e| self.damaged(format!("vouchRevision: {e}")))
    }

    pub(super) fn record(&self) -> Result<CertRecord, StoreError> {
        let b = self.bytes("vouchRecord").ok_or_else(|| self.damaged("no vouchRecord"))?;
        serde_json::from_slice(b).map_err(|e| self.damaged(format!("vouchRecord: {e}")))
    }
}

/// `YYYYMMDDHHMMSSZ` (GeneralizedTime, UTC).
pub(super) fn gtime(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!("{:04}{:02}{:02}{:02}{:02}{:02}Z", t.year(), u8::from(t.month()), t.day(), t.hour(), t.minute(), t.second())
}

/// GeneralizedTime back to RFC 3339 (for messages); the input itself if it does not read.
pub(super) fn gtime_to_rfc3339(s: &str) -> String {
    let d = |a: usize, b: usize| s.get(a..b).filter(|x| x.bytes().all(|c| c.is_ascii_digit()));
    match (d(0, 4), d(4, 6), d(6, 8), d(8, 10), d(10, 12), d(12, 14)) {
        (Some(y), Some(mo), Some(da), Some(h), Some(mi), Some(se)) => format!("{y}-{mo}-{da}T{h}:{mi}:{se}Z"),
        _ => s.to_string(),
    }
}

/// Lowercase hex of at most 128 characters: the only values vouch puts into filters and
/// assertions besides certnames (checked by the certname rules) and integers.
pub(super) fn check_hex(what: &str, s: &str) -> Result<(), StoreError> {
    if !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(())
    } else {
        Err(StoreError::Ldap { op: "build a filter", dn: String::new(), detail: format!("{what} {s:?} is not hex") })
    }
}

pub(super) fn check_certname(certname: &str) -> Result<(), StoreError> {
    crate::decision::check_certname(certname)
        .map_err(|problem| StoreError::CertnameInvalid { certname: certname.to_string(), problem })
}

pub(super) fn set(v: impl Into<Vec<u8>>) -> HashSet<Vec<u8>> {
    HashSet::from([v.into()])
}
