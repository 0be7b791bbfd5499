//! Text another party chose (a node's request, another process's command line), as vouch
//! shows it to a person: the characters a terminal would act on or hide are made visible.

use std::borrow::Cow;

/// Whether `c` is a format character a terminal that renders bidirectional text acts on, or
/// one that shows nothing: the bidirectional marks, embeddings, overrides and isolates, the
/// zero-width spaces and joiners, the byte order mark.
pub fn reorders_or_hides(c: char) -> bool {
    matches!(c, '\u{61c}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// `s` with each control character and each one [`reorders_or_hides`] escaped as `\u{…}`,
/// everything else as it is (borrowed when nothing needs escaping).
pub fn escaped(s: &str) -> Cow<'_, str> {
    let hidden = |c: char| c.is_control() || reorders_or_hides(c);
    if !s.chars().any(hidden) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars().map(|c| if hidden(c) { format!("\\u{{{:x}}}", u32::from(c)) } else { c.to_string() }).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidirectional_marks_are_escaped_and_the_rest_kept() {
        assert!(matches!(escaped("web01.example.com"), Cow::Borrowed("web01.example.com")));
        assert_eq!(escaped("caf\u{e9}"), "caf\u{e9}");
        assert_eq!(escaped("evil\u{202e}gro\u{1b}[31m\u{2066}"), "evil\\u{202e}gro\\u{1b}[31m\\u{2066}");
    }
}
