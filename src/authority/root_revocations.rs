//! The root revocations `vouch conductor revoke` records: one line each of
//! `DIR/ca/root_revocations.txt` (appended, synced, under the store's lock), read back for the
//! root CRL and for the decision.

use super::crl_files::read_text;
use crate::error::Error;
use crate::issuance::bootstrap::DataDir;

pub use crate::policy::own_crl::ROOT_REVOCATIONS;
/// The size of [`ROOT_REVOCATIONS`] the root CRL on disk covers (`DIR/ca/`).
pub(super) const ROOT_CRL_STAMP: &str = "root_crl_revocations_size";

/// One line of `root_revocations.txt`: `SERIAL TIME REASON[ fingerprint=HEX]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootRevocation {
    /// The serial's value: lowercase hex, an even number of digits, no leading zero octet.
    pub serial: String,
    /// RFC 3339.
    pub time: String,
    /// As RFC 5280 names it (keyCompromise).
    pub reason: String,
    /// The revoked certificate's SHA-256 (lowercase hex), when its certificate was given.
    pub fingerprint: Option<String>,
}

impl RootRevocation {
    fn line(&self) -> String {
        let mut line = format!("{} {} {}", self.serial, self.time, self.reason);
        if let Some(fp) = &self.fingerprint {
            line.push_str(" fingerprint=");
            line.push_str(fp);
        }
        line
    }

    /// A line as [`RootRevocation::line`] writes it; `None`: no serial a CRL could hold. The
    /// serial is whole only where a space follows it: a line cut off inside its serial (an
    /// even number of digits left) would otherwise put another serial on the CRL.
    fn parse(line: &str) -> Option<Self> {
        let (serial, rest) = line.split_once(' ')?;
        if serial.is_empty()
            || serial.len() % 2 != 0
            || serial.len() > 40
            || !serial.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return None;
        }
        let serial = serial.to_ascii_lowercase();
        let mut fields = rest.split(' ');
        let time = fields.next().unwrap_or_default().to_string();
        let reason = fields.next().unwrap_or_default().to_string();
        let fingerprint = fields.find_map(|f| f.strip_prefix("fingerprint=")).map(str::to_string);
        Some(RootRevocation { serial: serial_value(&serial), time, reason, fingerprint })
    }

    /// The serial's octets, for the CRL.
    pub(super) fn serial_bytes(&self) -> Vec<u8> {
        hex_octets(&self.serial)
    }
}

fn hex_octets(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).filter_map(|i| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect()
}

/// A serial (lowercase hex, an even number of digits) as its value: without the leading zero
/// octets DER puts before a serial whose first bit is set (`openssl x509 -serial` prints
/// none; the certificate's own bytes carry one), so that both forms name one serial.
pub(super) fn serial_value(hex: &str) -> String {
    crate::issuance::root_issued::serial_value(hex)
}

/// A value that changes whenever a root revocation is recorded: the size of the list.
pub(super) fn revocations_stamp(dir: &DataDir) -> String {
    std::fs::symlink_metadata(dir.file(ROOT_REVOCATIONS)).map(|m| m.len()).unwrap_or(0).to_string()
}

/// Every root revocation recorded, in order (none without the file). A line that names no
/// serial a CRL could hold is left out, with a `root-revocation-lines-damaged` warning.
pub(super) fn read_root_revocations(dir: &DataDir) -> Result<Vec<RootRevocation>, Error> {
    let path = dir.file(ROOT_REVOCATIONS);
    let text = match read_text(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(Error::Io { path, op: "read", source }),
    };
    let mut damaged = 0usize;
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match RootRevocation::parse(line.trim()) {
            Some(r) => out.push(r),
            None => damaged = damaged.saturating_add(1),
        }
    }
    if damaged > 0 {
        tracing::warn!(
            event = "root-revocation-lines-damaged",
            path = %path.display(),
            lines = damaged,
            detail = "lines that name no serial are left off the root CRL",
        );
    }
    Ok(out)
}

/// Appends one root revocation, synced, on a line of its own (after a last line cut short).
pub(super) fn append_root_revocation(dir: &DataDir, r: &RootRevocation) -> Result<(), Error> {
    let path = dir.file(ROOT_REVOCATIONS);
    let before = match read_text(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => return Err(Error::Io { path, op: "read", source }),
    };
    let line = if before.is_empty() || before.ends_with('\n') { r.line() } else { format!("\n{}", r.line()) };
    crate::files::durable::append_line(&path, &line).map_err(|source| Error::Io { path, op: "append to", source })
}

#[cfg(test)]
mod tests {
    use super::{serial_value, RootRevocation};

    #[test]
    fn a_root_revocation_line_reads_back_and_serials_compare_by_value() {
        let r = RootRevocation {
            serial: "8a01".into(),
            time: "2030-01-01T00:00:00Z".into(),
            reason: "keyCompromise".into(),
            fingerprint: Some("ab".repeat(32)),
        };
        assert_eq!(RootRevocation::parse(&r.line()), Some(r.clone()));
        let bare = RootRevocation { fingerprint: None, ..r.clone() };
        assert_eq!(RootRevocation::parse(&bare.line()), Some(bare));
        // The certificate's bytes (a leading zero octet) and openssl's form name one serial.
        assert_eq!(serial_value("008a01"), "8a01");
        assert_eq!(serial_value("00"), "00");
        assert_eq!(
            RootRevocation::parse("008a01 2030-01-01T00:00:00Z keyCompromise").map(|r| r.serial_bytes()),
            Some(vec![0x8a, 0x01])
        );
        // Cut off inside its serial: no space after it, no serial.
        for bad in ["", "8a01", "xyz 2030 keyCompromise", "8a0 2030 keyCompromise", &format!("{} x", "ab".repeat(21))] {
            assert_eq!(RootRevocation::parse(bad), None, "{bad:?}");
        }
    }
}
