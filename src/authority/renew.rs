//! Renewal: a new certificate for the same key and classification, if the policy that
//! vouched would still vouch (the conductor rechecked as of now).

use super::{check_name, Authority, Stored};
use crate::decision::{self, Refusal, Refused};
use crate::encoding::time::format_rfc3339;
use crate::error::{Error, Unrenewable};
use crate::issuance::certificate::{self, Authorization, Issued, RenewalProof};
use crate::store::{CertRecord, State};
use crate::vouching::classification::Classification;
use time::OffsetDateTime;

impl Authority {
    /// `vouch renew`: same key, same classification, new serial and validity; the
    /// old certificate is revoked (superseded) so a certname never has two valid ones.
    /// The old certificate's revocation is stored with the new one; a CRL that could not be
    /// written after it is in [`Stored::superseded_crl`].
    pub fn renew(&self, certname: &str, now: OffsetDateTime) -> Result<Stored, Error> {
        self.renew_stored(certname, None, false, now)
    }

    /// Renews only if `expected_serial` (when given) is still the certname's current
    /// certificate, checked under the store lock: a node renewing with a certificate that
    /// was meanwhile renewed, revoked or cleaned gets an error, never a second renewal.
    /// The node renews itself (`POST certificate_renewal`), so, as with Puppet Server, the
    /// new certificate gets the policy's auto-renewal lifetime when it sets one.
    pub fn renew_if_current(
        &self,
        certname: &str,
        expected_serial: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<Issued, Error> {
        self.renew_stored(certname, expected_serial, true, now).map(|stored| stored.issued)
    }

    fn renew_stored(
        &self,
        certname: &str,
        expected_serial: Option<&str>,
        auto_renew: bool,
        now: OffsetDateTime,
    ) -> Result<Stored, Error> {
        check_name(certname)?;
        let lock = self.store.lock()?;
        let current =
            self.current_checked(certname)?.ok_or_else(|| Error::NotFound { certname: certname.to_string() })?;
        let (rec, pem) = (current.record.clone(), current.pem.clone());
        if let Some(expected) = expected_serial.filter(|e| *e != rec.serial) {
            return Err(Error::NotValid {
                certname: certname.to_string(),
                detail: format!("serial {expected} is no longer its current certificate (that is {})", rec.serial),
            });
        }
        let (_, der) = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"])
            .map_err(|e| Error::Store { detail: format!("{certname}: {e}") })?;
        self.check_renewable(certname, &rec, &der, now)?;
        self.verify_ours(&der, now)?;
        let (_, cert) = x509_parser::parse_x509_certificate(&der)
            .map_err(|e| Error::Store { detail: format!("{certname}: {e}") })?;
        let spki = cert.public_key().raw.to_vec();
        let key_kind = crate::encoding::csr::spki_kind(&spki).map_err(|e| Error::Store { detail: e.to_string() })?;
        let classification_b64 = certificate::classification_of(&der, &self.policy.mirror_oid)
            .map_err(|detail| Error::Store { detail })?
            .ok_or_else(|| Error::NotValid {
                certname: certname.to_string(),
                detail: "its certificate carries no classification".into(),
            })?;
        let extra = cert
            .extensions()
            .iter()
            .filter_map(|e| {
                let arcs: Vec<u64> = e.oid.iter()?.collect();
                self.policy.allowed_extensions.contains(&arcs).then(|| (arcs, e.value.to_vec()))
            })
            .collect();
        // A server keeps its alt names only while its scope still allows them.
        let alt_names: Vec<String> =
            crate::authority::names_on_certificate(&der).into_iter().skip(1).filter(|n| n != certname).collect();
        // A name reserved since (the service's or an administrator's) is never renewed to a
        // node: the rule issuance applies, to the certname and every alt name.
        if let Some(reason) = self.reserved_refusal_for(certname, &alt_names) {
            let refused = Refused { reasons: vec![reason], conductor: None, held: None };
            return Err(self.renewal_refused(&rec, refused, now)?);
        }
        // The conductor that vouched must still be acceptable under the current policy, and
        // not on the root CRL as it is now.
        self.refresh_own_crl();
        self.recheck_conductor(&rec, &classification_b64, &alt_names, now)?;
        // The signed trusted facts (pp_role, …) come again from the classification it carries.
        let trusted = Classification::from_base64(&classification_b64, self.policy.classification_max_bytes)
            .and_then(|c| crate::vouching::classification::trusted::trusted_facts(&c.value))
            .map_err(|e| Error::NotValid { certname: certname.to_string(), detail: e.to_string() })?;
        let proof = RenewalProof {
            certname: certname.to_string(),
            spki,
            key_kind,
            classification_b64,
            extra,
            alt_names,
            trusted,
            auto_renew,
        };
        // The old certificate is superseded by the new one, in the store's own safe order.
        self.issue_locked(
            &lock,
            Some((&current, true)),
            Authorization::Renewal(proof),
            rec.attributes_expiry.clone(),
            rec.conductor.clone(),
            rec.conductor_cert.clone(),
            now,
        )
    }

    /// Whether `certname`'s certificate `der` (its record `rec`) is a node's to renew: not one
    /// of vouch's own, not revoked (by its record or on a CRL this master serves), not expired.
    fn check_renewable(&self, certname: &str, rec: &CertRecord, der: &[u8], now: OffsetDateTime) -> Result<(), Error> {
        let unrenewable = |why| Error::NotRenewable { certname: certname.to_string(), serial: rec.serial.clone(), why };
        // vouch's own certificates (no conductor, no attributes, no classification) are never
        // a node's to renew.
        let revoked = rec.state != State::Issued;
        if rec.conductor.is_none()
            && rec.attributes_expiry.is_none()
            && certificate::classification_of(der, &self.policy.mirror_oid).ok().flatten().is_none()
        {
            return Err(unrenewable(if super::reserved::carries_cli_auth(der) {
                Unrenewable::Administrator { revoked }
            } else {
                Unrenewable::Service { revoked }
            }));
        }
        // Revoked by its record, or on a CRL this master serves (a record edited back to issued
        // does not make a revoked certificate renewable).
        if revoked || self.der_on_a_served_crl(der) {
            return Err(unrenewable(Unrenewable::Revoked));
        }
        if crate::encoding::time::parse_rfc3339(&rec.not_after).ok().is_none_or(|t| t <= now) {
            return Err(unrenewable(Unrenewable::Expired { not_after: rec.not_after.clone() }));
        }
        Ok(())
    }

    /// Renewal: refuses (audited) unless the conductor recorded for `rec` passes
    /// [`decision::recheck_conductor`] under the current policy. A record without the
    /// conductor's certificate (written before vouch kept it) is refused.
    pub(super) fn recheck_conductor(
        &self,
        rec: &CertRecord,
        classification_b64: &str,
        alt_names: &[String],
        now: OffsetDateTime,
    ) -> Result<(), Error> {
        use base64::Engine;
        let certname = &rec.certname;
        let der = rec.conductor_cert.as_deref().and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
        let outcome = match der {
            None => Err(Refused {
                reasons: vec![Refusal::ConductorNotRecorded { certname: certname.clone() }],
                conductor: None,
                held: None,
            }),
            Some(der) => match Classification::from_base64(classification_b64, self.policy.classification_max_bytes) {
                // Scopes judge the classification; one the current policy cannot read is refused.
                Err(error) => Err(Refused {
                    reasons: vec![Refusal::ClassificationInvalid { error }],
                    conductor: None,
                    held: None,
                }),
                Ok(classification) => {
                    decision::recheck_conductor(&der, certname, Some(&classification), alt_names, &self.policy, now)
                }
            },
        };
        match outcome {
            Ok(_) => Ok(()),
            Err(refused) => Err(self.renewal_refused(rec, refused, now)?),
        }
    }

    /// Audits a refused renewal of `rec`; the error to return.
    fn renewal_refused(&self, rec: &CertRecord, refused: Refused, now: OffsetDateTime) -> Result<Error, Error> {
        self.audit(serde_json::json!({
            "time": format_rfc3339(now), "event": "renewal-refused", "certname": rec.certname,
            "serial": rec.serial, "conductor": refused.conductor,
            "reasons": refused.reasons.iter().map(|r| serde_json::json!({
                "code": r.code(), "message": r.to_string(),
            })).collect::<Vec<_>>(),
        }))?;
        Ok(Error::Refused { certname: rec.certname.clone(), refused: Box::new(refused) })
    }
}
