//! How an operator names a revocation: its reason (RFC 5280's names) and a serial as copied
//! from openssl's or vouch's output.

/// RFC 5280 revocation reasons vouch records.
pub const REASONS: &[&str] = &[
    "unspecified",
    "keyCompromise",
    "caCompromise",
    "affiliationChanged",
    "superseded",
    "cessationOfOperation",
    "privilegeWithdrawn",
];

pub(super) fn reason_code(r: &str) -> Option<rcgen::RevocationReason> {
    use rcgen::RevocationReason as R;
    Some(match r {
        "unspecified" => R::Unspecified,
        "keyCompromise" => R::KeyCompromise,
        "caCompromise" => R::CaCompromise,
        "affiliationChanged" => R::AffiliationChanged,
        "superseded" => R::Superseded,
        "cessationOfOperation" => R::CessationOfOperation,
        "privilegeWithdrawn" => R::PrivilegeWithdrawn,
        _ => return None,
    })
}

/// A serial as the store keeps it (lowercase hex, an even number of digits, at most 40) from
/// what an operator copies: `openssl x509 -serial`'s `serial=43A4…`, `openssl x509 -text`'s
/// `43:a4:…`, a `0x` prefix (Puppet's inventory: `0x0004`), upper or lower case, or vouch's
/// own form. An odd number of digits gets a leading zero; leading zero octets are dropped.
pub(super) fn normal_serial(given: &str) -> Option<String> {
    let t = given.trim();
    let t = t.strip_prefix("serial=").unwrap_or(t);
    let t = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t);
    // Colons only between octets (`43:a4:…`), each one or two digits.
    let mut hex = if t.contains(':') {
        let parts: Vec<&str> = t.split(':').collect();
        if parts.iter().any(|p| p.is_empty() || p.len() > 2) {
            return None;
        }
        parts.iter().map(|p| format!("{p:0>2}")).collect::<String>()
    } else {
        t.to_string()
    }
    .to_ascii_lowercase();
    if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    if hex.len() % 2 == 1 {
        hex.insert(0, '0');
    }
    // Leading zero octets say nothing of the value (Puppet's inventory pads to four digits:
    // `0x0004` is serial `04`); one the DER encoding needs is found by the caller's second
    // candidate (`00` before the value).
    while hex.len() > 2 && hex.starts_with("00") {
        hex.drain(..2);
    }
    (hex.len() <= 40).then_some(hex)
}

#[cfg(test)]
mod tests {
    /// The serial forms an operator copies are read; colons only between octets.
    #[test]
    fn serials_are_read_as_openssl_and_vouch_print_them() {
        use super::normal_serial as n;
        assert_eq!(n("serial=43A4F0").as_deref(), Some("43a4f0"));
        assert_eq!(n("43:a4:f0").as_deref(), Some("43a4f0"));
        assert_eq!(n("0x3a4f0").as_deref(), Some("03a4f0"));
        assert_eq!(n(" 43a4f0\n").as_deref(), Some("43a4f0"));
        assert_eq!(n("4:a4").as_deref(), Some("04a4"));
        // Puppet's inventory.txt spelling: padded to four digits, uppercase.
        assert_eq!(n("0x0004").as_deref(), Some("04"));
        assert_eq!(n("0x002A").as_deref(), Some("2a"));
        assert_eq!(n("0x00C3F1").as_deref(), Some("c3f1"));
        assert_eq!(n("0x0000").as_deref(), Some("00"));
        for bad in ["", "59::28", ":59", "59:", "-5928", "xyz", "43a:4f0", &"ab".repeat(21)] {
            assert_eq!(n(bad), None, "{bad:?}");
        }
    }
}
