//! The LDAP store's test lab: a private slapd with vouch's schema, the environment that
//! points vouch at it, and `vouch serve` masters on it.

use super::processes::ended_within;
use super::slapd::{LdapOutput, Slapd, SlapdOpts};
use super::{ok, s, serve_cmd, start_serve, vouch};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;
use vouch::serve::client::{tls_config, Client};

/// The base DN of the store in every test.
pub const BASE: &str = "ou=vouch,dc=vouch,dc=test";

/// A private slapd with vouch's schema and indexes (from `vouch ldap schema`).
pub fn slapd_opts() -> SlapdOpts {
    let schema = ok(&vouch().args(["ldap", "schema"]).output().unwrap());
    let indexes = schema.lines().filter_map(|l| l.strip_prefix("#   index ")).map(str::to_string).collect::<Vec<_>>();
    assert!(!indexes.is_empty(), "the schema names its indexes");
    SlapdOpts { schema: Some(schema), indexes, ..Default::default() }
}

/// A directory server holding one store, as the tests use it: a private slapd (the store at
/// [`BASE`], vouch bound as its root DN) or one test's base DN on the shared private 389
/// Directory Server (`super::ds389`, vouch bound as a DN of its own).
pub trait Directory: Sync {
    /// `ldap://127.0.0.1:PORT/BASE`.
    fn url(&self, base: &str) -> String;
    /// The loopback port of `ldap://`.
    fn port(&self) -> u16;
    /// The store's base DN.
    fn base(&self) -> String;
    /// The DN vouch binds as.
    fn bind_dn(&self) -> String;
    /// Its password, alone in a file.
    fn password_file(&self) -> PathBuf;
    /// `ldapsearch -LLL` as the server's administrator.
    fn ldapsearch(&self, base: &str, filter: &str, attrs: &[&str]) -> LdapOutput;
    /// `ldapmodify` as the server's administrator.
    fn ldapmodify(&self, ldif: &str) -> LdapOutput;
    /// "openldap" or "389ds", for messages.
    fn server(&self) -> &'static str;
    /// An ldap tool (ldapadd, ldapdelete...) bound as the server's administrator, `args` after
    /// the connection options.
    fn ldap_tool(&self, tool: &str, args: &[&str], stdin: Option<&str>) -> LdapOutput;
    /// Stops the server (a test's own: never the 389 DS instance the binary's tests share).
    fn stop(&self);
    /// Stops the server if it runs and starts it again, same port and database; returns once
    /// it answers.
    fn restart(&self);

    /// `ldapadd` of `ldif` as the server's administrator.
    fn ldapadd(&self, ldif: &str) -> LdapOutput {
        self.ldap_tool("ldapadd", &[], Some(ldif))
    }
    /// Whether the entry `dn` exists. Panics on any answer but found / "No such object" (32).
    fn has_dn(&self, dn: &str) -> bool {
        let out = self.ldap_tool("ldapsearch", &["-LLL", "-b", dn, "-s", "base", "(objectClass=*)", "1.1"], None);
        match out.code {
            0 => true,
            32 => false,
            _ => panic!("{}: search of {dn}: {out}", self.server()),
        }
    }
}

impl Directory for Slapd {
    fn url(&self, base: &str) -> String {
        Slapd::url(self, base)
    }
    fn port(&self) -> u16 {
        Slapd::port(self)
    }
    fn base(&self) -> String {
        BASE.into()
    }
    fn bind_dn(&self) -> String {
        Slapd::bind_dn(self).into()
    }
    fn password_file(&self) -> PathBuf {
        Slapd::password_file(self)
    }
    fn ldapsearch(&self, base: &str, filter: &str, attrs: &[&str]) -> LdapOutput {
        Slapd::ldapsearch(self, base, filter, attrs)
    }
    fn ldapmodify(&self, ldif: &str) -> LdapOutput {
        Slapd::ldapmodify(self, ldif)
    }
    fn server(&self) -> &'static str {
        "openldap"
    }
    fn ldap_tool(&self, tool: &str, args: &[&str], stdin: Option<&str>) -> LdapOutput {
        Slapd::ldap_tool(self, tool, args, stdin)
    }
    fn stop(&self) {
        Slapd::stop(self);
    }
    fn restart(&self) {
        Slapd::restart(self);
    }
}

