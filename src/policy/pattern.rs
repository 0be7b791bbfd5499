//! Scope patterns (`*` globs), compiled once when the policy is loaded.

/// A scope pattern, compiled once when the policy is loaded: `*` matches any run of
/// characters (for certnames: any run without a `.`), everything else itself, the
/// whole text (anchored). Matched by the `regex` crate's automata, in time linear in
/// the text whatever the pattern: a certname the agent chooses can never make it
/// backtrack (the recursive matcher this replaces took seconds on
/// `*-*-*-*-*-*-*-*x.example.test` against `a` + 61 `-` + `a.example.test`).
#[derive(Debug, Clone)]
pub struct Pattern {
    /// As written in the policy.
    pub text: String,
    re: regex::Regex,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Pattern {}

impl Pattern {
    /// Compiles `pattern`; `*` never matches `stop` when one is given.
    pub fn new(pattern: &str, stop: Option<char>) -> Result<Pattern, String> {
        let star = match stop {
            Some(c) => format!("[^{}]*", regex::escape(&c.to_string())),
            None => "(?s:.*)".to_string(),
        };
        let body: Vec<String> = pattern.split('*').map(regex::escape).collect();
        let source = format!(r"\A(?:{})\z", body.join(&star));
        // Bounded: a policy line cannot make a huge automaton either.
        let re = regex::RegexBuilder::new(&source)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| format!("pattern {pattern:?} cannot be compiled: {e}"))?;
        Ok(Pattern { text: pattern.to_string(), re })
    }

    /// A certname pattern: `*` stops at `.`.
    pub fn certname(pattern: &str) -> Result<Pattern, String> {
        Pattern::new(pattern, Some('.'))
    }

    /// A class pattern: `*` matches anything; a leading `::` (top scope) is ignored,
    /// as it is in the class names matched against it.
    pub fn class(pattern: &str) -> Result<Pattern, String> {
        let mut p = Pattern::new(pattern.trim_start_matches("::"), None)?;
        p.text = pattern.to_string();
        Ok(p)
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.re.is_match(text)
    }
}

/// Glob match: `*` matches any run of characters, except `stop` when given
/// (compiles the pattern each call: for tests and one-off checks; scopes compile theirs
/// once, as [`Pattern`]s). A pattern that cannot be compiled matches nothing.
pub fn glob(pattern: &str, text: &str, stop: Option<char>) -> bool {
    Pattern::new(pattern, stop).is_ok_and(|p| p.is_match(text))
}
