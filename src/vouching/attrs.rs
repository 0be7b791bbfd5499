//! The conductor-vouched attributes (.2.1 … .2.5), the version 1 canonical
//! string, conductor-side signing, and the file formats they travel in.

use crate::encoding::oids;
use crate::encoding::time::format_rfc3339;
use crate::vouching::classification::Classification;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use std::collections::BTreeMap;
use time::OffsetDateTime;

/// The five attribute values, exactly as carried (the strings are signed byte for byte).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VouchedAttributes {
    /// .2.1: the signature, base64.
    pub signature: String,
    /// .2.2: the signature version, a decimal integer.
    pub version: String,
    /// .2.3: the expiry, RFC 3339.
    pub expiry: String,
    /// .2.4: the conductor's certificate (single-line base64 DER, or PEM).
    pub conductor: String,
    /// .2.5: the classification, base64 YAML.
    pub classification: String,
    /// .2.6 and .2.7 (version 2 only): the vouched certname and the one-time nonce.
    pub binding: Option<Binding>,
    /// .2.8, .2.9, .2.7 and .2.10 (version 3 only): the template.
    pub template: Option<Template>,
}

/// What version 2 adds: the certname and a one-time nonce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub certname: String,
    pub nonce: String,
}

/// What version 3 signs besides version 1's four values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// .2.8: the certname pattern (see [`super::template::check_pattern`]).
    pub pattern: String,
    /// .2.9: at most how many certificates the template yields, decimal.
    pub max_uses: String,
    /// .2.7: the template's id (a nonce: 32 to 128 lowercase hex digits).
    pub id: String,
    /// .2.10: the instance identity binding; empty: unbound.
    pub binding: String,
}

/// A fresh nonce: 128 random bits as 32 lowercase hex digits.
pub fn new_nonce() -> Result<String, String> {
    let mut b = [0u8; 16];
    aws_lc_rs::rand::fill(&mut b).map_err(|_| "no randomness available".to_string())?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Whether a nonce has the version 2 form: 32 to 128 lowercase hex digits.
pub fn is_nonce(s: &str) -> bool {
    (32..=128).contains(&s.len()) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The version 2 canonical string: version 1's lines, then `.2.6=certname\n` and `.2.7=nonce\n`.
pub fn canonical_v2(
    version: &str,
    expiry: &str,
    conductor: &str,
    classification: &str,
    certname: &str,
    nonce: &str,
) -> Vec<u8> {
    let mut out = canonical_v1(version, expiry, conductor, classification);
    for (oid, value) in [(oids::ATTR_CERTNAME, certname), (oids::ATTR_NONCE, nonce)] {
        out.extend_from_slice(oids::dotted(oid).as_bytes());
        out.push(b'=');
        out.extend_from_slice(value.as_bytes());
        out.push(b'\n');
    }
    out
}

/// The version 1 canonical string: `OID=value\n` for .2.2, .2.3, .2.4, .2.5.
pub fn canonical_v1(version: &str, expiry: &str, conductor: &str, classification: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(conductor.len() + classification.len() + 128);
    for (oid, value) in [
        (oids::ATTR_VERSION, version),
        (oids::ATTR_EXPIRY, expiry),
        (oids::ATTR_CONDUCTOR, conductor),
        (oids::ATTR_CLASSIFICATION, classification),
    ] {
        out.extend_from_slice(oids::dotted(oid).as_bytes());
        out.push(b'=');
        out.extend_from_slice(value.as_bytes());
        out.push(b'\n');
    }
    out
}

/// How the conductor certificate travels in attribute .2.4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CertEncoding {
    /// Standard base64 of the DER certificate on one line (default: fits every format).
    #[default]
    Base64Der,
    /// PEM, as in the seed's example (multi-line: not for the txt format).
    Pem,
}

/// Decodes a .2.4 value: PEM if it starts with a BEGIN line, else base64 DER.
///
/// Both forms are strict, so that no byte of the signed string is ignored: the
/// PEM form is exactly one CERTIFICATE block (optionally followed by one line
/// end), its lines base64 only; the base64 form is one line of standard base64.
/// Nothing may surround them (no junk that a lenient reader would skip).
pub fn decode_conductor_cert(value: &str) -> Result<Vec<u8>, String> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    if value.starts_with("-----BEGIN") {
        let body = value.strip_suffix('\n').unwrap_or(value);
        let body = body.strip_suffix('\r').unwrap_or(body);
        let inner = body
            .strip_prefix(BEGIN)
            .and_then(|b| b.strip_suffix(END))
            .ok_or_else(|| "the PEM value must be exactly one CERTIFICATE block, with nothing around it".to_string())?;
        let mut b64 = String::new();
        for line in inner.split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if !line.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=')) {
                return Err("the PEM block holds a line that is not base64".into());
            }
            b64.push_str(line);
        }
        STANDARD.decode(b64.as_bytes()).map_err(|e| format!("the PEM block is not valid base64 ({e})"))
    } else {
        if !value.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=')) {
            return Err("neither a PEM block nor one line of base64 DER".into());
        }
        STANDARD.decode(value.as_bytes()).map_err(|e| format!("not valid base64 DER ({e})"))
    }
}

