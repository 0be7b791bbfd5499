//! A value a request chose, as a refusal's message shows it: capped in length, and with the
//! characters that would reach a reader's screen raw (controls, bidirectional overrides,
//! zero-width characters) escaped.

/// A value shown in a refusal's message, capped: its first characters and its length, so
/// a request cannot make a message (an audit line, a log line) as large as itself.
pub(super) struct Capped<'a, T: ?Sized>(pub(super) &'a T);

/// A quoted value (a name, an attribute's text): the first 64 characters.
const CAP_QUOTED: usize = 64;
/// A description (a parser's error, a subject): longer, still bounded.
const CAP_TEXT: usize = 256;

fn cap(rendered: &str, chars: usize) -> std::borrow::Cow<'_, str> {
    if rendered.chars().count() <= chars.saturating_add(16) {
        return rendered.into();
    }
    let head: String = rendered.chars().take(chars).collect();
    format!("{head}…({} bytes)", rendered.len()).into()
}

impl<T: std::fmt::Display + ?Sized> std::fmt::Display for Capped<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rendered = self.0.to_string();
        f.write_str(&cap(&crate::encoding::text::escaped(&rendered), CAP_TEXT))
    }
}

impl<T: std::fmt::Debug + ?Sized> std::fmt::Debug for Capped<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&cap(&format!("{:?}", self.0), CAP_QUOTED))
    }
}

#[cfg(test)]
mod tests {
    use super::super::Refusal;

    #[test]
    fn a_huge_value_is_capped_in_the_message() {
        let r = Refusal::VersionMalformed { value: "9".repeat(200_000) };
        let m = r.to_string();
        assert!(m.len() < 300, "{}", m.len());
        assert!(m.contains("(200002 bytes)"), "{m}");
        let long = crate::identity::IdentityRefusal::AlgorithmUnsupported { algorithm: "1.2".repeat(10_000) };
        let m = Refusal::IdentityRefused { reason: long }.to_string();
        assert!(m.len() < 400, "an identity refusal of {} bytes", m.len());
        let short = Refusal::VersionMalformed { value: "x1".into() };
        assert_eq!(short.to_string(), "signature version \"x1\" is not a plain decimal integer");
    }
}
