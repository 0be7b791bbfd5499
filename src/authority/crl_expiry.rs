//! When a revocation may leave the CRL, by its certificate: the expiry a revocation entry or
//! a record states is the store's, and anyone who may write the store may change it (an LDAP
//! writer without any CA key). A serial the previous CRL listed leaves only when the
//! certificate itself, signed by this master CA, says it expired a CRL period ago.

use super::signed::signed_by_one_of;
use super::Authority;
use crate::error::Error;
use crate::store::StoreError;
use std::collections::HashSet;
use time::OffsetDateTime;

/// What the certificate of a revoked serial says of its place on the CRL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Certified {
    /// Expired more than a CRL period ago: it may leave.
    Off,
    /// Not yet: it expires then (RFC 3339), whatever the store's entry says.
    Due(String),
    /// No certificate of this serial signed by this CA to tell (why): it stays.
    Unknown(String),
}

impl Authority {
    /// Whether a serial whose store entry says it expired a CRL period ago leaves the CRL, by
    /// what its certificate says: when it expired, yes; when not, never; when no certificate
    /// tells, only where the store's word is the CA key holder's (the file store), never on
    /// a store that keeps every revoked certificate (LDAP: its writers need no CA key).
    pub(super) fn certified_leaves(&self, certified: &Certified) -> bool {
        match certified {
            Certified::Off => true,
            Certified::Due(_) => false,
            Certified::Unknown(_) => !self.store.keeps_revoked_certificates(),
        }
    }

    /// The serials (lowercase hex) of the CRL written last (`DIR/ca/ca_crl.pem`), read by a
    /// walk of its DER; none when there is none or it does not read. Only which entries get
    /// their certificate checked depends on it (each of them is in this CA's revocation log
    /// already), so its signature is not what lets a serial leave.
    pub(super) fn previous_crl_serials(&self) -> HashSet<String> {
        let path = self.dir.file("ca_crl.pem");
        let Ok(bytes) = crate::files::durable::read_regular(&path) else { return HashSet::new() };
        let Ok((_, der)) = crate::encoding::pem::find(&bytes, &["X509 CRL"]) else { return HashSet::new() };
        super::crl_der::crl_serials(&der)
            .map(|serials| serials.iter().map(|s| crate::encoding::hex(s)).collect())
            .unwrap_or_default()
    }

    /// What the certificate of `serial` (of `certname`) says: the store's certificate of the
    /// certname, if it is this serial, or else the one its revocation keeps (the LDAP store),
    /// signed by this master CA. The store's PEM can be changed too, but a certificate cannot be forged.
    pub(super) fn certified_expiry(
        &self,
        serial: &str,
        certname: &str,
        now: OffsetDateTime,
    ) -> Result<Certified, Error> {
        let pem = match self.store.current(certname) {
            Ok(Some(c)) if c.record.serial == serial => Some(c.pem),
            Ok(_) => None,
            Err(e @ StoreError::Unavailable { .. }) => return Err(e.into()),
            Err(e) => return Ok(Certified::Unknown(format!("its certificate cannot be read: {e}"))),
        };
        // Or the one its revocation keeps (the LDAP store: cleaned, or replaced since).
        let pem = match pem.map_or_else(|| self.store.revoked_certificate(serial), |p| Ok(Some(p))) {
            Ok(Some(p)) => p,
            Ok(None) => return Ok(Certified::Unknown("the store holds no certificate of it".into())),
            Err(e @ StoreError::Unavailable { .. }) => return Err(e.into()),
            Err(e) => return Ok(Certified::Unknown(format!("its certificate cannot be read: {e}"))),
        };
        let Ok((_, der)) = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"]) else {
            return Ok(Certified::Unknown("its certificate is not PEM".into()));
        };
        let Ok((_, cert)) = x509_parser::parse_x509_certificate(&der) else {
            return Ok(Certified::Unknown("its certificate does not parse".into()));
        };
        if crate::encoding::hex(cert.raw_serial()) != serial {
            return Ok(Certified::Unknown("the certificate stored for it has another serial".into()));
        }
        if let Err(detail) = signed_by_one_of(&der, std::slice::from_ref(&self.ca.cert_der)) {
            return Ok(Certified::Unknown(format!("its certificate is not signed by this master CA: {detail}")));
        }
        let not_after = cert.validity().not_after.to_datetime();
        let period = time::Duration::try_from(self.policy.crl_validity).unwrap_or(time::Duration::days(30));
        Ok(match not_after.checked_add(period) {
            Some(t) if t < now => Certified::Off,
            _ => Certified::Due(crate::encoding::time::format_rfc3339(not_after)),
        })
    }
}

/// The warning of the CRL's entries that stayed although the store says they expired
/// (`kept`: serial, and why), once per CRL written.
pub(super) fn warn_kept_by_certificate(kept: &[(String, String)]) {
    if kept.is_empty() {
        return;
    }
    let named: Vec<String> = kept.iter().take(5).map(|(s, why)| format!("{s} ({why})")).collect();
    let more = kept.len().saturating_sub(named.len());
    tracing::warn!(
        event = "crl-entry-kept",
        count = kept.len(),
        serials = %format!("{}{}", named.join(", "), if more > 0 { format!(" and {more} more") } else { String::new() }),
        hint = "the store says these revoked certificates expired a CRL period ago, and their certificates do \
                not show it: they stay on the CRL. If the store's expiry was changed (`vouch store verify` \
                names a revocation-not-after-mismatch), treat it as tampering and restore the revocation; on \
                the shared store, a revocation without its certificate (recorded by an older version of vouch, or \
                by a renewal interrupted between its two writes) keeps its serial on the CRL (docs/limitations.md)",
    );
}
