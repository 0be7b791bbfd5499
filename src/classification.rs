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

    /// The classification as Puppet's ENC reads it. Written as JSON (a YAML subset
    /// that Puppet's YAML 1.1 loader reads without retyping: in plain YAML, signed
    /// strings such as "on", "1_000" or "2001-01-01" would become booleans, numbers, dates).
    pub fn to_enc_yaml(&self) -> String {
        serde_json::to_string_pretty(&self.value).map(|s| s + "\n").unwrap_or_else(|_| self.yaml.clone())
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
        let out = c.to_enc_yaml();
        assert!(out.contains("\"on\"") && out.contains("\"1_000\"") && out.contains("\"2001-01-01\""), "{out}");
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
