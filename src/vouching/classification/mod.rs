//! The node classification: a YAML mapping in the shape of Puppet's external
//! node classifier output (`classes`, `parameters`, `environment`), carried
//! base64-encoded in attribute .2.5.
//!
//! Parsing is safe: plain data only (no tags of any form and no directives, so no
//! object instantiation, CVE-2013-3567, and no retyped values), a size cap before
//! anything is decoded, and the YAML parser's own recursion and alias-expansion limits.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_yaml_ng::Value;

/// Default cap on the decoded classification, in bytes.
pub const DEFAULT_MAX_BYTES: usize = 64 * 1024;

/// What is wrong with a classification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassificationError {
    NotBase64 {
        detail: String,
    },
    TooLarge {
        size: usize,
        max: usize,
    },
    NotUtf8,
    NotYaml {
        detail: String,
    },
    /// Valid YAML, but not the ENC shape; `detail` names the offending key or value.
    Invalid {
        detail: String,
    },
    /// A YAML tag (any form, any node) or a directive: plain data only (CVE-2013-3567).
    /// `detail` names the tag or directive and where it is.
    Tagged {
        detail: String,
    },
    /// A node classification, but one the ENC cannot hand to Puppet exactly as judged:
    /// it has no JSON form (a key that is not a string, a float that is not finite) or
    /// Puppet's YAML reader would change it (a `<<` key is a merge there).
    Unrepresentable {
        detail: String,
    },
}

impl ClassificationError {
    /// What to do about it, where it is more precise than "write a node classification".
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            ClassificationError::Tagged { .. } => Some(
                "YAML tags (!x, !!x, !<...>) and directives (%TAG, %YAML) are refused, whatever they name: \
                 remove them, and quote a string that begins with ! or %",
            ),
            _ => None,
        }
    }
}

impl std::fmt::Display for ClassificationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClassificationError::NotBase64 { detail } => {
                write!(f, "the classification is not base64: {detail}")
            }
            ClassificationError::TooLarge { size, max } => {
                write!(f, "the classification is {size} bytes, more than the limit of {max}")
            }
            ClassificationError::NotUtf8 => f.write_str("the classification is not UTF-8 text"),
            ClassificationError::NotYaml { detail } => {
                write!(f, "the classification is not valid YAML: {detail}")
            }
            ClassificationError::Invalid { detail } => {
                write!(f, "the classification is not a node classification: {detail}")
            }
            ClassificationError::Tagged { detail } => {
                write!(f, "the classification is not plain YAML data: {detail}")
            }
            ClassificationError::Unrepresentable { detail } => write!(
                f,
                "the classification cannot be handed to Puppet exactly as signed (the ENC prints JSON): {detail}"
            ),
        }
    }
}

impl std::error::Error for ClassificationError {}

/// A validated classification.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    /// The YAML text as the conductor wrote it.
    pub yaml: String,
    /// The parsed mapping.
    pub value: Value,
}

impl Classification {
    /// Parses and validates YAML text (conductor side).
    pub fn from_yaml(text: &str, max_bytes: usize) -> Result<Self, ClassificationError> {
        if text.len() > max_bytes {
            return Err(ClassificationError::TooLarge { size: text.len(), max: max_bytes });
        }
        no_tags_in_text(text)?;
        let value: Value =
            serde_yaml_ng::from_str(text).map_err(|e| ClassificationError::NotYaml { detail: e.to_string() })?;
        validate(&value)?;
        to_json(&value, "classification")?;
        Ok(Classification { yaml: text.to_string(), value })
    }

    /// Decodes the base64 attribute value and validates it (CA side).
    pub fn from_base64(b64: &str, max_bytes: usize) -> Result<Self, ClassificationError> {
        // Base64 is 4/3 the size: refuse before decoding anything huge.
        let decoded_len = b64.len() / 4 * 3;
        if decoded_len > max_bytes + 3 {
            return Err(ClassificationError::TooLarge { size: decoded_len, max: max_bytes });
        }
        let bytes =
            STANDARD.decode(b64.as_bytes()).map_err(|e| ClassificationError::NotBase64 { detail: e.to_string() })?;
        let text = String::from_utf8(bytes).map_err(|_| ClassificationError::NotUtf8)?;
        Self::from_yaml(&text, max_bytes)
    }

