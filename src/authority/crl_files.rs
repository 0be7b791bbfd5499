//! The small files beside a CRL (its number, read as text) and the CRL file's own date:
//! the number the next CRL gets, and the modification second a new CRL must carry.

use super::crl_der::{crl_number_of, CrlNumber};
use crate::error::Error;
use time::OffsetDateTime;

/// The number the next CRL gets. A CRL number never goes back (RFC 5280 5.2.3; a compile
/// server refuses a CRL numbered lower than the one it holds), whatever happened to the
/// files: it is one more than the last one issued (the larger of the number in
/// `number_file`, the operator's to edit, and the crlNumber of the CRL in `crl_file`), and
/// at least the current Unix time. The time is what keeps a data directory restored from a
/// backup (both files older) or a damaged `number_file` from numbering a CRL below one
/// already published (in microseconds: numbers jump, which RFC 5280 allows). Numbers are
/// counted in 128 bits (RFC 5280 allows 20 octets): a CRL on disk numbered beyond them (not
/// vouch's) is refused, vouch could only number the next one lower.
pub(super) fn next_crl_number(
    number_file: &std::path::Path,
    crl_file: &std::path::Path,
    now: OffsetDateTime,
) -> Result<u128, Error> {
    let mut unknown = Vec::new();
    let from_file = match read_text(number_file) {
        Ok(s) => s.trim().parse::<u128>().ok().or_else(|| {
            unknown.push((number_file, "not a number"));
            None
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(_) => {
            unknown.push((number_file, "unreadable"));
            None
        }
    };
    let from_crl = match crate::files::durable::read_regular(crl_file) {
        Ok(pem) => match crl_number_of(&pem) {
            CrlNumber::Fits(n) => Some(n),
            CrlNumber::None => {
                unknown.push((crl_file, "a CRL with no number vouch can read"));
                None
            }
            CrlNumber::TooLarge(n) => {
                return Err(Error::Store {
                    detail: format!(
                        "{} is numbered {n}, beyond the 128-bit numbers vouch gives its CRLs: the next CRL \
                         would be numbered lower, which relying parties refuse; nothing was written. \
                         Move that CRL away only if it was never published",
                        crl_file.display()
                    ),
                })
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(_) => {
            unknown.push((crl_file, "unreadable"));
            None
        }
    };
    for (path, why) in unknown {
        tracing::warn!(
            event = "crl-number-unknown",
            path = %path.display(),
            detail = %format!("{why}: the CRL number continues from the other file and the current time"),
        );
    }
    let last = from_file.unwrap_or(0).max(from_crl.unwrap_or(0));
    let next = last
        .checked_add(1)
        .ok_or_else(|| Error::Store { detail: format!("{} is at its largest value", number_file.display()) })?;
    // Microseconds: faster than CRLs are ever written, so a burst never runs the count ahead
    // of the clock (a restore soon after would then fall below it).
    Ok(next.max(u128::try_from(now.unix_timestamp_nanos() / 1000).unwrap_or(0)))
}

/// A file's modification time in whole seconds since the epoch, if it exists.
pub(super) fn modified_second(path: &std::path::Path) -> Option<u64> {
    let m = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
    m.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_secs())
}

/// The modification time a CRL about to replace one last modified in second `before` must
/// carry: the whole second after both `before` and `now`. Agents ask for the CRLs with
/// If-Modified-Since, which has whole seconds and which Puppet's agent takes from its own
/// copy's modification time (when it saved it, not the server's Last-Modified): an agent that
/// saved the previous CRL earlier in the second this one is written would otherwise be
/// answered 304 and keep the previous one. Dated a second ahead, every copy saved before this
/// write is older; one saved after it is fetched once more, which costs a download, never a
/// revocation. Two CRLs within one second get successive seconds (a burst runs ahead of the
/// clock by its length). Set on the new file before it replaces the old one, so it is never
/// served with the old one's date.
pub(super) fn after_second(before: Option<u64>, now: std::time::SystemTime) -> std::time::SystemTime {
    let now = now.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let second = before.map_or(now, |b| b.max(now)).saturating_add(1);
    std::time::UNIX_EPOCH + std::time::Duration::from_secs(second)
}

/// A small file vouch writes beside the CRL, as text, never waiting on a FIFO planted there
/// ([`crate::files::durable::read_regular`]).
pub(super) fn read_text(path: impl AsRef<std::path::Path>) -> std::io::Result<String> {
    let bytes = crate::files::durable::read_regular(path.as_ref())?;
    String::from_utf8(bytes).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::after_second;

    #[test]
    fn a_new_crl_is_dated_the_second_after_both_the_one_it_replaces_and_now() {
        let at = |s: u64| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s);
        let now = at(1_000_000) + std::time::Duration::from_millis(300);
        assert_eq!(after_second(Some(1_000_005), now), at(1_000_006), "a burst pushed the last one ahead");
        assert_eq!(after_second(Some(999_990), now), at(1_000_001), "an agent's copy of this second is older");
        assert_eq!(after_second(Some(1_000_000), now), at(1_000_001), "the previous one of this same second");
        assert_eq!(after_second(None, now), at(1_000_001), "the first one");
    }
}