/// Signs attributes with a conductor key: version 1 without a certname,
/// version 2 (bound to `certname`, with a fresh nonce) with one.
///
/// `cert_der` is the conductor certificate; its public key must match `key`.
pub fn vouch(
    cert_der: &[u8],
    key: &rcgen::KeyPair,
    classification: &Classification,
    expiry: OffsetDateTime,
    encoding: CertEncoding,
    certname: Option<&str>,
) -> Result<VouchedAttributes, String> {
    let (expiry, conductor, classification) = common_values(cert_der, key, classification, expiry, encoding)?;
    let (version, binding) = match certname {
        None => ("1".to_string(), None),
        Some(c) => ("2".to_string(), Some(Binding { certname: c.to_string(), nonce: new_nonce()? })),
    };
    let msg = match &binding {
        None => canonical_v1(&version, &expiry, &conductor, &classification),
        Some(b) => canonical_v2(&version, &expiry, &conductor, &classification, &b.certname, &b.nonce),
    };
    let signature = conductor_signature(key, &msg)?;
    Ok(VouchedAttributes { signature, version, expiry, conductor, classification, binding, template: None })
}

/// The values every version signs (.2.3, .2.4, .2.5), once the key is known to belong to
/// the conductor certificate.
pub(crate) fn common_values(
    cert_der: &[u8],
    key: &rcgen::KeyPair,
    classification: &Classification,
    expiry: OffsetDateTime,
    encoding: CertEncoding,
) -> Result<(String, String, String), String> {
    use rcgen::PublicKeyData;
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der)
        .map_err(|e| format!("the conductor certificate does not parse: {e}"))?;
    if cert.public_key().raw != key.subject_public_key_info().as_slice() {
        return Err("the private key does not belong to the conductor certificate".into());
    }
    let expiry = format_rfc3339(expiry);
    let conductor = match encoding {
        CertEncoding::Base64Der => STANDARD.encode(cert_der),
        CertEncoding::Pem => crate::encoding::pem::encode("CERTIFICATE", cert_der),
    };
    let classification = classification.to_base64();
    Ok((expiry, conductor, classification))
}

/// Signs a canonical string; returns base64. RSA keys sign PKCS#1 v1.5 SHA-256,
/// P-256 ECDSA SHA-256, P-384 ECDSA SHA-384 (DER signatures), Ed25519 pure Ed25519.
pub fn conductor_signature(key: &rcgen::KeyPair, msg: &[u8]) -> Result<String, String> {
    let sig = rcgen::SigningKey::sign(key, msg).map_err(|e| format!("signing failed: {e}"))?;
    Ok(STANDARD.encode(sig))
}

/// Signs the version 1 canonical string of these exact values; returns base64.
/// RSA keys sign PKCS#1 v1.5 SHA-256, P-256 ECDSA SHA-256, P-384 ECDSA SHA-384
/// (DER signatures), Ed25519 pure Ed25519.
pub fn conductor_signature_v1(
    key: &rcgen::KeyPair,
    version: &str,
    expiry: &str,
    conductor: &str,
    classification: &str,
) -> Result<String, String> {
    conductor_signature(key, &canonical_v1(version, expiry, conductor, classification))
}

/// What goes into a Puppet agent's `csr_attributes.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CsrAttributes {
    /// Dotted OID (or Puppet short name) → value.
    #[serde(default)]
    pub custom_attributes: BTreeMap<String, String>,
    #[serde(default)]
    pub extension_requests: BTreeMap<String, String>,
}

