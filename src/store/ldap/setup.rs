//! Setting the store up: `vouch ldap init` (the containers under the base DN, on a server
//! that has vouch's schema), and a master's opening of the store (the containers are there;
//! its CA registered).

use super::conn::rc;
use super::entry::{set, Entry};
use super::{LdapStore, CONTAINERS};
use crate::store::StoreError;
use ldap3::{Scope, SearchEntry};

impl LdapStore {
    /// `vouch ldap init`: the containers under the base DN (and, with `create_base`, the base
    /// entry itself if it is an `ou=` under an existing parent: never by default, so that a
    /// mistyped base DN is an error, not a second, empty store). Refuses a server without
    /// vouch's schema. Idempotent. Returns what it created.
    pub fn init(&self, create_base: bool) -> Result<Vec<String>, StoreError> {
        self.check_schema()?;
        let mut created = Vec::new();
        if self.read(&self.primary, &self.base)?.is_none() {
            let rdn = self.base.split(',').next().unwrap_or_default();
            let ou = rdn.strip_prefix("ou=").or_else(|| rdn.strip_prefix("OU="));
            let (true, Some(ou)) = (create_base, ou) else {
                return Err(StoreError::Ldap {
                    op: "use",
                    dn: self.base.clone(),
                    detail: format!(
                        "the base DN does not exist (or the bind DN may not read it): check the URL for a typo; \
                         to create it, run 'vouch ldap init --create-base'{}",
                        if ou.is_none() { " (vouch creates only an ou= base; create any other first)" } else { "" }
                    ),
                });
            };
            let code = self.add(
                &self.base,
                vec![("objectClass", set("organizationalUnit")), ("ou", set(ou.as_bytes().to_vec()))],
            )?;
            if code == rc::SUCCESS {
                created.push(self.base.clone());
            }
        }
        for c in CONTAINERS {
            let dn = self.container(c);
            let code = self.add(&dn, vec![("objectClass", set("organizationalUnit")), ("ou", set(*c))])?;
            if code == rc::SUCCESS {
                created.push(dn);
            }
        }
        Ok(created)
    }

    /// Refuses a server whose schema lacks vouch's object classes (read from its subschema
    /// entry; a server that will not show it is given the benefit of the doubt).
    fn check_schema(&self) -> Result<(), StoreError> {
        let res =
            self.primary.run(|c| c.search("cn=Subschema", Scope::Base, "(objectClass=*)", vec!["objectClasses"]))?;
        let (entries, result) = (res.0, res.1);
        if result.rc != rc::SUCCESS {
            return Ok(());
        }
        let Some(e) = entries.into_iter().next().map(|e| Entry::from(SearchEntry::construct(e))) else {
            return Ok(());
        };
        let known = e
            .attrs
            .get("objectclasses")
            .is_some_and(|v| v.iter().any(|c| String::from_utf8_lossy(c).contains("'vouchRegistered'")));
        if known {
            return Ok(());
        }
        Err(StoreError::Ldap {
            op: "use",
            dn: self.primary.server.address.clone(),
            detail: "this LDAP server does not have vouch's schema (no vouchRegistered object class): include \
                     the output of 'vouch ldap schema' in slapd.conf, or load 'vouch ldap schema --ldif' into \
                     cn=config, then restart it (docs/ldap.md)"
                .into(),
        })
    }

    /// Checks the containers exist (`vouch ldap init` was run), and registers this master's
    /// CA (its entry holds its certificate and the counter of its revocations). True the
    /// first time this CA is registered.
    pub fn open_ca(&self, ca_cert_pem: &str) -> Result<bool, StoreError> {
        for c in CONTAINERS {
            let dn = self.container(c);
            if self.read(&self.primary, &dn)?.is_none() {
                return Err(StoreError::Ldap {
                    op: "open",
                    dn,
                    detail: "the store's containers are missing, or the bind DN may not read them: run 'vouch \
                             ldap init --store URL' first, and check slapd's ACL for the bind DN (docs/ldap.md)"
                        .into(),
                });
            }
        }
        let Some(ca) = &self.ca else { return Ok(false) };
        let dn = self.ca_dn(ca);
        let code = self.add(
            &dn,
            vec![
                ("objectClass", set("vouchIssuer")),
                ("vouchCa", set(ca.as_bytes().to_vec())),
                ("vouchRevision", set("0")),
                ("vouchCertificate", set(ca_cert_pem.as_bytes().to_vec())),
            ],
        )?;
        Ok(code == rc::SUCCESS)
    }
}
