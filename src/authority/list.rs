//! `vouch list`: pending requests, and signed and revoked certificates.

use super::Authority;
use crate::error::Error;

/// One line of `vouch list`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ListEntry {
    pub name: String,
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_after: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

impl Authority {
    /// `vouch list`: requests; with `all`, signed and revoked certificates too.
    pub fn list(&self, all: bool) -> Result<Vec<ListEntry>, Error> {
        let mut out: Vec<ListEntry> = self
            .store
            .requests()?
            .into_iter()
            .map(|r| ListEntry {
                name: r.certname,
                state: "requested",
                serial: None,
                not_after: None,
                reasons: r.reasons,
            })
            .collect();
        if all {
            for l in self.store.listing()? {
                out.push(ListEntry {
                    name: l.certname,
                    state: if l.revoked { "revoked" } else { "signed" },
                    serial: Some(l.serial),
                    not_after: Some(l.not_after),
                    reasons: vec![],
                });
            }
        }
        Ok(out)
    }
}