    /// The attribute value: standard base64 with padding, on one line.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.yaml.as_bytes())
    }

    /// The classification as Puppet's ENC reads it: JSON, always, and exactly the value
    /// the decision judged. JSON is a YAML subset that Puppet's YAML 1.1 loader reads
    /// without retyping strings (in plain YAML, signed strings such as "on", "1_000",
    /// ":sym" or "2001-01-01" would become booleans, numbers, symbols, dates), written so
    /// that the loader reads every other value as written too (see [`EncFormatter`]).
    /// A value with no such form is an error, never a fallback to the signed YAML text;
    /// a [`Classification`] built by [`Classification::from_yaml`] always has one.
    pub fn to_enc_json(&self) -> Result<String, ClassificationError> {
        use serde::Serialize;
        let json = to_json(&self.value, "classification")?;
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, EncFormatter::default());
        json.serialize(&mut ser).map_err(|e| ClassificationError::Unrepresentable {
            detail: format!("it cannot be written as JSON: {e}"),
        })?;
        let mut text = String::from_utf8(out).map_err(|_| ClassificationError::NotUtf8)?;
        text.push('\n');
        Ok(text)
    }
}

fn unrepresentable<T>(detail: String) -> Result<T, ClassificationError> {
    Err(ClassificationError::Unrepresentable { detail })
}

/// The JSON form of a classification value, refusing what JSON cannot hold or what
/// Puppet's YAML reader would take for something else: keys that are not strings (null,
/// booleans, numbers, sequences, mappings; JSON writers drop or stringify them), the
/// key `<<` (a merge for Psych, even quoted), floats that are not finite (JSON writes
/// them as null) and tags (already refused by [`validate`]).
pub fn to_json(v: &Value, path: &str) -> Result<serde_json::Value, ClassificationError> {
    Ok(match v {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                serde_json::Value::from(i)
            } else if let Some(u) = n.as_u64() {
                serde_json::Value::from(u)
            } else {
                match n.as_f64().and_then(serde_json::Number::from_f64) {
                    Some(f) => serde_json::Value::Number(f),
                    None => return unrepresentable(format!("{path} is the number {n}, which JSON cannot hold")),
                }
            }
        }
        Value::String(s) => serde_json::Value::String(s.clone()),
        Value::Sequence(items) => serde_json::Value::Array(
            items.iter().enumerate().map(|(i, x)| to_json(x, &format!("{path}[{i}]"))).collect::<Result<_, _>>()?,
        ),
        Value::Mapping(m) => {
            let mut out = serde_json::Map::new();
            for (k, x) in m {
                let key = match k {
                    Value::String(key) if key == "<<" => {
                        return unrepresentable(format!(
                            "{path} has the key \"<<\", which Puppet's YAML reader takes for a merge"
                        ))
                    }
                    Value::String(key) => key,
                    other => {
                        let shown = serde_yaml_ng::to_string(other)
                            .map(|s| s.trim_end().to_string())
                            .unwrap_or_else(|_| format!("{other:?}"));
                        return unrepresentable(format!(
                            "{path} has the key {shown:?}, which is not a string (JSON keys are strings)"
                        ));
                    }
                };
                out.insert(key.clone(), to_json(x, &format!("{path}.{key}"))?);
            }
            serde_json::Value::Object(out)
        }
        Value::Tagged(t) => return unrepresentable(format!("{path} carries the YAML tag {}", t.tag)),
    })
}

/// Pretty JSON that Puppet's YAML 1.1 reader (Psych) reads back as written:
/// - floats always with a `.` and a signed exponent (`1.0e+300`, not `1e300`, which
///   Psych reads as the string "1e300");
/// - characters that YAML folds or refuses inside a double-quoted scalar (DEL and the C1
///   controls, among them NEL, which Psych turns into a space; U+2028, U+2029, U+FEFF,
///   U+FFFE, U+FFFF) escaped as `\uXXXX`, which both JSON and YAML decode to the same
///   character.
#[derive(Default)]
pub struct EncFormatter {
    inner: serde_json::ser::PrettyFormatter<'static>,
}

fn yaml_escaped(c: char) -> bool {
    matches!(c, '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}')
}

/// A finite float as `D.De[+-]N` (or `D.D`): a JSON number Psych's float pattern
/// (`[-+]?[0-9][0-9_,]*\.[0-9]*([eE][-+][0-9]+)?`) reads as the same float.
pub fn yaml_float(v: f64) -> String {
    let s = format!("{v:?}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let mantissa = if mantissa.contains('.') { mantissa.to_string() } else { format!("{mantissa}.0") };
            let exp = if exp.starts_with('-') { exp.to_string() } else { format!("+{exp}") };
            format!("{mantissa}e{exp}")
        }
        None if s.contains('.') => s,
        None => format!("{s}.0"),
    }
}

impl serde_json::ser::Formatter for EncFormatter {
    fn write_f64<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: f64) -> std::io::Result<()> {
        w.write_all(yaml_float(v).as_bytes())
    }
    fn write_f32<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: f32) -> std::io::Result<()> {
        w.write_all(yaml_float(f64::from(v)).as_bytes())
    }
    fn write_string_fragment<W: ?Sized + std::io::Write>(&mut self, w: &mut W, fragment: &str) -> std::io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if yaml_escaped(c) {
                w.write_all(&fragment.as_bytes()[start..i])?;
                write!(w, "\\u{:04x}", u32::from(c))?;
                start = i + c.len_utf8();
            }
        }
        w.write_all(&fragment.as_bytes()[start..])
    }
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        self.inner.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        self.inner.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.end_object_value(w)
    }
}

