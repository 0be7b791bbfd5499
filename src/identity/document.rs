//! The identity document AWS signs: JSON with the instance id, account, region, the time
//! the instance was launched and more. Only what the decision uses is kept; every value is
//! checked against the form AWS gives it, since it goes into a certname.

use super::refusal::{short, IdentityRefusal};
use serde::Deserialize;
use time::OffsetDateTime;

/// The fields of AWS's instance identity document that vouch reads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwsDocument {
    pub instance_id: String,
    pub account_id: String,
    pub region: String,
    /// When the instance was launched (RFC 3339), as AWS writes it.
    #[serde(default)]
    pub pending_time: Option<String>,
}

fn invalid(detail: impl Into<String>) -> IdentityRefusal {
    IdentityRefusal::DocumentInvalid { detail: detail.into() }
}

impl AwsDocument {
    /// Parses and checks the signed JSON.
    pub fn parse(bytes: &[u8]) -> Result<AwsDocument, IdentityRefusal> {
        let doc: AwsDocument = serde_json::from_slice(bytes).map_err(|e| invalid(short(&e.to_string())))?;
        // i-: 8 or 17 lowercase hex digits; the certname takes it as is.
        let hex = doc.instance_id.strip_prefix("i-").unwrap_or("");
        if !matches!(hex.len(), 8 | 17) || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(invalid(format!("instanceId {:?} is not i- and 8 or 17 hex digits", short(&doc.instance_id))));
        }
        if doc.account_id.len() != 12 || !doc.account_id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid(format!("accountId {:?} is not 12 digits", short(&doc.account_id))));
        }
        let region_ok = (1..=32).contains(&doc.region.len())
            && doc.region.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !region_ok {
            return Err(invalid(format!("region {:?} is not a region name", short(&doc.region))));
        }
        Ok(doc)
    }

    /// When the instance was launched: `pendingTime`, required (AWS always writes it).
    pub fn launched(&self) -> Result<OffsetDateTime, IdentityRefusal> {
        let text = self.pending_time.as_deref().ok_or_else(|| invalid("it has no pendingTime"))?;
        crate::encoding::time::parse_rfc3339(text)
            .map_err(|_| invalid(format!("pendingTime {:?} is not an RFC 3339 time", short(text))))
    }
}
