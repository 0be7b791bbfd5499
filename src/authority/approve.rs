//! An administrator's approval of a node no conductor launched (a bare-metal host): only
//! where the policy allows it (`issuance.admin_approval`), only for a pending request that
//! carries no conductor's attributes, and only with the classification an administrator set
//! for the name beforehand (`vouch override set`), never anything the request asks for.
//! Reached by `vouch approve NAME` (the data directory) and by an administrator's
//! `PUT certificate_status/NAME {"desired_state":"signed"}` (`puppetserver ca sign`); never by
//! a node. Audited as the administrator's decision (`"event": "approved"`, `"by"`).

use super::Authority;
use crate::encoding::csr::Csr;
use crate::encoding::oids;
use crate::encoding::time::format_rfc3339;
use crate::error::{Error, NotApprovable};
use crate::issuance::certificate::{ApprovalProof, Authorization, Issued};
use crate::store::{Override, State};
use crate::vouching::classification::Classification;
use std::time::Duration;
use time::OffsetDateTime;

/// What an administrator approves.
#[derive(Debug, Clone, Copy)]
pub struct Approval<'a> {
    pub certname: &'a str,
    /// Who approves: the administrator's certname (`vouch serve`), or `local:USER` (the CLI).
    pub by: &'a str,
    /// A lifetime shorter than the policy's; longer is refused ([`NotApprovable::TtlTooLong`]).
    pub ttl: Option<Duration>,
    /// The request's SHA-256 fingerprint the administrator checked (`AB:CD:…`), if given:
    /// another request pending under the name by then is not approved.
    pub fingerprint: Option<&'a str>,
}

/// Whether a CSR carries any of vouch's attributes (a conductor's word, good or not).
pub fn carries_attributes(csr: &Csr) -> bool {
    csr.attributes.iter().any(|a| oids::is_under(&a.oid, oids::VOUCH_ARC))
}

impl Authority {
    /// The refusal of an approval of `certname` for `why`.
    fn not_approved(certname: &str, why: NotApprovable) -> Error {
        Error::NotApproved { certname: certname.to_string(), why }
    }

    /// `ttl` checked against the policy's lifetime (`issuance.validity`).
    pub fn check_ttl(&self, certname: &str, ttl: Option<Duration>) -> Result<(), Error> {
        let max = self.policy.profile.validity;
        match ttl {
            Some(t) if t > max || t.is_zero() => Err(Self::not_approved(
                certname,
                NotApprovable::TtlTooLong { asked_secs: t.as_secs(), max_secs: max.as_secs() },
            )),
            _ => Ok(()),
        }
    }

    /// Issues the pending request of `a.certname` on an administrator's approval, with the
    /// classification the administrators set for the name. Refused ([`Error::NotApproved`])
    /// when the policy is off, no classification is set, nothing is pending, or the request
    /// carries a conductor's attributes or other names.
    pub fn approve(&self, a: &Approval<'_>, now: OffsetDateTime) -> Result<Issued, Error> {
        let certname = a.certname;
        super::check_name(certname)?;
        if !self.policy.admin_approval {
            return Err(Self::not_approved(certname, NotApprovable::PolicyOff));
        }
        self.check_ttl(certname, a.ttl)?;
        // Under the store's lock: the name's certificate is read as issuance reads it, and the
        // key issued is the one of the request checked here. (On the LDAP store the lock is
        // this master's only: another master may keep a newer request meanwhile, which is
        // why the request is removed below only while it is still this one.) The reasons in
        // the order an administrator fixes them: signed already, nothing pending, then the
        // request itself, then the classification to give it.
        let lock = self.store.lock()?;
        let current = self.current_checked(certname)?;
        if let Some(c) = current.as_ref().filter(|c| c.record.state == State::Issued) {
            return Err(Self::not_approved(
                certname,
                NotApprovable::CertificateExists { serial: c.record.serial.clone() },
            ));
        }
        let csr = self.pending_for_approval(certname, a.fingerprint)?;
        let (classification, revision) = self.approved_classification(certname)?;
        let proof = ApprovalProof {
            certname: certname.to_string(),
            spki: csr.spki.clone(),
            key_kind: csr.key_kind,
            classification_b64: classification.to_base64(),
            ttl: a.ttl,
            // The override's trusted facts, as a conductor's classification carries them.
            trusted: crate::vouching::classification::trusted::trusted_facts(&classification.value)
                .map_err(|error| Error::Classification { source: format!("override of {certname}"), error })?,
        };
        let stored = self.issue_locked(
            &lock,
            current.as_ref().map(|c| (c, false)),
            Authorization::Approved(proof),
            None,
            None,
            None,
            now,
        )?;
        let issued = stored.issued;
        let still_pending = self
            .store
            .request(certname)
            .ok()
            .flatten()
            .and_then(|(_, pem)| crate::encoding::csr::parse(&pem).ok())
            .is_some_and(|p| p.der == csr.der);
        if still_pending {
            if let Err(e) = self.store.remove_request(certname) {
                super::warn("store", &format!("the approved request of {certname} stays listed: {e}"));
            }
        }
        self.audit(serde_json::json!({
            "time": format_rfc3339(now), "event": "approved", "certname": certname, "by": a.by,
            "serial": issued.serial_hex, "not_after": format_rfc3339(issued.not_after),
            "override_revision": revision,
            "classification_sha256": crate::encoding::sha256_hex(classification.yaml.as_bytes()),
            "request_sha256": crate::encoding::sha256_hex(&csr.der),
        }))?;
        Ok(issued)
    }

