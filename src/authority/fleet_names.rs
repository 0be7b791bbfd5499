//! The names of every master's service are the fleet's: no node of any master may carry
//! them. Each master publishes the certificate its service presents in the shared store
//! (`vouchCa=service-<id>`, [`Authority::publish_service_certificate`]); every master reads
//! the others' in [`Authority::refresh_fleet`] and reserves their names beside its own
//! ([`Authority::reserved_refusal`]). A published certificate counts only if a master CA
//! of the fleet issued it, it is unexpired and it is a service's (no classification, no
//! administrator's extension): whoever may write the store cannot reserve a node's name
//! with the node's own certificate.

use super::reserved::{carries_cli_auth, names_on_certificate, Holder, ReservedNames};
use super::Authority;
use crate::decision::Refusal;
use crate::error::Error;
use crate::issuance::certificate;
use std::collections::HashMap;
use time::OffsetDateTime;

fn refused_service(id: &str, why: &str) {
    if super::root_crl_share::first_time(format!("service-certificate-refused {id} {why}")) {
        tracing::warn!(
            event = "service-certificate-refused",
            ca = %id,
            detail = %why,
            hint = "that master's names stay reserved as they were last read; it publishes its service \
                    certificate again at its next maintenance run",
        );
    }
}

impl Authority {
    /// Publishes the certificate this master's service presents (`DIR/server/server_crt.pem`)
    /// in the shared store. The file store: nothing.
    pub fn publish_service_certificate(&self) -> Result<(), Error> {
        if !self.store.shares_root_crl() {
            return Ok(());
        }
        let path = self.dir.dir.join(crate::issuance::bootstrap::SERVER_CERT);
        let pem = std::fs::read(&path).map_err(|source| Error::Io { path: path.clone(), op: "read", source })?;
        let (_, der) = crate::encoding::pem::find(&pem, &["CERTIFICATE"])
            .map_err(|e| Error::Cert { path, detail: e.to_string() })?;
        self.store.publish_service_certificate(&self.ca_id(), &der)?;
        Ok(())
    }

    /// The other masters and their service names, read from the shared store without
    /// writing anything ([`Authority::refresh_fleet`] also writes the fleet's files and
    /// publishes this master's CRL): for commands that only look, such as a dry run of
    /// `vouch reconcile`. The file store: nothing.
    pub fn read_fleet_names(&self) -> Result<(), Error> {
        if !self.store.shares_root_crl() {
            return Ok(());
        }
        let root = super::own_crl::read_root_der(&self.dir)
            .map_err(|detail| Error::Cert { path: self.dir.file(crate::issuance::bootstrap::ROOT_CERT), detail })?;
        let root_crl = self.policy.trust.own_crl.get();
        let (siblings, _) =
            super::masters::fleet_masters(&root, &self.ca_der(), self.store.issuers()?, root_crl.as_deref());
        self.fleet.set(siblings.clone());
        self.refresh_fleet_names(&siblings, OffsetDateTime::now_utc(), false)?;
        Ok(())
    }

    /// Reads the other masters' service certificates from the store (`siblings`: the master
    /// CAs counted) and reserves their names from now on: how many names that is. With
    /// `republish` (the maintenance), this master's own is published again where the store's
    /// copy is missing or another.
    pub(super) fn refresh_fleet_names(
        &self,
        siblings: &[Vec<u8>],
        now: OffsetDateTime,
        republish: bool,
    ) -> Result<usize, Error> {
        let own_id = self.ca_id();
        let mut ids: Vec<String> = siblings.iter().map(|ca| crate::store::ca_id(ca)).collect();
        ids.push(own_id.clone());
        let mut found: HashMap<String, Vec<String>> = HashMap::new();
        let mut own_published = None;
        for (id, der) in self.store.service_certificates(&ids)? {
            if id == own_id {
                own_published = Some(der);
                continue;
            }
            let Some(ca) = siblings.iter().find(|ca| crate::store::ca_id(ca) == id) else { continue };
            match self.service_certificate_of(&der, ca, now) {
                Ok(()) => {
                    found.insert(id, names_on_certificate(&der));
                }
                Err(why) => refused_service(&id, &why),
            }
        }
        if republish {
            self.republish_service_certificate(own_published.as_deref());
        }
        // A master whose entry is gone (removed from the store) keeps the names it was last
        // seen with, as long as it counts: its names are not freed by whoever may write the store.
        let mut last = self.fleet.names.lock().unwrap_or_else(|e| e.into_inner());
        last.retain(|id, _| ids.contains(id));
        for (id, names) in found {
            last.insert(id, names);
        }
        let mut names = ReservedNames::default();
        last.values().flatten().for_each(|n| names.add(n.clone(), Holder::OtherMaster));
        let n = names.len();
        if let Ok(mut w) = self.fleet_names.write() {
            *w = names;
        }
        Ok(n)
    }