/// `Directory` through a reference and a box: every call forwarded to the directory itself.
macro_rules! forward_directory {
    ($($ty:ty),*) => {$(
        impl<T: Directory + ?Sized> Directory for $ty {
            fn url(&self, base: &str) -> String {
                (**self).url(base)
            }
            fn port(&self) -> u16 {
                (**self).port()
            }
            fn base(&self) -> String {
                (**self).base()
            }
            fn bind_dn(&self) -> String {
                (**self).bind_dn()
            }
            fn password_file(&self) -> PathBuf {
                (**self).password_file()
            }
            fn ldapsearch(&self, base: &str, filter: &str, attrs: &[&str]) -> LdapOutput {
                (**self).ldapsearch(base, filter, attrs)
            }
            fn ldapmodify(&self, ldif: &str) -> LdapOutput {
                (**self).ldapmodify(ldif)
            }
            fn server(&self) -> &'static str {
                (**self).server()
            }
            fn ldap_tool(&self, tool: &str, args: &[&str], stdin: Option<&str>) -> LdapOutput {
                (**self).ldap_tool(tool, args, stdin)
            }
            fn stop(&self) {
                (**self).stop();
            }
            fn restart(&self) {
                (**self).restart();
            }
        }
    )*};
}
forward_directory!(&T, Box<T>);

/// A private slapd with the store's containers at [`BASE`] (`vouch ldap init --create-base`).
pub fn openldap_store() -> Slapd {
    let slapd = Slapd::start(&slapd_opts());
    let out = super::vouch()
        .envs(store_env(&slapd))
        .args(["--dir", s(slapd.dir()), "ldap", "init", "--create-base"])
        .output()
        .unwrap();
    ok(&out);
    slapd
}

/// The environment that points vouch at a directory's store (simple bind, password file).
pub fn store_env<D: Directory + ?Sized>(d: &D) -> Vec<(String, String)> {
    vec![
        ("VOUCH_STORE".into(), d.url(&d.base())),
        ("VOUCH_LDAP_BIND_DN".into(), d.bind_dn()),
        ("VOUCH_LDAP_PASSWORD_FILE".into(), s(&d.password_file()).into()),
    ]
}

/// `vouch serve` on the LDAP store.
pub struct Master {
    pub port: u16,
    pub dir: PathBuf,
    /// What it printed before it was ready.
    pub banner: String,
    child: Option<Child>,
    log: PathBuf,
}

impl Master {
    pub fn start(slapd: &dyn Directory, dir: &Path, name: &str) -> Master {
        Master::start_env(dir, name, &store_env(slapd), &[])
    }

    pub fn start_env(dir: &Path, name: &str, env: &[(String, String)], extra: &[&str]) -> Master {
        let log = dir.with_extension("log");
        let (child, banner, port) = start_serve(
            serve_cmd(dir)
                .args(["--server-name", name, "--server-name", "localhost"])
                .args(extra)
                .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
            &log,
        );
        Master { child: Some(child), port, dir: dir.to_path_buf(), log, banner }
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn client(&self) -> Client {
        let bundle = std::fs::read(self.dir.join("ca/ca_bundle.pem")).unwrap();
        Client::new(tls_config(&bundle, None).unwrap(), self.addr(), "localhost").unwrap()
    }

    /// A client with the master's administrator certificate (made by its first run).
    pub fn admin(&self) -> Client {
        let bundle = std::fs::read(self.dir.join("ca/ca_bundle.pem")).unwrap();
        let (cert, key) = (
            std::fs::read(self.dir.join("admin/admin_crt.pem")).unwrap(),
            std::fs::read(self.dir.join("admin/admin_key.pem")).unwrap(),
        );
        Client::new(tls_config(&bundle, Some((&cert, &key))).unwrap(), self.addr(), "localhost").unwrap()
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().map(|c| c.id() as i32).unwrap()
    }

    pub fn kill(mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Master {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on our own child's PID.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            if ended_within(&mut c, Duration::from_secs(5)).is_some() {
                return;
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// PUT the CSR, then GET the certificate: (PUT status, PUT text, the certificate PEM if any).
pub fn enroll(m: &Master, name: &str, csr: &[u8]) -> (u16, String, Option<Vec<u8>>) {
    let mut c = m.client();
    let put = c.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), Some("text/plain"), csr).unwrap();
    let get = c.request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap();
    (put.status, put.text(), (get.status == 200).then_some(get.body))
}
