//! `vouch list`: pending requests, and signed and revoked certificates.

use super::Authority;
use crate::error::Error;
use crate::store::Store;

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
            let revs: std::collections::HashMap<String, bool> =
                self.store.revocations()?.into_iter().map(|r| (r.serial, r.cleaned)).fold(
                    std::collections::HashMap::new(),
                    |mut m, (s, c)| {
                        let e = m.entry(s).or_insert(false);
                        *e |= c;
                        m
                    },
                );
            let mut latest: std::collections::HashMap<String, (String, String)> = std::collections::HashMap::new();
            let mut order = Vec::new();
            for e in self.store.inventory()? {
                if latest.insert(e.certname.clone(), (e.serial, e.not_after)).is_none() {
                    order.push(e.certname);
                }
            }
            order.sort();
            for cn in order {
                let Some((serial, na)) = latest.remove(&cn) else {
                    continue;
                };
                let state = match revs.get(&serial) {
                    Some(true) => continue,
                    Some(false) => "revoked",
                    None => "signed",
                };
                out.push(ListEntry { name: cn, state, serial: Some(serial), not_after: Some(na), reasons: vec![] });
            }
        }
        Ok(out)
    }
}
