//! Every time format vouch reads or writes, in one place: RFC 3339 (expiries, records,
//! audit and log lines), Puppet's status time, HTTP dates.
#![deny(clippy::arithmetic_side_effects)]

use time::{OffsetDateTime, UtcOffset};

/// Formats a time as vouch writes times (expiries, records, audit lines): RFC 3339, UTC,
/// whole seconds, `Z`.
pub fn format_rfc3339(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    // The calendar date once (each of year(), month() and day() works it out again), and the
    // digits written directly: several times per certificate on the service's path.
    let (year, month, day) = t.to_calendar_date();
    let (hour, minute, second) = t.to_hms();
    let Some(y) = u16::try_from(year).ok().filter(|y| *y <= 9999) else {
        return format!("{year:04}-{:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z", u8::from(month));
    };
    // Every value here is under 100.
    let two = |n: u8| [b'0'.saturating_add(n / 10), b'0'.saturating_add(n % 10)];
    let [m0, m1] = two(u8::from(month));
    let [d0, d1] = two(day);
    let [h0, h1] = two(hour);
    let [i0, i1] = two(minute);
    let [s0, s1] = two(second);
    let [y0, y1] = two((y / 100) as u8);
    let [y2, y3] = two((y % 100) as u8);
    let bytes = [y0, y1, y2, y3, b'-', m0, m1, b'-', d0, d1, b'T', h0, h1, b':', i0, i1, b':', s0, s1, b'Z'];
    bytes.iter().map(|&b| char::from(b)).collect()
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
    fn rfc3339_digits_are_those_of_the_formatter() {
        let old = |t: OffsetDateTime| {
            let t = t.to_offset(UtcOffset::UTC);
            let (h, m, s) = (t.hour(), t.minute(), t.second());
            format!("{:04}-{:02}-{:02}T{h:02}:{m:02}:{s:02}Z", t.year(), u8::from(t.month()), t.day())
        };
        for secs in [0, 1, 59, 951_782_399, 1_953_462_893, 4_102_444_800, 253_402_300_799, -1, -62_135_596_800] {
            let t = OffsetDateTime::from_unix_timestamp(secs).unwrap_or(OffsetDateTime::UNIX_EPOCH);
            assert_eq!(format_rfc3339(t), old(t), "{secs}");
        }
        let far = time::macros::datetime!(-0012-03-04 05:06:07 UTC);
        assert_eq!(format_rfc3339(far), old(far));
        assert_eq!(format_rfc3339(time::macros::datetime!(0007-08-09 10:11:12 UTC)), "0007-08-09T10:11:12Z");
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
