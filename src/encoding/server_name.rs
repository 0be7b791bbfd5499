// The name rule for `--server-name` (the service certificate's names). This file is
// `include!`d by src/cli/args/values.rs (clap's value parser; build.rs compiles that file alone),
// so it uses std only and has no inner attributes or `//!` comments.

/// A `--server-name`: an IP address, or a DNS host name (the service certificate's SAN,
/// and the first one its certname): labels of 1 to 63 letters, digits and '-' (not at a
/// label's ends), at most 253 characters, no empty label, no trailing dot, and a last label
/// that is not all digits (`1.2.3.4.5` is neither an address nor a name). Lowercased.
pub fn check_server_name(name: &str) -> Result<String, String> {
    if name.parse::<std::net::IpAddr>().is_ok() {
        return Ok(name.to_string());
    }
    let n = name.to_ascii_lowercase();
    let bad = |why: &str| Err(format!("'{name}' is neither an IP address nor a DNS name: {why}"));
    if n.is_empty() {
        return bad("it is empty");
    }
    if n.len() > 253 {
        return bad("it is longer than 253 characters");
    }
    let labels: Vec<&str> = n.split('.').collect();
    for l in &labels {
        if l.is_empty() {
            return bad("it has an empty label ('..', or a leading or trailing dot)");
        }
        if l.len() > 63 {
            return bad("a label is longer than 63 characters");
        }
        if !l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
            return bad("a DNS name has only letters, digits, '-' and '.'");
        }
        if l.starts_with('-') || l.ends_with('-') {
            return bad("a label starts or ends with '-'");
        }
    }
    if labels.last().is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit())) {
        return bad("its last label is all digits (an IP address has four numbers: 192.0.2.10)");
    }
    Ok(n)
}
