//! `[templates]`: what signature version 3 (templates for autoscaling groups) may do
//! (policy/README.md, docs/attributes.md#signature-version-3-templates).

use super::requests::ErrorAt;
use super::PolicyError;
use serde::Deserialize;
use std::time::Duration;
use toml::Spanned;

/// `[templates]` as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTemplates {
    allow_unbound: Option<bool>,
    max_uses: Option<Spanned<i64>>,
    max_lifetime: Option<Spanned<String>>,
}

/// `[templates]`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Templates {
    /// Whether a template with no instance identity binding (.2.10 empty) is accepted.
    /// False by default: whoever reads such user-data can enroll names matching its pattern.
    pub allow_unbound: bool,
    /// The largest .2.9 (max uses) accepted; at most [`MAX_USES_LIMIT`].
    pub max_uses: u64,
    /// How far ahead a template's expiry may lie (instead of `attributes.max_lifetime`).
    pub max_lifetime: Duration,
}

/// The largest max-uses a template may carry, whatever the policy.
pub const MAX_USES_LIMIT: u64 = 1_000_000;

/// The default `templates.max_lifetime`: 30 days.
pub const DEFAULT_TEMPLATE_LIFETIME: Duration = Duration::from_secs(30 * 86_400);

impl Default for Templates {
    fn default() -> Self {
        Templates { allow_unbound: false, max_uses: MAX_USES_LIMIT, max_lifetime: DEFAULT_TEMPLATE_LIFETIME }
    }
}

/// Reads a duration key as the policy's other durations are read (value, key, default seconds).
pub(super) type DurationAt<'a> = &'a dyn Fn(&Option<Spanned<String>>, &str, u64) -> Result<Duration, PolicyError>;

/// Validates `[templates]`; `duration` reads `templates.max_lifetime` as the policy's
/// other durations are read.
pub(super) fn templates(
    raw: &RawTemplates,
    err: ErrorAt<'_>,
    duration: DurationAt<'_>,
) -> Result<Templates, PolicyError> {
    let max_uses = match &raw.max_uses {
        None => MAX_USES_LIMIT,
        Some(n) => {
            let v = *n.get_ref();
            match u64::try_from(v) {
                Ok(u) if (1..=MAX_USES_LIMIT).contains(&u) => u,
                _ => {
                    return Err(err(
                        Some(n.span()),
                        "templates.max_uses",
                        format!("{v} is out of range 1..={MAX_USES_LIMIT}"),
                    ))
                }
            }
        }
    };
    let max_lifetime = duration(&raw.max_lifetime, "templates.max_lifetime", DEFAULT_TEMPLATE_LIFETIME.as_secs())?;
    Ok(Templates { allow_unbound: raw.allow_unbound.unwrap_or(false), max_uses, max_lifetime })
}
