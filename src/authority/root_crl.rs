//! The root's CRL, where the root key is: when it is due, and writing it from the root
//! revocations `vouch conductor revoke` records.

use super::crl_files::{after_second, modified_second, next_crl_number, read_text};
use super::revocation_input::reason_code;
use super::root_revocations::{read_root_revocations, revocations_stamp, ROOT_CRL_STAMP};
use super::Authority;
use crate::encoding::time::format_rfc3339;
use crate::error::Error;
use crate::issuance::bootstrap;
use crate::store::WriteLock;
use time::OffsetDateTime;

impl Authority {
    /// The root CRL (the conductors `vouch conductor revoke` revoked, listed in
    /// `root_revocations.txt`) is due when missing, within `refresh_before` of its
    /// nextUpdate, or older than the last root revocation recorded (a crash between the
    /// record and the CRL, or a writer that read the list before it), and only if the root
    /// key is on this machine (an operator may keep it offline).
    pub(super) fn root_crl_due(&self, now: OffsetDateTime) -> bool {
        if !self.dir.file(bootstrap::ROOT_KEY).exists() {
            return false;
        }
        // No stamp yet (a CRL written before root revocations existed) stands for none.
        let recorded = read_text(self.dir.file(ROOT_CRL_STAMP)).unwrap_or_else(|_| "0".into());
        if recorded.trim() != revocations_stamp(&self.dir) {
            return true;
        }
        // A root CRL that does not read (damaged, truncated) revokes nothing in the decision:
        // written again (it is small: the root signs only master CAs and conductors).
        if !self.root_crl_reads() {
            return true;
        }
        let next = read_text(self.dir.file("root_crl_next_update"))
            .ok()
            .and_then(|s| crate::encoding::time::parse_rfc3339(s.trim()).ok());
        let refresh = time::Duration::try_from(self.policy.crl_refresh_before).unwrap_or(time::Duration::days(10));
        match next {
            Some(next) => next - now < refresh || !self.dir.file(bootstrap::ROOT_CRL).exists(),
            None => true,
        }
    }

    /// Writes the root's CRL: every revocation `root_revocations.txt` records (conductors,
    /// by `vouch conductor revoke`), with its time and reason. Puppet agents check revocation
    /// for the whole chain (`certificate_revocation = chain`), so they need a CRL from the
    /// root too; the decision counts it for conductors ([`crate::policy::OwnCrl`]).
    pub(super) fn write_root_crl_locked(&self, _lock: &WriteLock, now: OffsetDateTime) -> Result<(), Error> {
        let bootstrap::CertAndKey { cert_der: root_der, key: root_key } =
            bootstrap::load_cert_and_key(&self.dir.file(bootstrap::ROOT_CERT), &self.dir.file(bootstrap::ROOT_KEY))?;
        let issuer =
            rcgen::Issuer::from_ca_cert_der(&rustls_pki_types::CertificateDer::from(root_der.as_slice()), root_key)
                .map_err(|e| Error::Crypto { detail: e.to_string() })?;
        let number_path = self.dir.file("root_crl_number");
        let number = next_crl_number(&number_path, &self.dir.file("root_crl.pem"), now)?;
        // Read before the revocations: one recorded meanwhile makes the next CRL due.
        let stamp = revocations_stamp(&self.dir);
        let revoked = read_root_revocations(&self.dir)?
            .into_iter()
            .map(|r| rcgen::RevokedCertParams {
                serial_number: rcgen::SerialNumber::from_slice(&r.serial_bytes()),
                revocation_time: crate::encoding::time::parse_rfc3339(&r.time).ok().unwrap_or(now),
                reason_code: reason_code(&r.reason),
                invalidity_date: None,
            })
            .collect();
        // A year, or the policy's CRL validity if longer.
        let validity = time::Duration::try_from(self.policy.crl_validity).unwrap_or(time::Duration::days(30));
        let params = rcgen::CertificateRevocationListParams {
            this_update: now,
            next_update: now.checked_add(validity.max(time::Duration::days(365))).ok_or_else(|| Error::Date {
                detail: "the root CRL's nextUpdate would be past the year 9999".into(),
            })?,
            crl_number: rcgen::SerialNumber::from_slice(&number.to_be_bytes()),
            issuing_distribution_point: None,
            revoked_certs: revoked,
            key_identifier_method: super::crl_der::key_id_of(&root_der),
        };
        let crl = params.signed_by(&issuer).map_err(|e| Error::Crypto { detail: e.to_string() })?;
        let pem = crl.pem().map_err(|e| Error::Crypto { detail: e.to_string() })?;
        let write = |path: std::path::PathBuf, bytes: &[u8]| {
            crate::files::durable::write_replace(&path, bytes, 0o644).map_err(|source| Error::Io {
                path,
                op: "write",
                source,
            })
        };
        write(number_path, format!("{number}\n").as_bytes())?;
        let root_crl = self.dir.file(bootstrap::ROOT_CRL);
        let dated = Some(after_second(modified_second(&root_crl), std::time::SystemTime::now()));
        crate::files::durable::write_replace_dated(&root_crl, pem.as_bytes(), 0o644, dated)
            .map_err(|source| Error::Io { path: root_crl.clone(), op: "write", source })?;
        write(self.dir.file("root_crl_next_update"), format!("{}\n", format_rfc3339(params.next_update)).as_bytes())?;
        // After the CRL: a crash between the two leaves the older stamp, which only makes
        // the next command write the root CRL again.
        write(self.dir.file(ROOT_CRL_STAMP), format!("{stamp}\n").as_bytes())
    }
}