    /// The administrators' classification of `certname` and its revision, checked as
    /// `vouch enc` reads it.
    fn approved_classification(&self, certname: &str) -> Result<(Classification, u64), Error> {
        match self.store.get_override(certname)? {
            Some(Override { classification: Some(text), revision, .. }) => {
                let c = Classification::from_yaml(&text, self.policy.classification_max_bytes)
                    .map_err(|error| Error::Classification { source: format!("override of {certname}"), error })?;
                Ok((c, revision))
            }
            _ => Err(Self::not_approved(certname, NotApprovable::NoOverride)),
        }
    }

    /// The pending request of `certname`, if an approval may issue it.
    fn pending_for_approval(&self, certname: &str, fingerprint: Option<&str>) -> Result<Csr, Error> {
        let refuse = |why| Self::not_approved(certname, why);
        let Some((_, pem)) = self.store.request(certname)? else {
            return Err(refuse(NotApprovable::NothingPending));
        };
        let csr =
            crate::encoding::csr::parse(&pem).map_err(|e| refuse(NotApprovable::Unusable { detail: e.to_string() }))?;
        if let Some(want) = fingerprint {
            let have = crate::encoding::sha256_hex(&csr.der);
            let Some(given) = super::normal_fingerprint(want) else {
                let given: String = want.chars().take(100).collect();
                return Err(refuse(NotApprovable::FingerprintMalformed { given }));
            };
            if given != have {
                return Err(refuse(NotApprovable::FingerprintMismatch { have, given: want.to_string() }));
            }
        }
        if csr.common_names.len() != 1 || csr.common_names[0] != certname {
            let detail = format!("its common name is {:?}, not {certname:?}", csr.common_names.join(", "));
            return Err(refuse(NotApprovable::Unusable { detail }));
        }
        if let Some(r) = self.reserved_refusal(certname, Some(&csr)) {
            return Err(refuse(NotApprovable::Unusable { detail: r.to_string() }));
        }
        // Puppet's own reserved names (`ca`): no decision grants them, nor does an approval.
        if crate::decision::is_reserved_certname(certname) {
            return Err(refuse(NotApprovable::Unusable { detail: format!("{certname} is a name Puppet reserves") }));
        }
        if carries_attributes(&csr) {
            return Err(refuse(NotApprovable::CarriesAttributes));
        }
        let others: Vec<String> = requested_names(&csr).into_iter().filter(|n| n != certname).collect();
        if !others.is_empty() {
            return Err(refuse(NotApprovable::AltNames { names: others.join(", ") }));
        }
        Ok(csr)
    }
}

/// The subject alternative names a request asks for (DNS names as written, others in a
/// printable form), so that any name besides the certname refuses the approval.
fn requested_names(csr: &Csr) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    use x509_parser::prelude::FromDer;
    let mut names = Vec::new();
    for ext in csr.extensions.iter().filter(|e| e.oid == oids::SUBJECT_ALT_NAME) {
        match x509_parser::extensions::SubjectAlternativeName::from_der(&ext.value) {
            Ok((_, san)) => {
                for n in &san.general_names {
                    names.push(match n {
                        GeneralName::DNSName(d) => d.to_string(),
                        other => format!("{other:?}"),
                    });
                }
            }
            Err(_) => names.push("an unreadable subjectAltName".into()),
        }
    }
    names
}
