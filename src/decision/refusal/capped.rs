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

fn cap(rendered: String, chars: usize) -> String {
    if rendered.chars().count() <= chars.saturating_add(16) {
        return rendered;
    }
    let head: String = rendered.chars().take(chars).collect();
    format!("{head}…({} bytes)", rendered.len())
}

impl<T: std::fmt::Display + ?Sized> std::fmt::Display for Capped<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&cap(unprintable_escaped(&self.0.to_string()), CAP_TEXT))
    }
}

/// A value a node chose (a subject, a parser's words about its bytes) as a refusal shows it:
/// control characters and the invisible ones that reorder or hide text (bidirectional
/// controls, zero-width characters) escaped as `\u{…}`, so that none reaches a reader's
/// screen raw; everything else as it is.
fn unprintable_escaped(s: &str) -> String {
    let hidden = |c: char| {
        c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
            || matches!(c, '\u{061c}' | '\u{feff}')
    };
    if !s.chars().any(hidden) {
        return s.to_string();
    }
    s.chars().map(|c| if hidden(c) { format!("\\u{{{:x}}}", u32::from(c)) } else { c.to_string() }).collect()
}

impl<T: std::fmt::Debug + ?Sized> std::fmt::Debug for Capped<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&cap(format!("{:?}", self.0), CAP_QUOTED))
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
