//! Setting the store up: `vouch ldap init` (the containers under the base DN, on a server
//! that has vouch's schema), and a master's opening of the store (the containers are there;
//! its CA registered); both first read the server's root DSE and refuse one that lacks what
//! vouch needs.

use super::conn::rc;
use super::entry::{set, Entry};
use super::{LdapStore, CONTAINERS};
use crate::store::StoreError;
use ldap3::{Scope, SearchEntry};

/// The controls vouch needs of a server (OID, what it is), checked against its root DSE
/// before any write ([`LdapStore::check_server`]). Nothing else: every write is a plain add,
/// modify or delete (no assertion control, no increment, no transaction).
pub const NEEDED_CONTROLS: &[(&str, &str)] =
    &[("1.2.840.113556.1.4.319", "the paged results control (RFC 2696), which every listing of the store uses")];

impl LdapStore {
    /// `vouch ldap init`: the containers under the base DN, the lock on revocations of
    /// administrator certificates (`admin_lock.rs`, free) (and, with `create_base`, the base
    /// entry itself if it is an `ou=` under an existing parent: never by default, so that a
    /// mistyped base DN is an error, not a second, empty store). Refuses a server without
    /// vouch's schema. Idempotent. Returns what it created.
    pub fn init(&self, create_base: bool) -> Result<Vec<String>, StoreError> {
        let subschema = self.check_server()?;
        self.check_schema(&subschema)?;
        let mut created = Vec::new();
        if self.read(&self.primary, &self.base)?.is_none() {
            let rdn = self.base.split(',').next().unwrap_or_default();
            let ou = rdn.strip_prefix("ou=").or_else(|| rdn.strip_prefix("OU="));
            let (true, Some(ou)) = (create_base, ou) else {
                let how = match (create_base, ou) {
                    (true, _) => "vouch creates only an ou= base: create this one first",
                    (false, Some(_)) => "to create it, run 'vouch ldap init --create-base'",
                    (false, None) => "vouch creates only an ou= base: create any other first",
                };
                return Err(StoreError::Ldap { op: "use", dn: self.base.clone(), detail: self.base_absent(how) });
            };
            // The base is made under an existing parent only: say which one is missing.
            if let Some((_, parent)) = self.base.split_once(',') {
                if self.read(&self.primary, parent)?.is_none() {
                    return Err(StoreError::Ldap {
                        op: "add",
                        dn: self.base.clone(),
                        detail: format!(
                            "its parent {parent} does not exist (or the bind DN may not read it): check the URL \
                             for a typo; --create-base creates only the base entry, under an existing parent"
                        ),
                    });
                }
            }
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
        if self.init_admin_lock()? {
            created.push(self.admin_lock_dn());
        }
        Ok(created)
    }

    /// Why the base DN reads as absent, and what to do (`how`: to create it). slapd answers a
    /// base search of an entry its ACLs hide from this client as it answers one that does not
    /// exist (noSuchObject, RFC 4511's rule not to disclose it); what tells them apart is the
    /// bind (an anonymous one, where the store needs a bind DN) and the matchedDN: the closest
    /// entry above the base the server shows this client (then the base itself is not there).
    fn base_absent(&self, how: &str) -> String {
        let found = self.primary.run(|c| c.search(&self.base, Scope::Base, "(objectClass=*)", vec!["1.1"]));
        let matched = found.ok().map(|r| r.1).filter(|r| r.rc == rc::NO_SUCH_OBJECT).map(|r| r.matched);
        match (&self.primary.server.bind, matched.filter(|m| !m.is_empty())) {
            (_, Some(above)) => format!(
                "the base DN does not exist: the server holds {above}, and nothing by that name under it: check the \
                 URL for a typo; {how}"
            ),
            (super::conn::Bind::Anonymous, None) => "the bind is anonymous (no --ldap-bind-dn and \
                 --ldap-password-file, nor VOUCH_LDAP_BIND_DN and VOUCH_LDAP_PASSWORD_FILE), and an anonymous client \
                 is shown no entry at the base DN: the server's ACLs may hide it (an LDAP server answers an entry \
                 hidden from a client as one that does not exist: noSuchObject); give the bind DN the store's \
                 ACLs name and its password file, then check the URL for a typo"
                .into(),
            (_, None) => {
                format!("the base DN does not exist (or the bind DN may not read it): check the URL for a typo; {how}")
            }
        }
    }

    /// Discovers what the server implements (its root DSE, RFC 4512 5.1) and refuses one that
    /// lacks something vouch needs ([`NEEDED_CONTROLS`]), naming it. Returns the DN of its
    /// subschema entry (OpenLDAP's `cn=Subschema`, 389 Directory Server's `cn=schema`).
    pub(super) fn check_server(&self) -> Result<String, StoreError> {
        let attrs = vec!["supportedControl", "subschemaSubentry", "vendorName", "vendorVersion"];
        let res = self.primary.run(|c| c.search("", Scope::Base, "(objectClass=*)", attrs.clone()))?;
        let (entries, result) = (res.0, res.1);
        let refuse = |detail: String| StoreError::Ldap {
            op: "check the server",
            dn: self.primary.server.address.clone(),
            detail,
        };
        let root = entries.into_iter().next().map(|e| Entry::from(SearchEntry::construct(e)));
        let Some(root) = root.filter(|_| result.rc == rc::SUCCESS) else {
            return Err(refuse(format!(
                "its root DSE (the entry with the empty DN) cannot be read (result {}: {}): vouch reads its \
                 supportedControl to check the server implements what vouch needs; allow the bind DN (and \
                 anonymous) to read the root DSE",
                result.rc, result.text
            )));
        };
        let controls: Vec<String> = root
            .attrs
            .get("supportedcontrol")
            .map(|v| v.iter().map(|c| String::from_utf8_lossy(c).trim().to_string()).collect())
            .unwrap_or_default();
        let server = match (root.text("vendorName"), root.text("vendorVersion")) {
            (_, Some(v)) => v,
            (Some(n), None) => n,
            (None, None) => "this LDAP server".into(),
        };
        for (oid, what) in NEEDED_CONTROLS {
            if !controls.iter().any(|c| c == oid) {
                return Err(refuse(format!(
                    "{server} does not implement {what} (control {oid}, missing from its root DSE's \
                     supportedControl): vouch needs it; use OpenLDAP 2.5+ or 389 Directory Server 2.x"
                )));
            }
        }
        Ok(root.text("subschemaSubentry").unwrap_or_else(|| "cn=Subschema".into()))
    }

    /// Refuses a server whose schema lacks vouch's object classes (read from its subschema
    /// entry `subschema`; a server that will not show it is given the benefit of the doubt).
    fn check_schema(&self, subschema: &str) -> Result<(), StoreError> {
        let res = self.primary.run(|c| c.search(subschema, Scope::Base, "(objectClass=*)", vec!["objectClasses"]))?;
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
            detail: "this LDAP server does not have vouch's schema (no vouchRegistered object class): OpenLDAP: \
                     include the output of 'vouch ldap schema' in slapd.conf, or load 'vouch ldap schema --ldif' \
                     into cn=config, then restart it; 389 Directory Server: apply 'vouch ldap schema --format \
                     389ds' with ldapmodify as cn=Directory Manager (docs/ldap.md)"
                .into(),
        })
    }

    /// Checks the containers exist (`vouch ldap init` was run), and registers this master's
    /// CA (its entry holds its certificate and the counter of its revocations). True the
    /// first time this CA is registered.
    pub fn open_ca(&self, ca_cert_pem: &str) -> Result<bool, StoreError> {
        self.check_opened()?;
        let Some(ca) = &self.ca else { return Ok(false) };
        self.register_ca(ca, ca_cert_pem)
    }

    /// [`LdapStore::open_ca`]'s checks, with nothing written: the server implements what
    /// vouch needs, and the store's containers exist.
    pub fn check_opened(&self) -> Result<(), StoreError> {
        self.check_server()?;
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
        Ok(())
    }

    /// Registers this master's CA: true the first time.
    fn register_ca(&self, ca: &str, ca_cert_pem: &str) -> Result<bool, StoreError> {
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
