//! The policy file's TOML shape: each section as written, before [`super::parse`]
//! validates it (unknown keys refused).

use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    pub(super) conductors: RawConductors,
    #[serde(default)]
    pub(super) attributes: RawAttributes,
    #[serde(default)]
    pub(super) classification: RawClassification,
    #[serde(default)]
    pub(super) extensions: RawExtensions,
    #[serde(default)]
    pub(super) audit: RawAudit,
    #[serde(default)]
    pub(super) issuance: RawIssuance,
    #[serde(default)]
    pub(super) crl: RawCrl,
    #[serde(default)]
    pub(super) replay: RawReplay,
    #[serde(default)]
    pub(super) conductor: Vec<RawScope>,
    #[serde(default)]
    pub(super) serve: RawServe,
    #[serde(default)]
    pub(super) requests: super::requests::RawRequests,
    #[serde(default)]
    pub(super) identity: super::identity::RawIdentity,
    #[serde(default)]
    pub(super) templates: super::templates::RawTemplates,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServe {
    pub(super) admins: Option<toml::Spanned<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScope {
    pub(super) name: String,
    pub(super) fingerprint: Option<Spanned<String>>,
    pub(super) subject: Option<Spanned<String>>,
    pub(super) issuer: Option<Spanned<String>>,
    pub(super) certnames: Option<Vec<String>>,
    pub(super) classes: Option<Vec<String>>,
    pub(super) environments: Option<Vec<String>>,
    pub(super) parameters: Option<Vec<String>>,
    pub(super) max_lifetime: Option<Spanned<String>>,
    pub(super) servers: Option<Vec<String>>,
    pub(super) dns_alt_names: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReplay {
    pub(super) enabled: Option<bool>,
    pub(super) journal: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIssuance {
    pub(super) cap_at_conductor: Option<bool>,
    pub(super) admin_approval: Option<bool>,
    pub(super) renewal_min_age: Option<Spanned<String>>,
    pub(super) validity: Option<Spanned<String>>,
    pub(super) auto_renewal_validity: Option<Spanned<String>>,
    pub(super) backdate: Option<Spanned<String>>,
    pub(super) on_existing: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCrl {
    pub(super) validity: Option<Spanned<String>>,
    pub(super) refresh_before: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConductors {
    pub(super) trusted_roots: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) intermediates: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) crls: Vec<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAttributes {
    pub(super) versions: Option<Spanned<Vec<u32>>>,
    pub(super) max_lifetime: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClassification {
    pub(super) max_bytes: Option<Spanned<i64>>,
    pub(super) mirror_oid: Option<Spanned<String>>,
    pub(super) mirror_required: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExtensions {
    pub(super) allow_subject_alt_names: Option<Spanned<bool>>,
    #[serde(default)]
    pub(super) allow: Vec<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAudit {
    pub(super) log: Option<String>,
}
