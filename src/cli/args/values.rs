//! The value parsers and limits of vouch's flags, and the rule every output follows: clap and
//! std only, as the rest of `args`.

/// The rule for every file vouch writes, shown in each output option's help.
pub(super) const OUTPUT_RULE: &str = "Outputs: - is stdout; a device or FIFO is written through; a symbolic link or \
                                      directory is refused; a regular file is written atomically (temporary file, \
                                      rename). A private key, and the certificate or CSR made with it, never \
                                      replace an existing file; every other output (attributes, certificates, \
                                      CRLs) replaces it.";

/// Upper bounds of `vouch serve`'s numeric limits (each also at least 1).
pub const MAX_BODY_LIMIT: u64 = 64 * 1024 * 1024;
pub const MAX_TIMEOUT_SECS: u64 = 3600;
pub const MAX_LIFETIME_SECS: u64 = 7 * 86_400;
pub const MAX_CONNECTIONS: u64 = 1_000_000;
pub const MAX_THREADS: u64 = 1024;

/// `vouch ldap schema --backend`: a 389 Directory Server backend's name as vouch writes it
/// into DNs and `nsInstance`: letters, digits, `-` and `_`, at most 64 (what `dsconf backend
/// create --be-name` makes; nothing that would change an LDIF line or a DN).
pub(super) fn ds389_backend(s: &str) -> Result<String, String> {
    let ok = !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!("{s:?} is not a backend name: letters, digits, '-' and '_', at most 64 (such as userRoot)"))
    }
}

/// The largest `--max-uses` any policy allows (`templates.max_uses` is at most this:
/// `policy::MAX_USES_LIMIT`, which a unit test keeps equal).
pub const MAX_TEMPLATE_USES: u64 = 1_000_000;

/// `--max-uses`: a count checked later against the policy at hand (whose maximum the refusal
/// names); a number past any count a template may carry is refused here, as it was given.
pub(super) fn count_value(s: &str) -> Result<u64, String> {
    let t = s.trim();
    match t.parse::<u64>() {
        Ok(n) => Ok(n),
        Err(_) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => Err(format!(
            "{t} is too large: a template yields from 1 to {MAX_TEMPLATE_USES} certificates at most (and at \
             most the CA policy's templates.max_uses)"
        )),
        Err(_) => Err("must be a whole number, at least 1 (the certificates the template yields)".to_string()),
    }
}

/// A numeric flag's value: a whole number from `min` to `max` (none: as large as `T` holds).
/// Every numeric flag takes a negative number as its value (`allow_negative_numbers`), so
/// that `--days -1` is refused here with the range instead of as an unknown flag `-1`.
pub(super) fn whole_number<T: TryFrom<u64>>(s: &str, min: u64, max: Option<u64>) -> Result<T, String> {
    let range = match max {
        Some(max) => format!("a whole number from {min} to {max}"),
        None => format!("a whole number, at least {min}"),
    };
    // The largest value the flag takes: its own maximum, else the largest `T` holds.
    let largest = max.unwrap_or_else(|| {
        [u64::MAX, u64::from(u32::MAX), u64::from(u16::MAX), u64::from(u8::MAX)]
            .into_iter()
            .find(|n| T::try_from(*n).is_ok())
            .unwrap_or(0)
    });
    let t = s.trim();
    let too_large = || format!("{t} is too large: at most {largest}");
    match t.parse::<u64>() {
        Ok(n) if n > largest && n >= min => Err(too_large()),
        Ok(n) if n >= min => T::try_from(n).map_err(|_| too_large()),
        // A number (digits only) too large for any flag.
        Err(_) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => Err(too_large()),
        _ => Err(format!("must be {range}")),
    }
}

/// `--listen`/`--addr`: an IP address and a port, with the fix for a bare port or name.
pub(super) fn parse_socket_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    s.parse::<std::net::SocketAddr>().map_err(|_| {
        let port = s.trim().trim_start_matches(':');
        if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
            format!("'{s}' is a port without an address: give 127.0.0.1:{port} (this host only) or 0.0.0.0:{port} (every interface; [::]:{port} for IPv6)")
        } else {
            format!("'{s}' is not an IP address and port such as 127.0.0.1:8140, 0.0.0.0:8140 or [::1]:8140 (host names are not accepted)")
        }
    })
}

// `check_server_name`: one source, also compiled as `vouch::encoding::server_name` (the
// library checks `ServeOptions` with it); `include!` keeps this file clap + std only.
include!("../../encoding/server_name.rs");