impl CsrAttributes {
    /// The five vouched attributes, plus the classification mirror request when `mirror` is given.
    pub fn from_vouched(a: &VouchedAttributes, mirror: Option<&[u64]>) -> Self {
        let mut c = CsrAttributes::default();
        for (oid, v) in [
            (oids::ATTR_SIGNATURE, &a.signature),
            (oids::ATTR_VERSION, &a.version),
            (oids::ATTR_EXPIRY, &a.expiry),
            (oids::ATTR_CONDUCTOR, &a.conductor),
            (oids::ATTR_CLASSIFICATION, &a.classification),
        ] {
            c.custom_attributes.insert(oids::dotted(oid), v.clone());
        }
        if let Some(b) = &a.binding {
            c.custom_attributes.insert(oids::dotted(oids::ATTR_CERTNAME), b.certname.clone());
            c.custom_attributes.insert(oids::dotted(oids::ATTR_NONCE), b.nonce.clone());
        }
        if let Some(t) = &a.template {
            for (oid, v) in [
                (oids::ATTR_TEMPLATE_PATTERN, &t.pattern),
                (oids::ATTR_MAX_USES, &t.max_uses),
                (oids::ATTR_NONCE, &t.id),
                (oids::ATTR_IDENTITY_BINDING, &t.binding),
            ] {
                c.custom_attributes.insert(oids::dotted(oid), v.clone());
            }
        }
        if let Some(m) = mirror {
            c.extension_requests.insert(oids::dotted(m), a.classification.clone());
        }
        c
    }

    /// What a Puppet agent puts into its CSR from this `csr_attributes.yaml`: the certname as
    /// CN, each custom attribute as a "PrintableString", each extension request as a UTF8String.
    pub fn csr_spec(&self, certname: &str) -> Result<crate::encoding::csr::CsrSpec, String> {
        use crate::encoding::csr::{printable, CsrSpec};
        let mut spec = CsrSpec { common_name: certname.to_string(), ..Default::default() };
        for (k, v) in &self.custom_attributes {
            let oid = oids::parse(k).ok_or_else(|| format!("custom attribute {k:?} is not an OID"))?;
            spec.attributes.push((oid, vec![printable(v)]));
        }
        for (k, v) in &self.extension_requests {
            let oid =
                oids::parse(k).ok_or_else(|| format!("extension request {k:?} is neither an OID nor a pp_* name"))?;
            spec.extension_requests.push((oid, v.clone()));
        }
        Ok(spec)
    }
}

/// Output formats of `vouch conductor sign`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Puppet's csr_attributes.yaml, values quoted for Puppet's safe_load.
    #[default]
    PuppetYaml,
    /// The seed's csr_attributes.txt: `OID = value` lines.
    Txt,
    /// A #cloud-config document with puppet: csr_attributes:.
    CloudConfig,
    /// JSON: {"custom_attributes": {...}, "extension_requests": {...}}.
    Json,
}

/// A YAML scalar that every YAML 1.1 loader (Ruby's Psych included) reads back
/// as exactly this string.
pub fn yaml_quote(s: &str) -> String {
    if s.chars().all(|c| c != '\'' && !c.is_control()) {
        format!("'{s}'")
    } else {
        // Double-quoted with escapes; JSON's string syntax is valid here.
        serde_json::Value::String(s.to_string()).to_string()
    }
}

fn yaml_map(out: &mut String, indent: &str, name: &str, map: &BTreeMap<String, String>) {
    if map.is_empty() {
        return;
    }
    out.push_str(&format!("{indent}{name}:\n"));
    for (k, v) in map {
        out.push_str(&format!("{indent}  {}: {}\n", yaml_quote(k), yaml_quote(v)));
    }
}

/// Renders attributes in a format. Errors if the format cannot carry a value
/// (a multi-line value in txt).
pub fn render(a: &CsrAttributes, format: Format) -> Result<String, String> {
    match format {
        Format::PuppetYaml => {
            let mut out = String::from("---\n# csr_attributes.yaml written by vouch conductor sign\n");
            yaml_map(&mut out, "", "custom_attributes", &a.custom_attributes);
            yaml_map(&mut out, "", "extension_requests", &a.extension_requests);
            Ok(out)
        }
        Format::CloudConfig => {
            let mut out = String::from("#cloud-config\npuppet:\n  csr_attributes:\n");
            yaml_map(&mut out, "    ", "custom_attributes", &a.custom_attributes);
            yaml_map(&mut out, "    ", "extension_requests", &a.extension_requests);
            Ok(out)
        }
        Format::Json => serde_json::to_string_pretty(a).map(|s| s + "\n").map_err(|e| e.to_string()),
        Format::Txt => {
            let mut out = String::from("# csr_attributes.txt written by vouch conductor sign\n");
            for (k, v) in &a.custom_attributes {
                if v.contains('\n') || v.contains('\r') {
                    return Err(format!(
                        "attribute {k} holds a multi-line value, which the txt format cannot carry; \
                         use --cert-encoding base64-der"
                    ));
                }
                out.push_str(&format!("{k} = {v}\n"));
            }
            for (k, v) in &a.extension_requests {
                if v.contains('\n') {
                    return Err(format!("extension request {k} holds a multi-line value"));
                }
                out.push_str(&format!("extension_requests.{k} = {v}\n"));
            }
            Ok(out)
        }
    }
}

