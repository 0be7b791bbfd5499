//! Signature version 3: a template the conductor signs once for an autoscaling group
//! (every instance gets the same user-data). What it adds to version 1's attributes
//! (.2.8 the certname pattern, .2.9 the most certificates it yields, .2.7 the template's
//! id, .2.10 the instance identity binding), their rules, the canonical string and the keys
//! that make each instance's use one-time and count it (docs/attributes.md).

use crate::encoding::oids;

pub use super::attrs::Template;

/// The largest .2.9 any policy accepts.
pub const MAX_USES: u64 = 1_000_000;

/// The longest certname pattern.
pub const MAX_PATTERN: usize = 200;

/// The version 3 canonical string: `OID=value\n` for .2.2, .2.3, .2.4, .2.5, .2.8, .2.9,
/// .2.7, .2.10, in that order (docs/attributes.md).
pub fn canonical_v3(version: &str, expiry: &str, conductor: &str, classification: &str, t: &Template) -> Vec<u8> {
    let mut out = super::attrs::canonical_v1(version, expiry, conductor, classification);
    for (oid, value) in [
        (oids::ATTR_TEMPLATE_PATTERN, t.pattern.as_str()),
        (oids::ATTR_MAX_USES, t.max_uses.as_str()),
        (oids::ATTR_NONCE, t.id.as_str()),
        (oids::ATTR_IDENTITY_BINDING, t.binding.as_str()),
    ] {
        out.extend_from_slice(oids::dotted(oid).as_bytes());
        out.push(b'=');
        out.extend_from_slice(value.as_bytes());
        out.push(b'\n');
    }
    out
}

fn is_label_char(b: u8) -> bool {
    matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_')
}

/// Checks a certname pattern: lowercase DNS labels; the first is `*` or `PREFIX*` (one
/// `*`, last in the first label, PREFIX not starting with `-`), then at least two literal
/// labels (`web-*.asg.example.com`). `*` stands for one or more letters, digits, `-` or
/// `_` (never a dot): exactly one label, or the rest of a label after its prefix.
pub fn check_pattern(p: &str) -> Result<(), String> {
    if p.is_empty() || p.len() > MAX_PATTERN {
        return Err(format!("it must have 1 to {MAX_PATTERN} characters"));
    }
    let Some((first, rest)) = p.split_once('.') else {
        return Err("it has a single label; write PREFIX*.DOMAIN, e.g. web-*.asg.example.com".into());
    };
    let Some(prefix) = first.strip_suffix('*') else {
        return Err("its first label must end with the one '*' (e.g. web-*.asg.example.com)".into());
    };
    if !prefix.bytes().all(is_label_char) || prefix.starts_with('-') || prefix.len() > 62 {
        return Err(format!("the first label's prefix {prefix:?} is not the start of a host name label"));
    }
    let labels: Vec<&str> = rest.split('.').collect();
    if labels.len() < 2 {
        return Err("after the first label it needs a domain of at least two labels (e.g. asg.example.com)".into());
    }
    for l in labels {
        if l.is_empty() || l.len() > 63 || !l.bytes().all(is_label_char) || l.starts_with('-') || l.ends_with('-') {
            return Err(format!("label {l:?} is not a lowercase host name label (a '*' may only end the first label)"));
        }
    }
    Ok(())
}

/// Whether `certname` matches a pattern [`check_pattern`] accepts: the prefix, one or more
/// label characters, then the pattern's domain exactly.
pub fn pattern_matches(pattern: &str, certname: &str) -> bool {
    let Some((first, domain)) = pattern.split_once('.') else { return false };
    let Some(prefix) = first.strip_suffix('*') else { return false };
    let Some((label, rest)) = certname.split_once('.') else { return false };
    rest == domain
        && label.len() > prefix.len()
        && label.starts_with(prefix)
        && label.bytes().skip(prefix.len()).all(is_label_char)
}

/// Checks a .2.9 value: a canonical decimal in 1..=`cap`.
pub fn parse_max_uses(v: &str, cap: u64) -> Result<u64, String> {
    let canonical = !v.is_empty() && v.len() <= 7 && v.bytes().all(|b| b.is_ascii_digit()) && !v.starts_with('0');
    match v.parse::<u64>() {
        Ok(n) if canonical && (1..=cap.min(MAX_USES)).contains(&n) => Ok(n),
        _ => Err(format!("must be a decimal from 1 to {} with no sign or leading zero", cap.min(MAX_USES))),
    }
}

/// Checks a .2.10 value: empty (unbound), or `aws:` and a certname template holding
/// `{instance-id}` exactly once, the rest lowercase host name characters and dots.
pub fn check_binding(b: &str) -> Result<(), String> {
    if b.is_empty() {
        return Ok(());
    }
    let Some(name) = b.strip_prefix("aws:") else {
        return Err("an identity binding is empty or starts with 'aws:' (the only provider so far)".into());
    };
    let rest = name.replacen("{instance-id}", "", 1);
    if name.len() > MAX_PATTERN || rest.contains('{') || rest.len() == name.len() {
        return Err(
            "its certname template must hold {instance-id} exactly once (e.g. aws:{instance-id}.web.example.com)"
                .into(),
        );
    }
    if !rest.bytes().all(|c| is_label_char(c) || c == b'.') {
        return Err("its certname template holds characters a certname cannot".into());
    }
    Ok(())
}

