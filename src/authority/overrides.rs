//! Administrators' classifications (seed 004: desired state is the administrators', never
//! the node's): set and cleared by compare-and-swap on a revision, audited, and printed by
//! `vouch enc` instead of the certificate's.

use super::{check_name, Authority};
use crate::encoding::time::format_rfc3339;
use crate::error::Error;
use crate::store::Override;
use crate::vouching::classification::Classification;
use time::OffsetDateTime;

/// Where the classification `vouch enc` prints came from (its `vouch_source` parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Certificate,
    Override,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Certificate => "certificate",
            Source::Override => "override",
        }
    }
}

impl Authority {
    /// `vouch override set|clear`: `Some(text)` sets (checked as a conductor's classification
    /// would be: YAML or JSON, no tags, representable as ENC JSON), `None` clears; with
    /// `expect`, only at that revision. One audit line per change.
    pub fn set_override(
        &self,
        certname: &str,
        classification: Option<&str>,
        expect: Option<u64>,
        now: OffsetDateTime,
    ) -> Result<Override, Error> {
        check_name(certname)?;
        if let Some(text) = classification {
            let c = Classification::from_yaml(text, self.policy.classification_max_bytes)
                .map_err(|error| Error::Classification { source: format!("override of {certname}"), error })?;
            c.to_enc_json()
                .map_err(|error| Error::Classification { source: format!("override of {certname}"), error })?;
        }
        let o = self.store.put_override(certname, classification, expect, now)?;
        let digest = classification.map(|t| crate::encoding::sha256_hex(t.as_bytes()));
        self.audit(serde_json::json!({
            "time": format_rfc3339(now),
            "event": if classification.is_some() { "override-set" } else { "override-cleared" },
            "certname": certname, "revision": o.revision, "classification_sha256": digest,
        }))?;
        Ok(o)
    }

    /// After `vouch clean NAME` (and an administrator's clean through the API): the name's
    /// override belonged to the node just cleaned, and a new node reusing the name must not
    /// get a classification its own conductor never signed. Cleared (audited as such), and
    /// said in the answer: `Some(what was done)`; `None` when there was none.
    pub(super) fn clear_override_after_clean(
        &self,
        certname: &str,
        now: OffsetDateTime,
    ) -> Result<Option<String>, Error> {
        let Some(o) = self.store.get_override(certname)? else { return Ok(None) };
        if o.classification.is_none() {
            return Ok(None);
        }
        let cleared = self.store.put_override(certname, None, Some(o.revision), now)?;
        self.audit(serde_json::json!({
            "time": format_rfc3339(now), "event": "override-cleared", "by": "clean",
            "certname": certname, "revision": cleared.revision,
        }))?;
        Ok(Some(format!(
            "its override (revision {}) cleared: a new node of this name gets its own classification",
            o.revision
        )))
    }

    /// `vouch override show`.
    pub fn get_override(&self, certname: &str) -> Result<Option<Override>, Error> {
        check_name(certname)?;
        Ok(self.store.get_override(certname)?)
    }

    /// `vouch enc CERTNAME`: the node must have a valid certificate from this CA; its
    /// classification is the administrators' override if one is set, else the certificate's.
    pub fn enc_with_source(&self, certname: &str, now: OffsetDateTime) -> Result<(Classification, Source), Error> {
        let from_cert = self.enc(certname, now)?;
        match self.store.get_override(certname)? {
            Some(Override { classification: Some(text), .. }) => {
                let c = Classification::from_yaml(&text, self.policy.classification_max_bytes).map_err(|e| {
                    Error::NotValid { certname: certname.to_string(), detail: format!("its override is unusable: {e}") }
                })?;
                Ok((c, Source::Override))
            }
            _ => Ok((from_cert, Source::Certificate)),
        }
    }
}

/// The ENC JSON of `c` with the parameter `vouch_source` saying where it came from.
pub fn enc_json_with_source(c: &Classification, source: Source) -> Result<String, Error> {
    use serde_yaml_ng::Value;
    let mut c = c.clone();
    if let Value::Mapping(m) = &mut c.value {
        let key = Value::String("parameters".into());
        let params = m.entry(key).or_insert_with(|| Value::Mapping(Default::default()));
        if params.is_null() {
            *params = Value::Mapping(Default::default());
        }
        if let Value::Mapping(p) = params {
            p.insert(Value::String("vouch_source".into()), Value::String(source.name().into()));
        }
    }
    c.to_enc_json().map_err(|error| Error::Classification { source: "the ENC output".into(), error })
}
