//! Pending requests (`ou=requests`): a refused request's reasons and CSR, one entry per
//! certname, kept for the operator to see.

use super::conn::rc;
use super::entry::{check_certname, gtime, set};
use super::LdapStore;
use crate::encoding::time::parse_rfc3339;
use crate::store::{PendingRequest, StoreError};
use ldap3::{Mod, Scope};
use time::OffsetDateTime;

impl LdapStore {
    /// [`Store::put_request`](crate::store::Store::put_request): the request's entry added,
    /// or its time, reasons and CSR replaced where it exists.
    pub(super) fn write_request(&self, req: &PendingRequest, csr_pem: &[u8]) -> Result<(), StoreError> {
        check_certname(&req.certname)?;
        let dn = self.request_dn(&req.certname);
        let reasons = serde_json::to_vec(req).map_err(|e| StoreError::Ldap {
            op: "encode",
            dn: dn.clone(),
            detail: e.to_string(),
        })?;
        let time = parse_rfc3339(&req.time).unwrap_or_else(|_| OffsetDateTime::now_utc());
        let code = self.add(
            &dn,
            vec![
                ("objectClass", set("vouchRequest")),
                ("vouchCertname", set(req.certname.as_bytes().to_vec())),
                ("vouchTime", set(gtime(time))),
                ("vouchData", set(reasons.clone())),
                ("vouchCsr", set(csr_pem.to_vec())),
            ],
        )?;
        if code == rc::ALREADY_EXISTS {
            self.modify(
                &dn,
                vec![
                    Mod::Replace(b"vouchTime".to_vec(), set(gtime(time))),
                    Mod::Replace(b"vouchData".to_vec(), set(reasons)),
                    Mod::Replace(b"vouchCsr".to_vec(), set(csr_pem.to_vec())),
                ],
            )?;
        }
        Ok(())
    }

    /// [`Store::requests`](crate::store::Store::requests): every pending request, by certname.
    pub(super) fn pending_requests(&self) -> Result<Vec<PendingRequest>, StoreError> {
        let mut out = Vec::new();
        for e in
            self.search(&self.container("requests"), Scope::OneLevel, "(objectClass=vouchRequest)", &["vouchData"])?
        {
            let req: PendingRequest = serde_json::from_slice(e.bytes("vouchData").unwrap_or_default())
                .map_err(|err| e.damaged(format!("vouchData: {err}")))?;
            out.push(req);
        }
        out.sort_by(|a, b| a.certname.cmp(&b.certname));
        Ok(out)
    }

    /// [`Store::request`](crate::store::Store::request): one pending request and its CSR.
    pub(super) fn pending_request(&self, certname: &str) -> Result<Option<(PendingRequest, Vec<u8>)>, StoreError> {
        check_certname(certname)?;
        let Some(e) = self.read(&self.primary, &self.request_dn(certname))? else { return Ok(None) };
        let req: PendingRequest = serde_json::from_slice(e.bytes("vouchData").unwrap_or_default())
            .map_err(|err| e.damaged(format!("vouchData: {err}")))?;
        let csr = e.bytes("vouchCsr").map(<[u8]>::to_vec).unwrap_or_default();
        Ok(Some((req, csr)))
    }
}