/// What counts a template's uses, fleet-wide: SHA-256 over the conductor certificate's
/// SHA-256 and the template id (another conductor signing the same id counts apart).
pub fn template_key(conductor_der: &[u8], id: &str) -> String {
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    ctx.update(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, conductor_der).as_ref());
    ctx.update(id.as_bytes());
    format!("v3-template:{}", crate::encoding::hex(ctx.finish().as_ref()))
}

/// Whom one use of a template belongs to: the instance id when the template is bound to
/// the instance's identity (a relaunched instance id is a replay), else the certname.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instance {
    InstanceId(String),
    Certname(String),
}

/// The one-time key of one instance's use of a template (its replay-journal key, and the
/// key its count is recorded under).
pub fn instance_key(template_key: &str, instance: &Instance) -> String {
    let who = match instance {
        Instance::InstanceId(id) => format!("instance-id:{id}"),
        Instance::Certname(c) => format!("certname:{c}"),
    };
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    ctx.update(template_key.as_bytes());
    ctx.update(b"\0");
    ctx.update(who.as_bytes());
    format!("v3-instance:{}", crate::encoding::hex(ctx.finish().as_ref()))
}

/// What a conductor signs a template for: the pattern, max uses and identity binding
/// (empty: unbound); the template's id is drawn fresh.
pub struct TemplateRequest<'a> {
    pub pattern: &'a str,
    pub max_uses: u64,
    pub binding: &'a str,
}

/// Signs a template (signature version 3) with a conductor key: the values are checked
/// first (the CA would refuse a malformed one), the id is a fresh 128-bit nonce.
pub fn vouch_template(
    cert_der: &[u8],
    key: &rcgen::KeyPair,
    classification: &crate::vouching::classification::Classification,
    expiry: time::OffsetDateTime,
    encoding: super::attrs::CertEncoding,
    req: &TemplateRequest<'_>,
) -> Result<super::attrs::VouchedAttributes, String> {
    check_pattern(req.pattern).map_err(|p| format!("certname pattern {:?}: {p}", req.pattern))?;
    let max_uses = req.max_uses.to_string();
    parse_max_uses(&max_uses, MAX_USES).map_err(|p| format!("max uses {max_uses}: {p}"))?;
    check_binding(req.binding).map_err(|p| format!("identity binding {:?}: {p}", req.binding))?;
    let (expiry, conductor, classification) =
        super::attrs::common_values(cert_der, key, classification, expiry, encoding)?;
    let version = "3".to_string();
    let template = Template {
        pattern: req.pattern.to_string(),
        max_uses,
        id: super::attrs::new_nonce()?,
        binding: req.binding.to_string(),
    };
    let msg = canonical_v3(&version, &expiry, &conductor, &classification, &template);
    let signature = super::attrs::conductor_signature(key, &msg)?;
    Ok(super::attrs::VouchedAttributes {
        signature,
        version,
        expiry,
        conductor,
        classification,
        binding: None,
        template: Some(template),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        for ok in ["web-*.asg.example.com", "*.asg.example.com", "w*.a.b"] {
            assert!(check_pattern(ok).is_ok(), "{ok}");
        }
        for bad in ["*", "web-*", "*.com", "web-*.*.example.com", "we*b.a.b", "**.a.b", "-*.a.b", "Web-*.a.b", ""] {
            assert!(check_pattern(bad).is_err(), "{bad}");
        }
        assert!(pattern_matches("web-*.asg.example.com", "web-1.asg.example.com"));
        assert!(pattern_matches("*.asg.example.com", "i-0abc.asg.example.com"));
        assert!(!pattern_matches("web-*.asg.example.com", "web-.asg.example.com"));
        assert!(!pattern_matches("web-*.asg.example.com", "web-1.x.asg.example.com"));
        assert!(!pattern_matches("web-*.asg.example.com", "db-1.asg.example.com"));
        assert!(!pattern_matches("web-*.asg.example.com", "web-1.asg.example.com.evil"));
    }

    #[test]
    fn max_uses_and_binding() {
        assert_eq!(parse_max_uses("500", MAX_USES), Ok(500));
        for bad in ["0", "0500", "+5", "1000001", "", "5 "] {
            assert!(parse_max_uses(bad, MAX_USES).is_err(), "{bad}");
        }
        assert!(parse_max_uses("600", 500).is_err());
        assert!(check_binding("").is_ok());
        assert!(check_binding("aws:{instance-id}.web.asg.example.com").is_ok());
        assert!(check_binding("gcp:{instance-id}.x.y").is_err());
        assert!(check_binding("aws:web.example.com").is_err());
        assert!(check_binding("aws:{instance-id}{instance-id}.x").is_err());
    }
}