    /// Publishes this master's service certificate again where the store's entry is missing
    /// or holds another (removed or changed by someone who may write the store; a start
    /// whose publication failed). A failure is warned about; the next run tries again.
    fn republish_service_certificate(&self, published: Option<&[u8]>) {
        let path = self.dir.dir.join(crate::issuance::bootstrap::SERVER_CERT);
        let Ok(pem) = std::fs::read(&path) else { return };
        let Ok((_, der)) = crate::encoding::pem::find(&pem, &["CERTIFICATE"]) else { return };
        if published == Some(der.as_slice()) {
            return;
        }
        if let Err(e) = self.store.publish_service_certificate(&self.ca_id(), &der) {
            if super::root_crl_share::first_time(format!("service-certificate-not-published {e}")) {
                tracing::warn!(
                    event = "service-certificate-not-published",
                    detail = %e,
                    hint = "the other masters do not reserve this service's names until it is published; the next \
                            maintenance run tries again",
                );
            }
        }
    }

    /// Whether `der` is a service certificate the master CA `ca` issued, valid at `now`.
    fn service_certificate_of(&self, der: &[u8], ca: &[u8], now: OffsetDateTime) -> Result<(), String> {
        super::signed::signed_by_one_of(der, &[ca.to_vec()])
            .map_err(|e| format!("that master CA did not issue it ({e})"))?;
        let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| e.to_string())?;
        let until = cert.validity().not_after.to_datetime();
        if until <= now {
            return Err(format!("it expired at {until}"));
        }
        if carries_cli_auth(der)
            || certificate::classification_of(der, &self.policy.mirror_oid).ok().flatten().is_some()
        {
            return Err("it is no service's certificate (an administrator's or a node's)".into());
        }
        Ok(())
    }

    /// Whether `name` is the certname (first name, the CN) of another master's service, as
    /// that master published it.
    pub fn another_masters_certname(&self, name: &str) -> bool {
        let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        let names = self.fleet.names.lock().unwrap_or_else(|e| e.into_inner());
        names.values().any(|n| n.first().is_some_and(|cn| cn.to_ascii_lowercase() == name))
    }

    /// Whose name `name` is, if it is reserved here: this master's own, or another master's.
    pub fn reserved_holder(&self, name: &str) -> Option<Holder> {
        self.reserved.holder(name).or_else(|| self.fleet_names.read().ok().and_then(|f| f.holder(name)))
    }

    /// [`ReservedNames::refusal`], for this master's names and the other masters'.
    pub fn reserved_refusal(&self, certname: &str, csr: Option<&crate::encoding::csr::Csr>) -> Option<Refusal> {
        self.reserved
            .refusal(certname, csr)
            .or_else(|| self.fleet_names.read().ok().and_then(|f| f.refusal(certname, csr)))
    }

    /// [`ReservedNames::refusal_for`], for this master's names and the other masters'.
    pub fn reserved_refusal_for(&self, certname: &str, alt_names: &[String]) -> Option<Refusal> {
        self.reserved
            .refusal_for(certname, alt_names)
            .or_else(|| self.fleet_names.read().ok().and_then(|f| f.refusal_for(certname, alt_names)))
    }

    /// A name the service is to carry (`vouch serve --server-name`) that a node holds: the
    /// node's certname and the serial of its valid certificate, if any. A node certificate
    /// under a service's name would let that node answer as the service.
    pub fn name_of_a_node(&self, name: &str, now: OffsetDateTime) -> Result<Option<String>, Error> {
        if crate::decision::check_certname(name).is_err() {
            return Ok(None);
        }
        let Some(c) = self.store.current(name)? else { return Ok(None) };
        let rec = &c.record;
        let valid = rec.state == crate::store::State::Issued
            && crate::encoding::time::parse_rfc3339(&rec.not_after).is_ok_and(|t| t > now);
        // vouch's own: this service's certificate, an administrator's, another master's
        // service's (its names as that master published them). Anything else is a node's,
        // whether a conductor vouched for it or it was imported.
        let own_service = std::fs::read(self.dir.dir.join(crate::issuance::bootstrap::SERVER_CERT))
            .ok()
            .and_then(|pem| crate::encoding::pem::find(&pem, &["CERTIFICATE"]).ok())
            .and_then(|(_, der)| {
                x509_parser::parse_x509_certificate(&der).ok().map(|(_, c)| crate::encoding::hex(c.raw_serial()))
            })
            .is_some_and(|serial| serial == rec.serial);
        let vouchs_own = own_service
            || self.is_admin_certificate(&c.pem)
            || self.fleet_names.read().ok().is_some_and(|f| f.holder(name) == Some(Holder::OtherMaster))
            || (rec.conductor.is_none() && rec.attributes_expiry.is_none() && self.reserved.holder(name).is_some());
        Ok((valid && !vouchs_own).then(|| rec.serial.clone()))
    }
}
