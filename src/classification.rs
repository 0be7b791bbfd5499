//! The node classification: a YAML mapping in the shape of Puppet's external
//! node classifier output (`classes`, `parameters`, `environment`), carried
//! base64-encoded in attribute .2.5.
//!
//! Parsing is safe: plain data only (no tags, so no object instantiation,
//! CVE-2013-3567), a size cap before anything is decoded, and the YAML
//! parser's own recursion and alias-expansion limits.

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
    /// A node classification, but one the ENC cannot hand to Puppet exactly as judged:
    /// it has no JSON form (a key that is not a string, a float that is not finite) or
    /// Puppet's YAML reader would change it (a `<<` key is a merge there).
    Unrepresentable {
        detail: String,
    },
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
            ClassificationError::Unrepresentable { detail } => write!(
                f,
                "the classification cannot be handed to Puppet exactly as signed (the ENC prints JSON): {detail}"
            ),
        }
    }
}

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

fn no_tags(v: &Value, path: &str) -> Result<(), ClassificationError> {
    match v {
        Value::Tagged(t) => invalid(format!("{path} carries the YAML tag {}; tags are not allowed", t.tag)),
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
            other => {
                return invalid(format!("unknown top-level key '{other}' (allowed: classes, parameters, environment)"))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_enc_shapes() {
        for ok in [
            "classes: [ntp, profile::web]\nenvironment: production\n",
            "classes:\n  apache:\n    port: 8080\nparameters:\n  role: web\n",
            "{}",
        ] {
            let c = Classification::from_yaml(ok, DEFAULT_MAX_BYTES).unwrap();
            let again = Classification::from_base64(&c.to_base64(), DEFAULT_MAX_BYTES).unwrap();
            assert_eq!(again, c);
        }
    }

    #[test]
    fn enc_output_keeps_strings_strings_for_yaml_1_1() {
        let c = Classification::from_yaml("parameters:\n  a: 'on'\n  b: '1_000'\n  c: '2001-01-01'\n", 4096).unwrap();
        let out = c.to_enc_json().unwrap();
        assert!(out.contains("\"on\"") && out.contains("\"1_000\"") && out.contains("\"2001-01-01\""), "{out}");
    }

    #[test]
    fn what_json_cannot_hold_is_refused_when_parsed() {
        for bad in [
            "parameters:\n  pad: {~: x}\n",
            "parameters:\n  pad: {[a]: x}\n",
            "parameters:\n  pad: {{a: b}: x}\n",
            "parameters:\n  pad: {1: x}\n",
            "parameters:\n  pad: {true: x}\n",
            "parameters:\n  pad: [{.5: x}]\n",
            "parameters:\n  pad: .nan\n",
            "parameters:\n  pad: -.inf\n",
            "parameters:\n  pad: {'<<': {a: b}}\n",
        ] {
            match Classification::from_yaml(bad, DEFAULT_MAX_BYTES) {
                Err(ClassificationError::Unrepresentable { .. }) => {}
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn enc_json_is_read_back_as_written() {
        let c = Classification::from_yaml(
            "parameters:\n  a: 1.0e+300\n  b: 1.0e-7\n  c: -0.0\n  d: \"x\\u0085y\\u2028\\x7f\"\n  e: 12345678901234567890\n  f: 2.5\n",
            DEFAULT_MAX_BYTES,
        )
        .unwrap();
        let out = c.to_enc_json().unwrap();
        for want in ["1.0e+300", "1.0e-7", "-0.0", "x\\u0085y\\u2028\\u007f", "12345678901234567890", "2.5"] {
            assert!(out.contains(want), "{want} in {out}");
        }
        let back: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(back, to_json(&c.value, "c").unwrap(), "and it is still JSON, with the same value");
        assert_eq!(yaml_float(1.0), "1.0");
        assert_eq!(yaml_float(1e16), "1.0e+16");
        assert_eq!(yaml_float(-1.5e-300), "-1.5e-300");
    }

    #[test]
    fn refuses_bad_shapes() {
        for bad in [
            "- a\n- b\n",
            "classes: [Bad-Name]\n",
            "nodes: [x]\n",
            "environment: Prod\n",
            "parameters: [1]\n",
            "classes: !ruby/object:Gem::Installer {}\n",
            "parameters:\n  x: !custom aGVsbG8=\n",
            "",
        ] {
            assert!(Classification::from_yaml(bad, DEFAULT_MAX_BYTES).is_err(), "{bad}");
        }
        assert!(matches!(Classification::from_yaml(&"#".repeat(100), 10), Err(ClassificationError::TooLarge { .. })));
        assert!(matches!(Classification::from_base64("!!", 10), Err(ClassificationError::NotBase64 { .. })));
    }

    #[test]
    fn alias_bomb_is_refused() {
        let mut y = String::from("parameters:\n  a: &a [x,x,x,x,x,x,x,x,x,x]\n");
        for i in 0..10 {
            let prev = if i == 0 { "a".to_string() } else { format!("l{}", i - 1) };
            y.push_str(&format!(
                "  l{i}: &l{i} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
            ));
        }
        assert!(Classification::from_yaml(&y, DEFAULT_MAX_BYTES).is_err());
    }
}