/// Reads an attributes file in any of the formats above (detected from its content).
pub fn parse_file(text: &str) -> Result<CsrAttributes, String> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        return serde_json::from_str(text).map_err(|e| format!("invalid JSON attributes: {e}"));
    }
    let looks_yaml = text.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("custom_attributes:") || l.starts_with("extension_requests:") || l.starts_with("puppet:")
    });
    if looks_yaml {
        let doc: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(text).map_err(|e| format!("invalid YAML attributes: {e}"))?;
        let node = match doc.get("puppet").and_then(|p| p.get("csr_attributes")) {
            Some(n) => n.clone(),
            None => doc,
        };
        let mut out = CsrAttributes::default();
        for (section, target) in
            [("custom_attributes", &mut out.custom_attributes), ("extension_requests", &mut out.extension_requests)]
        {
            let Some(map) = node.get(section) else {
                continue;
            };
            let map = map.as_mapping().ok_or_else(|| format!("{section} must be a mapping"))?;
            for (k, v) in map {
                let key = yaml_scalar_string(k).ok_or_else(|| format!("{section}: a key is not a string"))?;
                let val = yaml_scalar_string(v).ok_or_else(|| format!("{section}.{key}: the value is not a string"))?;
                target.insert(key, val);
            }
        }
        return Ok(out);
    }
    let mut out = CsrAttributes::default();
    for (n, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let (k, v) = l.split_once('=').ok_or_else(|| format!("line {}: expected 'OID = value'", n + 1))?;
        let (k, v) = (k.trim(), v.trim());
        match k.strip_prefix("extension_requests.") {
            Some(ext) => out.extension_requests.insert(ext.to_string(), v.to_string()),
            None => out.custom_attributes.insert(k.to_string(), v.to_string()),
        };
    }
    Ok(out)
}

fn yaml_scalar_string(v: &serde_yaml_ng::Value) -> Option<String> {
    match v {
        serde_yaml_ng::Value::String(s) => Some(s.clone()),
        serde_yaml_ng::Value::Number(n) => Some(n.to_string()),
        serde_yaml_ng::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_string_is_byte_exact() {
        let s = canonical_v1("1", "2010-05-07T23:31:03+00:00", "CERT", "CLASS");
        assert_eq!(
            s,
            b"1.3.6.1.4.1.34380.2.2=1\n1.3.6.1.4.1.34380.2.3=2010-05-07T23:31:03+00:00\n\
1.3.6.1.4.1.34380.2.4=CERT\n1.3.6.1.4.1.34380.2.5=CLASS\n"
        );
    }

    #[test]
    fn formats_roundtrip() {
        let mut a = CsrAttributes::default();
        a.custom_attributes.insert("1.3.6.1.4.1.34380.2.2".into(), "1".into());
        a.custom_attributes.insert("1.3.6.1.4.1.34380.2.3".into(), "2030-01-01T00:00:00Z".into());
        a.extension_requests.insert("1.3.6.1.4.1.34380.1.2.5".into(), "Y2xhc3NlczogW10K".into());
        for f in [Format::PuppetYaml, Format::CloudConfig, Format::Json, Format::Txt] {
            let text = render(&a, f).unwrap();
            assert_eq!(parse_file(&text).unwrap(), a, "{f:?}\n{text}");
        }
        a.custom_attributes.insert("1.3.6.1.4.1.34380.2.4".into(), "-----BEGIN X-----\nAB'C\n".into());
        for f in [Format::PuppetYaml, Format::CloudConfig, Format::Json] {
            let text = render(&a, f).unwrap();
            assert_eq!(parse_file(&text).unwrap(), a, "{f:?}\n{text}");
        }
        assert!(render(&a, Format::Txt).is_err());
    }

    #[test]
    fn conductor_value_is_strict() {
        let pem = crate::encoding::pem::encode("CERTIFICATE", b"0123456789abcdef");
        assert!(decode_conductor_cert(&pem).is_ok());
        assert!(decode_conductor_cert(pem.trim_end()).is_ok());
        assert!(decode_conductor_cert(&pem.replace('\n', "\r\n")).is_ok());
        assert!(decode_conductor_cert(&format!("{pem}junk")).is_err());
        assert!(decode_conductor_cert(&format!("{pem}\n1.3.6.1.4.1.34380.2.5=x")).is_err());
        assert!(decode_conductor_cert(&format!("junk{pem}")).is_err());
        assert!(decode_conductor_cert("MDEyMzQ1Njc4OWFiY2RlZg==").is_ok());
        assert!(decode_conductor_cert("MDEy MzQ1").is_err());
        assert!(decode_conductor_cert("MDEy\nMzQ1").is_err());
    }
}
