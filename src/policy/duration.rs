//! Durations as the policy and the command line write them: `90s`, `30m`, `2h`, `1d`.

use std::time::Duration;

/// Parses a duration like `90s`, `30m`, `24h`, `7d`, `2w`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let (digits, mult) = shape(s.trim())?;
    let n: u64 = digits.parse().ok()?;
    n.checked_mul(mult).map(Duration::from_secs)
}

/// A duration's digits and its unit in seconds, whatever the number's size: `None` for
/// anything that is not digits then one unit.
fn shape(s: &str) -> Option<(&str, u64)> {
    let split = s.find(|c: char| !c.is_ascii_digit()).filter(|&i| i > 0)?;
    let (num, unit) = s.split_at(split);
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        "y" => 365 * 86_400,
        _ => return None,
    };
    Some((num, mult))
}

/// Why `s` is not a usable (positive) duration, for messages: zero and negative durations
/// are named as such, anything else is "not a duration"; `examples` like "30m, 24h or 7d".
pub fn duration_problem(s: &str, examples: &str) -> String {
    let t = s.trim();
    if t.strip_prefix('-').is_some_and(|rest| parse_duration(rest).is_some()) {
        return format!("'{s}' is negative: a duration must be positive, like {examples}");
    }
    match parse_duration(t) {
        Some(d) if d.is_zero() => format!("'{s}' is zero: a duration must be positive, like {examples}"),
        None if shape(t).is_some() => format!("'{s}' is too large a duration: give one like {examples}"),
        _ => format!("'{s}' is not a duration like {examples}"),
    }
}

/// A duration for people: exact when it is a whole number of one unit (`1w`), else its two
/// largest units, `about` when seconds are left out (`about 1w 5h`, never `about 1w`, which
/// would read as no more than a week).
pub fn format_duration_roughly(d: Duration) -> String {
    let exact = format_duration(d);
    let s = d.as_secs();
    let Some((unit, n)) = UNITS.iter().find(|(_, n)| s >= *n) else { return exact };
    if !exact.ends_with('s') {
        return exact;
    }
    let rest = s % n;
    match UNITS.iter().find(|(_, m)| rest >= *m) {
        Some((second, m)) => {
            let approx = if rest % m == 0 { "" } else { "about " };
            format!("{approx}{}{unit} {}{second}", s / n, rest / m)
        }
        None => format!("{}{unit} {rest}s", s / n),
    }
}

/// The units a duration is written in, largest first (seconds aside).
const UNITS: [(&str, u64); 5] = [("y", 365 * 86_400), ("w", 604_800), ("d", 86_400), ("h", 3600), ("m", 60)];

/// Formats a duration in the largest whole unit.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    for (unit, n) in UNITS {
        if s >= n && s % n == 0 {
            return format!("{}{unit}", s / n);
        }
    }
    format!("{s}s")
}
