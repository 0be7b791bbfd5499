//! Certificates vouch issues itself, outside the decision: the service's and the
//! administrators'; and who presented a client certificate.

use super::Authority;
use crate::decision;
use crate::error::{AdminNameTaken, Error};
use crate::issuance::bootstrap;
use crate::issuance::certificate::{self, Authorization, Issued};
use crate::store::State;
use time::OffsetDateTime;

/// What [`Authority::issue_local`] makes: a service or administrator certificate.
#[derive(Debug, Clone, Copy)]
pub struct LocalSpec<'a> {
    pub certname: &'a str,
    pub role: certificate::LocalRole,
    /// Extra DNS names and IP addresses (service certificates).
    pub dns_names: &'a [String],
    pub ip_addresses: &'a [std::net::IpAddr],
    pub key_type: crate::issuance::keys::KeyType,
    /// Supersede a current certificate of the same name (else refuse).
    pub replace: bool,
}

/// A certificate presented by a TLS client, checked against the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Presented {
    pub certname: String,
    pub serial: String,
    /// Carries Puppet's `pp_cli_auth` = "true".
    pub cli_auth: bool,
    /// SHA-256 fingerprint, `AB:CD:…`.
    pub fingerprint: String,
}

impl Authority {
    /// Issues a certificate for the service itself or for an administrator, with a
    /// key generated here (returned as PEM, for the caller to write 0600). With
    /// `replace`, a current certificate of the same name is revoked (superseded).
    pub fn issue_local(&self, spec: &LocalSpec<'_>, now: OffsetDateTime) -> Result<(Issued, String), Error> {
        let key = spec.key_type.generate().map_err(|e| Error::Crypto { detail: e.to_string() })?;
        let issued = self.issue_local_for_key(spec, &key, now)?;
        Ok((issued, key.serialize_pem()))
    }

    /// [`Authority::issue_local`] for a key that already exists (written before the
    /// certificate is asked for, so an interrupted run leaves a key to finish with, never a
    /// certificate whose key is lost); `spec.key_type` is not used.
    pub fn issue_local_for_key(
        &self,
        spec: &LocalSpec<'_>,
        key: &rcgen::KeyPair,
        now: OffsetDateTime,
    ) -> Result<Issued, Error> {
        let LocalSpec { certname, role, dns_names, ip_addresses, key_type: _, replace } = *spec;
        let admin = role == certificate::LocalRole::Admin;
        self.check_local_name(certname, admin)?;
        let spki = rcgen::PublicKeyData::subject_public_key_info(key);
        let key_kind = crate::encoding::csr::spki_kind(&spki).map_err(|e| Error::Crypto { detail: e.to_string() })?;
        let lock = self.store.lock()?;
        let current = self.current_checked(certname)?;
        if admin {
            self.check_admin_name_free(certname, current.as_ref(), now)?;
        }
        let supersede = match &current {
            Some(c) => local_supersedes(c, certname, role, replace, &self.ca.cert_der, now)?,
            None => false,
        };
        let proof = certificate::LocalProof {
            certname: certname.to_string(),
            spki,
            key_kind,
            role,
            dns_names: dns_names.to_vec(),
            ip_addresses: ip_addresses.to_vec(),
        };
        self.issue_locked(
            &lock,
            current.as_ref().map(|c| (c, supersede)),
            Authorization::Local(proof),
            None,
            None,
            None,
            now,
        )
        .map(|stored| stored.issued)
    }

    /// [`Authority::issue_local_for_key`]'s refusals of `spec`, judged without issuing or
    /// locking anything: `vouch serve`'s service certificate, before its CA joins the fleet.
    pub fn check_local(&self, spec: &LocalSpec<'_>, now: OffsetDateTime) -> Result<(), Error> {
        let admin = spec.role == certificate::LocalRole::Admin;
        self.check_local_name(spec.certname, admin)?;
        let current = self.current_checked(spec.certname)?;
        if admin {
            self.check_admin_name_free(spec.certname, current.as_ref(), now)?;
        }
        if let Some(c) = &current {
            local_supersedes(c, spec.certname, spec.role, spec.replace, &self.ca.cert_der, now)?;
        }
        Ok(())
    }

