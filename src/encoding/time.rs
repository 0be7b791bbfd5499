//! Every time format vouch reads or writes, in one place: RFC 3339 (expiries, records,
//! audit and log lines), Puppet's status time, HTTP dates.
#![deny(clippy::arithmetic_side_effects)]

use time::{OffsetDateTime, UtcOffset};

/// Formats a time as vouch writes times (expiries, records, audit lines): RFC 3339, UTC,
/// whole seconds, `Z`.
pub fn format_rfc3339(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Parses an RFC 3339 time (any offset, fractional seconds allowed).
pub fn parse_rfc3339(s: &str) -> Result<OffsetDateTime, time::error::Parse> {
    OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
}

/// RFC 3339 with the time's own offset and every fractional digit (`vouch serve`'s log lines).
pub fn format_rfc3339_precise(t: OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// Puppet's time format in statuses: `2031-11-21T10:34:53UTC` (vouch's RFC 3339 form
/// with Puppet's zone suffix).
pub fn format_puppet(t: OffsetDateTime) -> String {
    let mut s = format_rfc3339(t);
    s.pop();
    s.push_str("UTC");
    s
}

/// An HTTP date (RFC 9110 IMF-fixdate): `Tue, 15 Nov 1994 08:12:31 GMT`.
pub fn format_http_date(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    let fmt = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    t.format(&fmt).unwrap_or_default()
}

/// Parses an HTTP date (IMF-fixdate only).
pub fn parse_http_date(s: &str) -> Option<OffsetDateTime> {
    let fmt = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    time::PrimitiveDateTime::parse(s.trim(), &fmt).ok().map(|p| p.assume_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_is_utc_whole_seconds() {
        let t = time::macros::datetime!(2030-01-02 03:04:05.678 +02:00);
        assert_eq!(format_rfc3339(t), "2030-01-02T01:04:05Z");
        assert_eq!(parse_rfc3339("2030-01-02T01:04:05Z").ok(), Some(time::macros::datetime!(2030-01-02 01:04:05 UTC)));
    }

    #[test]
    fn puppet_time_format() {
        let t = OffsetDateTime::from_unix_timestamp(1_953_462_893).unwrap_or(OffsetDateTime::UNIX_EPOCH);
        assert_eq!(format_puppet(t), "2031-11-26T12:34:53UTC");
    }

    #[test]
    fn http_dates_round_trip() {
        let t = time::macros::datetime!(1994-11-15 08:12:31 UTC);
        assert_eq!(format_http_date(t), "Tue, 15 Nov 1994 08:12:31 GMT");
        assert_eq!(parse_http_date("Tue, 15 Nov 1994 08:12:31 GMT"), Some(t));
    }
}