fn tagged<T>(detail: impl Into<String>) -> Result<T, ClassificationError> {
    Err(ClassificationError::Tagged { detail: detail.into() })
}

fn invalid<T>(detail: impl Into<String>) -> Result<T, ClassificationError> {
    Err(ClassificationError::Invalid { detail: detail.into() })
}

/// Puppet class names: `apache`, `profile::web`, optionally `::`-anchored.
pub fn is_class_name(s: &str) -> bool {
    let s = s.strip_prefix("::").unwrap_or(s);
    !s.is_empty()
        && s.split("::").all(|seg| {
            let mut b = seg.bytes();
            matches!(b.next(), Some(b'a'..=b'z')) && b.all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_'))
        })
}

/// Puppet environment names.
pub fn is_environment_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_'))
}

/// Top-scope variable names an ENC may set.
pub fn is_parameter_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(b'a'..=b'z' | b'_')) && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Refuses ([`ClassificationError::Tagged`]) every YAML tag and directive in `text`, whatever its form, on whatever node:
/// `!x`, `!!x`, `!<verbatim>`, `!handle!x` (after a `%TAG` directive), on a scalar, a
/// sequence, a mapping or a key, in any document of the stream; and every `%TAG` or
/// `%YAML` directive, used or not.
///
/// serde_yaml_ng cannot be asked: libyaml resolves `!!x` to `tag:yaml.org,2002:x` (and
/// a `%TAG` handle or `!<...>` to whatever URI it names) and serde_yaml_ng drops every
/// tag so resolved, so `!!python/object/apply:os.system [...]` reached the signed and
/// issued classification as plain data that an unsafe loader downstream instantiates,
/// and `!!str`, `!!int`, `!!binary` silently changed a value's type. So the text is
/// read a second time by yaml-rust2 (no unsafe code, no recursion: a token scanner and
/// a state machine), which reports tags and directives as written:
/// - its scanner refuses every tag token and every directive token;
/// - its parser then walks every event, refusing any node that carries a tag (the same
///   tags again; kept so that neither check alone is trusted);
/// - anything either of them cannot read is refused too, even where serde_yaml_ng would
///   have accepted it: two parsers that disagree on a signed document are not guessed
///   between.
pub fn no_tags_in_text(text: &str) -> Result<(), ClassificationError> {
    use yaml_rust2::parser::{Event, Parser};
    use yaml_rust2::scanner::{Scanner, TokenType};
    let second = |what: &str, e: &yaml_rust2::ScanError| ClassificationError::NotYaml {
        detail: format!(
            "{what} (line {}, column {}): {}",
            e.marker().line(),
            e.marker().col().saturating_add(1),
            e.info()
        ),
    };
    // The two readers must see the same stream, so what YAML 1.1 (libyaml, Puppet's
    // Psych) and YAML 1.2 (yaml-rust2) read differently is refused: NEL, LS and PS are
    // line breaks in 1.1 and text in 1.2 (`- a<LS>- !foo x` is a tagged second entry
    // for one, one plain scalar for the other), and libyaml skips a byte-order mark at
    // the start of any line, where yaml-rust2 reads it as text. A leading BOM (an
    // editor's) is skipped by both; anywhere else these characters are written as the
    // escapes \N, \L, \P, \uFEFF in a double-quoted string, which both read alike.
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    if let Some((i, c)) =
        body.char_indices().find(|(_, c)| matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{feff}'))
    {
        let line = body[..i].matches('\n').count().saturating_add(1);
        return invalid(format!(
            "it holds the character U+{:04X} on line {line}, which YAML 1.1 and YAML 1.2 read differently \
             (a line break or a byte-order mark for one, text for the other); write it as an escape \
             (\\N, \\L, \\P, \\uFEFF) in a double-quoted string",
            u32::from(c)
        ));
    }
    let mut scanner = Scanner::new(body.chars());
    loop {
        let token =
            scanner.next_token().map_err(|e| second("the YAML reader that looks for tags cannot read it", &e))?;
        let Some(yaml_rust2::scanner::Token(mark, kind)) = token else { break };
        let at = format!("line {}, column {}", mark.line(), mark.col().saturating_add(1));
        match kind {
            TokenType::Tag(handle, suffix) => {
                return tagged(format!(
                    "it carries the YAML tag {} at {at}; tags are not allowed",
                    shown_tag(&handle, &suffix)
                ))
            }
            TokenType::TagDirective(handle, prefix) => {
                return tagged(format!(
                    "it has the directive %TAG {handle} {prefix} at {at}; directives are not allowed"
                ))
            }
            TokenType::VersionDirective(major, minor) => {
                return tagged(format!(
                    "it has the directive %YAML {major}.{minor} at {at}; directives are not allowed"
                ))
            }
            TokenType::StreamEnd => break,
            _ => {}
        }
    }
    let mut parser = Parser::new_from_str(body);
    loop {
        let (event, mark) =
            parser.next_token().map_err(|e| second("the YAML reader that looks for tags cannot read it", &e))?;
        let tag = match event {
            Event::StreamEnd => return Ok(()),
            Event::Scalar(_, _, _, tag) | Event::SequenceStart(_, tag) | Event::MappingStart(_, tag) => tag,
            _ => None,
        };
        if let Some(t) = tag {
            return tagged(format!(
                "it carries the YAML tag {} at line {}, column {}; tags are not allowed",
                shown_tag(&t.handle, &t.suffix),
                mark.line(),
                mark.col().saturating_add(1)
            ));
        }
    }
}

/// A tag as the scanner split it: `!` for the non-specific tag (empty handle, suffix
/// `!`), `!<...>` for a verbatim tag (empty handle), else handle and suffix as written
/// (`!!` + `python/object`, `!` + `foo`, `!e!` + `x`).
fn shown_tag(handle: &str, suffix: &str) -> String {
    if handle.is_empty() && suffix == "!" {
        "!".to_string()
    } else if handle.is_empty() {
        format!("!<{suffix}>")
    } else {
        format!("{handle}{suffix}")
    }
}

fn no_tags(v: &Value, path: &str) -> Result<(), ClassificationError> {
    match v {
        Value::Tagged(t) => tagged(format!("{path} carries the YAML tag {}; tags are not allowed", t.tag)),
        Value::Sequence(s) => s.iter().enumerate().try_for_each(|(i, x)| no_tags(x, &format!("{path}[{i}]"))),
        Value::Mapping(m) => m.iter().try_for_each(|(k, x)| {
            no_tags(k, path)?;
            let key = k.as_str().map(str::to_string).unwrap_or_else(|| format!("{k:?}"));
            no_tags(x, &format!("{path}.{key}"))
        }),
        _ => Ok(()),
    }
}

/// Checks the ENC shape.
pub fn validate(v: &Value) -> Result<(), ClassificationError> {
    no_tags(v, "classification")?;
    let map = match v {
        Value::Mapping(m) => m,
        Value::Null => return invalid("it is empty; write {} for a node with no classes"),
        _ => return invalid("the top level must be a mapping with classes, parameters and/or environment"),
    };
    for (k, val) in map {
        let key = k
            .as_str()
            .ok_or_else(|| ClassificationError::Invalid { detail: "a top-level key is not a string".into() })?;
        match key {
            "classes" => match val {
                Value::Null => {}
                Value::Sequence(list) => {
                    for c in list {
                        match c.as_str() {
                            Some(name) if is_class_name(name) => {}
                            Some(name) => return invalid(format!("'{name}' is not a valid Puppet class name")),
                            None => return invalid("classes must be a list of class names"),
                        }
                    }
                }
                Value::Mapping(classes) => {
                    for (c, params) in classes {
                        let name = c.as_str().unwrap_or("");
                        if !is_class_name(name) {
                            return invalid(format!("'{}' is not a valid Puppet class name", name));
                        }
                        match params {
                            Value::Null => {}
                            Value::Mapping(p) => {
                                for pk in p.keys() {
                                    match pk.as_str() {
                                        Some(n) if is_parameter_name(n) => {}
                                        _ => {
                                            return invalid(format!(
                                                "class '{name}' has an invalid parameter name {pk:?}"
                                            ))
                                        }
                                    }
                                }
                            }
                            _ => return invalid(format!("the parameters of class '{name}' must be a mapping")),
                        }
                    }
                }
                _ => return invalid("classes must be a list or a mapping of class names"),
            },
            "parameters" => match val {
                Value::Null => {}
                Value::Mapping(p) => {
                    for pk in p.keys() {
                        match pk.as_str() {
                            Some(n) if is_parameter_name(n) => {}
                            _ => return invalid(format!("invalid parameter name {pk:?}")),
                        }
                    }
                }
                _ => return invalid("parameters must be a mapping"),
            },
            "environment" => match val.as_str() {
                Some(e) if is_environment_name(e) => {}
                Some(e) => return invalid(format!("'{e}' is not a valid Puppet environment name")),
                None => return invalid("environment must be a string"),
            },
            "extensions" => {
                trusted::trusted_facts(v)?;
            }
            other => {
                return invalid(format!(
                    "unknown top-level key '{other}' (allowed: classes, parameters, environment, extensions)"
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
pub mod trusted;