    /// The name of a certificate of vouch's own: a certname, not Puppet's reserved one; an
    /// administrator's also no name the service or a Puppet server goes by.
    fn check_local_name(&self, certname: &str, admin: bool) -> Result<(), Error> {
        if admin {
            super::check_name(certname)?;
            if decision::is_reserved_certname(certname) {
                return Err(admin_name_refused(certname, AdminNameTaken::Puppet));
            }
            if self.reserved.holder(certname) == Some(super::Holder::Service) {
                return Err(admin_name_refused(certname, AdminNameTaken::Service));
            }
            if let Some(detail) = self.server_name(certname) {
                return Err(admin_name_refused(certname, AdminNameTaken::Server { detail }));
            }
        }
        decision::check_certname(certname).map_err(|r| Error::Usage { detail: format!("{r}") })?;
        if decision::is_reserved_certname(certname) {
            return Err(Error::Usage { detail: format!("{certname:?} is reserved by Puppet for the CA itself") });
        }
        Ok(())
    }

    /// Under the lock: a new administrator's name is not held by the store's `current`
    /// certificate of it ([`Authority::taken_from_administrators`]), nor listed without one.
    fn check_admin_name_free(
        &self,
        certname: &str,
        current: Option<&crate::store::Current>,
        now: OffsetDateTime,
    ) -> Result<(), Error> {
        match current {
            Some(c) => {
                if let Some(why) = self.taken_from_administrators(c, now) {
                    return Err(admin_name_refused(certname, why));
                }
            }
            // A certname the store lists whose current certificate is missing (a damaged
            // store): a node's, whose certificate may be valid: refused, as revoke refuses it.
            None => {
                let file =
                    self.shared_journal.is_none().then(|| self.dir.ca().join("signed").join(format!("{certname}.pem")));
                if let e @ Error::CurrentMissing { .. } = self.no_current(certname, file) {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Why `name` is a Puppet server's, if it is: `puppet` (the server agents ask for by
    /// default), this host's name (`vouch serve`'s default name, Puppet Server's certname
    /// here), or a name the policy gives servers (a scope's `servers` or `dns_alt_names`
    /// written without `*`). An administrator under it would hold a name agents connect to.
    fn server_name(&self, name: &str) -> Option<String> {
        if name == super::reserved::PUPPET_DEFAULT_SERVER {
            return Some(
                "Puppet agents reach their server as `puppet` when none is configured (Puppet's `server` setting)"
                    .into(),
            );
        }
        if super::host_name().as_deref() == Some(name) {
            return Some(
                "this host's name, which `vouch serve` gives its certificate by default (and Puppet Server on \
                 this host uses as its certname)"
                    .into(),
            );
        }
        self.policy.scopes.iter().find_map(|scope| {
            let listed = |patterns: &Option<Vec<crate::policy::Pattern>>| {
                patterns.iter().flatten().any(|p| !p.text.contains('*') && p.text.eq_ignore_ascii_case(name))
            };
            if listed(&scope.servers) {
                Some(format!("the policy's conductor {:?} lists it among its servers", scope.name))
            } else if listed(&scope.dns_alt_names) {
                Some(format!("the policy's conductor {:?} lists it among its servers' dns_alt_names", scope.name))
            } else {
                None
            }
        })
    }

    /// Why the current certificate `c` keeps its name from a new administrator, if it does: a
    /// node's (revoked or not: the name is freed by `vouch clean`), the service's or an
    /// administrator's while valid. A revoked or expired certificate of vouch's own holds nothing.
    fn taken_from_administrators(&self, c: &crate::store::Current, now: OffsetDateTime) -> Option<AdminNameTaken> {
        let rec = &c.record;
        let der = crate::encoding::pem::find(c.pem.as_bytes(), &["CERTIFICATE"]).map(|(_, d)| d).unwrap_or_default();
        let revoked = rec.state != State::Issued;
        let valid = !revoked && crate::encoding::time::parse_rfc3339(&rec.not_after).ok().is_some_and(|t| t > now);
        let node = rec.conductor.is_some()
            || rec.attributes_expiry.is_some()
            || certificate::classification_of(&der, &self.policy.mirror_oid).ok().flatten().is_some();
        if node {
            return Some(AdminNameTaken::Node { serial: rec.serial.clone(), revoked });
        }
        if !valid {
            return None;
        }
        Some(if super::reserved::carries_cli_auth(&der) {
            AdminNameTaken::Administrator { serial: rec.serial.clone() }
        } else {
            AdminNameTaken::Service
        })
    }

    /// Checks a certificate a TLS client presented: issued by this CA, valid now, and
    /// still the current, unrevoked certificate of its certname in the store (so a
    /// revoked, superseded or cleaned certificate is refused at once, without a CRL).
    pub fn presented(&self, der: &[u8], now: OffsetDateTime) -> Result<Presented, Error> {
        self.verify_ours(der, now)?;
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| Error::NotValid { certname: String::new(), detail: e.to_string() })?;
        let certname = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .map(str::to_string)
            .ok_or_else(|| Error::NotValid { certname: String::new(), detail: "it has no common name".into() })?;
        decision::check_certname(&certname)
            .map_err(|r| Error::NotValid { certname: certname.clone(), detail: r.to_string() })?;
        let serial = crate::encoding::hex(cert.raw_serial());
        // On a CRL this master serves: revoked, whatever the store's record says now.
        if self.on_a_served_crl(cert.raw_serial()) {
            return Err(Error::NotValid { certname, detail: format!("serial {serial} is revoked (on a CRL)") });
        }
        match self.store.record(&serial)? {
            Some(rec) if rec.state == State::Issued && rec.certname == certname => {}
            Some(rec) => {
                return Err(Error::NotValid {
                    certname,
                    detail: format!("serial {serial} is {:?} in the store", rec.state).to_lowercase(),
                })
            }
            None => return Err(Error::NotValid { certname, detail: format!("serial {serial} is unknown here") }),
        }
        match self.store.current(&certname)? {
            Some(c) if c.record.serial == serial => {}
            _ => {
                return Err(Error::NotValid {
                    certname,
                    detail: format!("serial {serial} is no longer its current certificate"),
                })
            }
        }
        let cli_auth = cert.extensions().iter().any(|e| {
            let arcs: Option<Vec<u64>> = e.oid.iter().map(|i| i.collect());
            arcs.as_deref() == Some(crate::encoding::oids::PP_CLI_AUTH)
                && crate::encoding::der::Reader::new(e.value).any().is_ok_and(|t| t.content == b"true")
        });
        Ok(Presented { certname, serial, cli_auth, fingerprint: bootstrap::fingerprint(der) })
    }
}

/// A new administrator refused the name `certname`, and why.
fn admin_name_refused(certname: &str, why: AdminNameTaken) -> Error {
    Error::AdminNameRefused { name: certname.to_string(), why }
}

/// Whether a new certificate of vouch's own for `certname` supersedes its current one `c`
/// (a valid one); refused when `c` is valid and not `replace`, or is a node's, another
/// master's, or (for the service) an administrator's. `own_ca`: this master CA (DER).
fn local_supersedes(
    c: &crate::store::Current,
    certname: &str,
    role: certificate::LocalRole,
    replace: bool,
    own_ca: &[u8],
    now: OffsetDateTime,
) -> Result<bool, Error> {
    let rec = &c.record;
    let valid = rec.state == State::Issued
        && crate::encoding::time::parse_rfc3339(&rec.not_after).ok().is_some_and(|t| t > now);
    if valid && !replace {
        return Err(Error::Usage {
            detail: format!(
                "{certname} already has a valid certificate (serial {}); revoke or clean it first",
                rec.serial
            ),
        });
    }
    // `replace` supersedes vouch's own certificate for that name (the service's
    // previous one), never a node's: a --server-name naming a node must not revoke it.
    // A node's: vouched for, or approved (it carries a classification, as no certificate of
    // vouch's own does).
    let pem = c.pem.as_bytes();
    let der = crate::encoding::pem::find(pem, &["CERTIFICATE"]).map(|(_, d)| d).unwrap_or_default();
    let classified = || certificate::classification_of(&der, crate::encoding::oids::ATTR_CLASSIFICATION);
    if valid && (rec.conductor.is_some() || rec.attributes_expiry.is_some() || classified().ok().flatten().is_some()) {
        return Err(Error::Usage {
            detail: format!(
                "{certname} is a node's certname: it has a valid certificate (serial {}) a conductor \
                 vouched for (or an administrator approved), which vouch will not revoke to take the name; \
                 choose another --server-name, \
                 or revoke or clean the node first ('vouch revoke {certname}')",
                rec.serial
            ),
        });
    }
    // A shared store: another master's service (or administrator) certificate under
    // this name is never superseded (each would revoke the other's at every start).
    let own = crate::store::ca_id(own_ca);
    if valid && rec.issuer.as_ref().is_some_and(|i| *i != own) {
        return Err(Error::Usage {
            detail: format!(
                "{certname} has a valid certificate (serial {}) from another master CA sharing this \
                 store; give each master its own name (--server-name for vouch serve; \
                 'vouch admin new NAME' for administrators)",
                rec.serial
            ),
        });
    }
    // Nor an administrator's: the service taking an administrator's name would revoke
    // that credential (and the administrator's `vouch revoke NAME` then the service's).
    if valid && role != certificate::LocalRole::Admin && super::reserved::carries_cli_auth(&der) {
        return Err(Error::Usage {
            detail: format!(
                "{certname} is an administrator's name: it has a valid administrator certificate (serial {}), \
                 which vouch will not revoke to take the name; choose another --server-name, or revoke the \
                 administrator first ('vouch revoke {certname}')",
                rec.serial
            ),
        });
    }
    Ok(valid)
}
