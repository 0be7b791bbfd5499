//! PEM in and out. Reading is lenient about what surrounds a block (CRLF line
//! endings, junk lines before and after, as Puppet Server hands a CSR to an
//! autosign executable) and strict about the block itself.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// Why a PEM block could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PemError {
    /// No `-----BEGIN <label>-----` line; `found`: the label of another block the text holds,
    /// if any (a private key given where a certificate was asked for).
    NoBlock { label: String, found: Option<String> },
    /// A BEGIN line without its END line.
    Unterminated { label: String },
    /// The body is not base64.
    BadBase64 { label: String, detail: String },
}

impl std::fmt::Display for PemError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PemError::NoBlock { label, found: None } => write!(f, "no '-----BEGIN {label}-----' block found"),
            PemError::NoBlock { label, found: Some(other) } => {
                write!(f, "no '-----BEGIN {label}-----' block found: it holds a {other} block")
            }
            PemError::Unterminated { label } => write!(f, "the {label} PEM block has no END line"),
            PemError::BadBase64 { label, detail } => {
                write!(f, "the {label} PEM block is not valid base64: {detail}")
            }
        }
    }
}

impl std::error::Error for PemError {}

/// `bytes` as text, each invalid UTF-8 sequence replaced (`String::from_utf8_lossy`), without
/// its character-by-character pass when they are valid UTF-8 (a PEM always is).
pub fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Finds the first PEM block with one of `labels` and decodes it.
/// Returns the label found and the DER bytes.
pub fn find<'l>(text: &[u8], labels: &[&'l str]) -> Result<(&'l str, Vec<u8>), PemError> {
    let text = self::text(text);
    let mut best: Option<(usize, &'l str)> = None;
    for &label in labels {
        let begin = format!("-----BEGIN {label}-----");
        if let Some(pos) = text.find(&begin) {
            if best.is_none_or(|(p, _)| pos < p) {
                best = Some((pos, label));
            }
        }
    }
    let (pos, label) = best.ok_or_else(|| PemError::NoBlock {
        label: labels.first().copied().unwrap_or("").to_string(),
        found: other_label(&text),
    })?;
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let after = &text[pos + begin.len()..];
    let stop = after.find(&end).ok_or_else(|| PemError::Unterminated { label: label.to_string() })?;
    // Every ASCII whitespace byte dropped, the runs between them copied whole (a byte-by-byte
    // filter was a few percent of a certificate's instructions: the CSR is read this way).
    let mut body = Vec::with_capacity(stop);
    for run in after.as_bytes()[..stop].split(u8::is_ascii_whitespace) {
        body.extend_from_slice(run);
    }
    let der =
        STANDARD.decode(&body).map_err(|e| PemError::BadBase64 { label: label.to_string(), detail: e.to_string() })?;
    Ok((label, der))
}

/// The label of the first `-----BEGIN <label>-----` line in `text`, if it is a plausible one
/// (capital letters, digits and spaces, at most 40 characters): said when it is not the one
/// asked for.
fn other_label(text: &str) -> Option<String> {
    let start = text.find("-----BEGIN ")? + "-----BEGIN ".len();
    let rest = &text[start..];
    let label = &rest[..rest.find("-----")?];
    let plausible = !label.is_empty()
        && label.len() <= 40
        && label.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b' ');
    plausible.then(|| label.to_string())
}

/// Encodes DER as PEM with 64-column lines and a final newline.
pub fn encode(label: &str, der: &[u8]) -> String {
    let b64 = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&self::text(chunk));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// All blocks with `label`, in order (for bundles).
pub fn find_all(text: &[u8], label: &str) -> Result<Vec<Vec<u8>>, PemError> {
    let mut out = Vec::new();
    let s = self::text(text).into_owned();
    let mut rest: &str = &s;
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    while let Some(pos) = rest.find(&begin) {
        let (_, der) = find(&rest.as_bytes()[pos..], &[label])?;
        out.push(der);
        let tail = &rest[pos..];
        match tail.find(&end) {
            Some(e) => rest = &tail[e + end.len()..],
            None => break,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crlf_and_junk() {
        let pem = encode("CERTIFICATE REQUEST", b"hello world, this is der");
        let noisy = format!("junk\r\n{}\r\nmore junk\r\n", pem.replace('\n', "\r\n"));
        let (label, der) = find(noisy.as_bytes(), &["NEW CERTIFICATE REQUEST", "CERTIFICATE REQUEST"]).unwrap();
        assert_eq!(label, "CERTIFICATE REQUEST");
        assert_eq!(der, b"hello world, this is der");
    }

    #[test]
    fn errors() {
        assert!(matches!(find(b"nothing", &["X"]), Err(PemError::NoBlock { found: None, .. })));
        let key = b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        let e = find(key, &["CERTIFICATE"]).unwrap_err();
        assert_eq!(e.to_string(), "no '-----BEGIN CERTIFICATE-----' block found: it holds a PRIVATE KEY block");
        let odd = b"-----BEGIN \x1b[31mX-----\n";
        assert!(matches!(find(odd, &["CERTIFICATE"]), Err(PemError::NoBlock { found: None, .. })));
        assert!(matches!(find(b"-----BEGIN X-----\nAAAA\n", &["X"]), Err(PemError::Unterminated { .. })));
        assert!(matches!(find(b"-----BEGIN X-----\n!!!!\n-----END X-----", &["X"]), Err(PemError::BadBase64 { .. })));
    }

    #[test]
    fn every_ascii_whitespace_in_the_body_is_dropped() {
        let der: Vec<u8> = (0..=255).collect();
        let b64 = STANDARD.encode(&der);
        let (a, b) = b64.split_at(100);
        let spaced = format!("-----BEGIN X-----\n \t{a} \x0c\r\n\n  {} {}\t\n-----END X-----\n", &b[..7], &b[7..]);
        assert_eq!(find(spaced.as_bytes(), &["X"]).unwrap(), ("X", der));
    }

    #[test]
    fn bundle() {
        let b = format!("{}{}", encode("CERTIFICATE", b"one"), encode("CERTIFICATE", b"two"));
        assert_eq!(find_all(b.as_bytes(), "CERTIFICATE").unwrap(), vec![b"one".to_vec(), b"two".to_vec()]);
    }
}
