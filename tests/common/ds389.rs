//! A private 389 Directory Server for the tests ([`Ds389::shared`]): one instance per test
//! binary, created by `dscreate from-file` (about 15 s) in a directory of its own, run in the
//! foreground as this process's child (killed by the kernel when the test process dies:
//! parent-death signal), on free loopback ports. Each test has its own base DN under the
//! instance's suffix ([`Ds389::store`]), so that tests share the instance and not their data.
//!
//! Nothing outside that directory is touched: lib389 takes its paths from the `defaults.inf`
//! under `$PREFIX/share/dirsrv/inf`, so a copy there whose paths all lead into the
//! directory (and `with_systemd = 0`: no systemctl) makes the instance private. The shared
//! instance is stopped and its directory removed when the test process exits; a directory a
//! killed test process left behind is removed by the next one.
//!
//! The instance is set up as docs/ldap.md tells an operator: vouch's schema, indexes and
//! reindex from `vouch ldap schema --format 389ds` applied as the Directory Manager; vouch
//! binds as a DN of its own (`cn=vouch,dc=vouch,dc=test`) with the ACI and the search
//! limits the docs give, never as the Directory Manager.
//!
//! Needs `389-ds-base` and `ldap-utils` (`apt-get install -y 389-ds-base ldap-utils`;
//! scripts/test installs them as root): missing, the test panics, never skips.

use super::ldap_lab::Directory;
use super::slapd::{free_ports, path_str, random_password, run_tool, spawn_tied, terminate, write_private, LdapOutput};
use super::{ok, s, vouch};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

const INSTALL: &str = "apt-get install -y 389-ds-base ldap-utils";
const NS_SLAPD: &str = "/usr/sbin/ns-slapd";
const DEFAULTS: &str = "/usr/share/dirsrv/inf/defaults.inf";
/// The instance's suffix; every test's base DN is an `ou=` under it.
pub const SUFFIX: &str = "dc=vouch,dc=test";
/// The DN vouch binds as (created with the ACI and limits of docs/ldap.md).
pub const VOUCH_DN: &str = "cn=vouch,dc=vouch,dc=test";
const MANAGER: &str = "cn=Directory Manager";
const TOOL_LIMIT: Duration = Duration::from_secs(30);

/// The instance: its directory, port, passwords and process.
pub struct Ds389 {
    dir: PathBuf,
    name: String,
    port: u16,
    child: Mutex<Option<Child>>,
}

/// One test's store on an instance: its own base DN.
pub struct Ds389Store<'a> {
    pub ds: &'a Ds389,
    pub base: String,
}

impl Ds389 {
    /// The test binary's instance, created at the first call.
    pub fn shared() -> &'static Ds389 {
        static ONE: OnceLock<Ds389> = OnceLock::new();
        /// At the test process's exit: the shared instance stopped, its directory removed.
        extern "C" fn remove_shared() {
            if let Some(ds) = ONE.get() {
                ds.stop();
                let _ = fs::remove_dir_all(&ds.dir);
            }
        }
        ONE.get_or_init(|| {
            let ds = Ds389::create("shared");
            ds.set_up();
            // SAFETY: registers a plain function, called once at exit.
            unsafe { libc::atexit(remove_shared) };
            ds
        })
    }

    /// A base DN of its own for the test `name` on the shared instance (created: `ou=NAME`
    /// under the suffix, by `vouch ldap init --create-base`, which also creates the containers).
    pub fn store(name: &str) -> Ds389Store<'static> {
        Ds389::shared().store_here(name)
    }

    /// Two instances made at once for replication: the first set up as [`Ds389::shared`] is,
    /// the second with vouch's schema and the same bind DN's password (the entry itself
    /// replicates from the first).
    fn replicated_pair(first: &str, second: &str) -> (Ds389, Ds389) {
        let (one, two) = std::thread::scope(|sc| {
            let a = sc.spawn(|| Ds389::create(first));
            let b = sc.spawn(|| Ds389::create(second));
            (a.join().unwrap(), b.join().unwrap())
        });
        fs::copy(one.password_file(), two.password_file()).expect("copy the password");
        one.set_up();
        two.apply_schema();
        (one, two)
    }

    /// A supplier and a consumer that replicates it (`dsconf replication`: the consumer's
    /// replication manager, both replicas, one agreement, the consumer initialised). The
    /// supplier is set up as [`Ds389::shared`] is; the consumer has vouch's schema, and
    /// receives the bind DN, its ACI and everything else by replication. Each instance is
    /// stopped and removed when dropped.
    pub fn pair() -> (Ds389, Ds389) {
        let (supplier, consumer) = Ds389::replicated_pair("supplier", "consumer");
        let repl_pw = random_password();
        let consumer_url = consumer.url("");
        let supplier_url = supplier.url("");
        let consumer_port = consumer.port.to_string();
        let steps: [(&str, Vec<&str>); 4] = [
            (
                &consumer_url,
                vec!["replication", "create-manager", "--name", "replication manager", "--passwd", &repl_pw],
            ),
            (
                &consumer_url,
                vec![
                    "replication",
                    "enable",
                    "--suffix",
                    SUFFIX,
                    "--role",
                    "consumer",
                    "--bind-dn",
                    "cn=replication manager,cn=config",
                ],
            ),
            (
                &supplier_url,
                vec!["replication", "enable", "--suffix", SUFFIX, "--role", "supplier", "--replica-id", "1"],
            ),
            (
                &supplier_url,
                vec![
                    "repl-agmt",
                    "create",
                    "--suffix",
                    SUFFIX,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    &consumer_port,
                    "--conn-protocol",
                    "LDAP",
                    "--bind-dn",
                    "cn=replication manager,cn=config",
                    "--bind-passwd",
                    &repl_pw,
                    "--bind-method",
                    "SIMPLE",
                    "--init",
                    "to-consumer",
                ],
            ),
        ];
        for (url, args) in steps {
            let ds = if *url == supplier_url { &supplier } else { &consumer };
            ds.dsconf(url, &args);
        }
        // The initialisation has reached the consumer once the bind DN shows there.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !consumer.manager("ldapsearch", &["-LLL", "-b", VOUCH_DN, "-s", "base", "1.1"], None).success() {
            assert!(Instant::now() < deadline, "the consumer was not initialised within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        (supplier, consumer)
    }

    /// Two suppliers replicating each other (multi-supplier: `dsconf replication enable
    /// --role supplier`, replica ids 1 and 2, an agreement each way, the second initialised
    /// from the first). The first is set up as [`Ds389::shared`] is; the second has vouch's
    /// schema and receives the bind DN, its ACI and everything else by replication. Each
    /// instance is stopped and removed when dropped.
    pub fn suppliers() -> (Ds389, Ds389) {
        let (one, two) = Ds389::replicated_pair("supplier1", "supplier2");
        let repl_pw = random_password();
        for (ds, id) in [(&one, "1"), (&two, "2")] {
            let url = ds.url("");
            ds.dsconf(&url, &["replication", "create-manager", "--name", "replication manager", "--passwd", &repl_pw]);
            ds.dsconf(
                &url,
                &[
                    "replication",
                    "enable",
                    "--suffix",
                    SUFFIX,
                    "--role",
                    "supplier",
                    "--replica-id",
                    id,
                    "--bind-dn",
                    "cn=replication manager,cn=config",
                ],
            );
        }
        // Two's agreement first, so that once one initialises two, two's changes flow back.
        two.agreement_to(&one, &repl_pw, false);
        one.agreement_to(&two, &repl_pw, true);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !two.manager("ldapsearch", &["-LLL", "-b", VOUCH_DN, "-s", "base", "1.1"], None).success() {
            assert!(Instant::now() < deadline, "the second supplier was not initialised within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        (one, two)
    }

    /// A replication agreement from this instance to `to` (bound as `to`'s replication
    /// manager); `init`: `to` initialised from this one.
    fn agreement_to(&self, to: &Ds389, repl_pw: &str, init: bool) {
        let port = to.port.to_string();
        let mut args = vec![
            "repl-agmt",
            "create",
            "--suffix",
            SUFFIX,
            "--host",
            "127.0.0.1",
            "--port",
            &port,
            "--conn-protocol",
            "LDAP",
            "--bind-dn",
            "cn=replication manager,cn=config",
            "--bind-passwd",
            repl_pw,
            "--bind-method",
            "SIMPLE",
        ];
        if init {
            args.push("--init");
        }
        args.push(if init { "to-two" } else { "to-one" });
        self.dsconf(&self.url(""), &args);
    }

    /// `dsconf` as the Directory Manager against `url`; panics if it fails.
    pub fn dsconf(&self, url: &str, args: &[&str]) {
        let pw = fs::read_to_string(self.dir.join("manager-password")).expect("password");
        let out = Command::new("dsconf")
            .args(["-D", MANAGER, "-w", &pw, url])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("dsconf: {e}: {INSTALL}"));
        assert!(
            out.status.success(),
            "dsconf {args:?}: {}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.errors_log()
        );
    }

    /// An instance of the calling test's own, set up as [`Ds389::shared`] is: for a test that
    /// stops or restarts the server (the shared one serves the binary's other tests
    /// meanwhile). Stopped and removed when dropped.
    pub fn private(tag: &str) -> Ds389 {
        let ds = Ds389::create(tag);
        ds.set_up();
        ds
    }

    /// Stops the instance if it runs, then starts it again on the same port and database;
    /// returns once it answers.
    pub fn restart(&self) {
        self.stop();
        self.launch();
    }

    /// A base DN of its own for the test `name` on this instance (see [`Ds389::store`]).
    pub fn store_here(&self, name: &str) -> Ds389Store<'_> {
        let ds = self;
        let store = Ds389Store { ds, base: format!("ou={name},{SUFFIX}") };
        let out = vouch()
            .envs(super::ldap_lab::store_env(&store))
            .args(["--dir", s(&ds.dir.join("no-ca")), "ldap", "init", "--create-base"])
            .output()
            .unwrap();
        ok(&out);
        store
    }

    fn create(tag: &str) -> Ds389 {
        require_tools();
        let tmp = std::env::temp_dir();
        remove_stale(&tmp);
        let dir = tmp.join(format!("vouch-389ds.{}.{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("share/dirsrv/inf")).expect("mkdir");
        write_private(&dir.join("share/dirsrv/inf/defaults.inf"), &private_defaults(&dir));
        let name = format!("v{}{}", std::process::id(), tag.replace(|c: char| !c.is_ascii_alphanumeric(), ""));
        let [port, tls_port] = free_ports::<2>();
        let password = random_password();
        write_private(&dir.join("manager-password"), &password);
        write_private(&dir.join("vouch-password"), &random_password());
        let inf = format!(
            "[general]\nfull_machine_name = localhost\nstrict_host_checking = False\nstart = False\n\
             selinux = False\n[slapd]\ninstance_name = {name}\nport = {port}\nsecure_port = {tls_port}\n\
             root_dn = {MANAGER}\nroot_password = {password}\nself_sign_cert = False\nuser = root\n\
             group = root\n[backend-userroot]\nsample_entries = no\nsuffix = {SUFFIX}\n\
             create_suffix_entry = True\n"
        );
        write_private(&dir.join("instance.inf"), &inf);
        let started = Instant::now();
        let out = Command::new("dscreate")
            .args(["from-file", path_str(&dir.join("instance.inf"))])
            .env("PREFIX", &dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("dscreate: {e}: {INSTALL}"));
        assert!(
            out.status.success(),
            "dscreate from-file failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("389 Directory Server instance {name} created in {:?}", started.elapsed());
        let ds = Ds389 { dir, name, port, child: Mutex::new(None) };
        ds.launch();
        ds
    }

    /// Starts ns-slapd in the foreground (`-d 0`) and waits until a search answers.
    fn launch(&self) {
        let mut state = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let config = self.dir.join(format!("etc/dirsrv/slapd-{}", self.name));
        let pid = self.dir.join(format!("run/dirsrv/slapd-{}.pid", self.name));
        let log = fs::File::create(self.dir.join("ns-slapd.out")).expect("log");
        let mut cmd = Command::new(NS_SLAPD);
        cmd.args(["-D", path_str(&config), "-i", path_str(&pid), "-d", "0"]);
        cmd.stdin(Stdio::null()).stdout(log.try_clone().expect("log fd")).stderr(log);
        *state = Some(spawn_tied(cmd).unwrap_or_else(|e| panic!("{NS_SLAPD}: {e}: {INSTALL}")));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let probe = run_tool(
                "ldapsearch",
                &["-x", "-H", &self.url(""), "-o", "nettimeout=1", "-LLL", "-b", "", "-s", "base", "vendorVersion"],
                None,
                Duration::from_secs(5),
            );
            if probe.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "389 DS did not answer within 60 s: {probe}\nerrors log:\n{}",
                self.errors_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// vouch's schema, indexes and reindex (`vouch ldap schema --format 389ds`); the bind DN
    /// of vouch with its password, search limits and ACI (docs/ldap.md).
    fn set_up(&self) {
        self.apply_schema();
        let password = fs::read_to_string(self.password_file()).expect("password");
        let ldif = format!(
            "dn: {VOUCH_DN}\nchangetype: add\nobjectClass: top\nobjectClass: applicationProcess\n\
             objectClass: simpleSecurityObject\ncn: vouch\nuserPassword: {password}\n\
             nsSizeLimit: -1\nnsLookThroughLimit: -1\nnsPagedSizeLimit: -1\nnsPagedLookThroughLimit: -1\n\n\
             dn: {SUFFIX}\nchangetype: modify\nadd: aci\naci: {}\n",
            aci(VOUCH_DN)
        );
        let out = self.manager("ldapmodify", &[], Some(&ldif));
        assert!(out.success(), "the bind DN, its limits and ACI: {out}\n{}", self.errors_log());
    }

    /// `vouch ldap schema --format 389ds` applied, its reindex task waited for.
    fn apply_schema(&self) {
        let schema = ok(&vouch().args(["ldap", "schema", "--format", "389ds"]).output().unwrap());
        let out = self.manager("ldapmodify", &[], Some(&schema));
        assert!(out.success(), "applying vouch ldap schema --format 389ds: {out}\n{}", self.errors_log());
        self.wait_for_task(&schema);
    }

    /// Waits until the reindex task the LDIF `schema` adds (its one `cn=tasks` entry) ends
    /// with exit code 0; returns its DN.
    pub fn wait_for_task(&self, schema: &str) -> String {
        let task_dn = schema
            .lines()
            .filter_map(|l| l.strip_prefix("dn: "))
            .find(|dn| dn.ends_with(",cn=index,cn=tasks,cn=config"))
            .unwrap_or_else(|| panic!("no reindex task in the schema:\n{schema}"))
            .to_string();
        // The backend is read-only while the reindex task runs (result 53 to any write).
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let task = self.manager("ldapsearch", &["-LLL", "-b", &task_dn, "-s", "base", "nsTaskExitCode"], None);
            if task.stdout.contains("nsTaskExitCode: 0") {
                break;
            }
            assert!(!task.stdout.contains("nsTaskExitCode:"), "the reindex task failed: {task}\n{}", self.errors_log());
            assert!(Instant::now() < deadline, "the reindex task did not end within 60 s: {task}");
            std::thread::sleep(Duration::from_millis(100));
        }
        task_dn
    }

    /// An ldap tool bound as the Directory Manager.
    pub fn manager(&self, tool: &str, args: &[&str], stdin: Option<&str>) -> LdapOutput {
        let url = self.url("");
        let pw = self.dir.join("manager-password");
        let mut all = vec!["-x", "-H", &url, "-D", MANAGER, "-y", path_str(&pw), "-o", "nettimeout=5"];
        all.extend_from_slice(args);
        run_tool(tool, &all, stdin, TOOL_LIMIT)
    }

    /// `ldap://127.0.0.1:PORT/BASE`.
    pub fn url(&self, base: &str) -> String {
        format!("ldap://127.0.0.1:{}/{base}", self.port)
    }

    /// vouch's bind password, alone in a file of mode 0600.
    pub fn password_file(&self) -> PathBuf {
        self.dir.join("vouch-password")
    }

    /// The instance's errors log.
    pub fn errors_log(&self) -> String {
        let log = self.dir.join(format!("var/log/dirsrv/slapd-{}/errors", self.name));
        let text = fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// Stops the instance (SIGTERM, then SIGKILL after 10 s); [`Ds389::restart`] starts it again.
    pub fn stop(&self) {
        if let Some(child) = self.child.lock().unwrap_or_else(|e| e.into_inner()).take() {
            terminate(child, "ns-slapd");
        }
    }
}

impl Drop for Ds389 {
    /// A pair's instance: stopped, its directory removed (the shared one is never dropped:
    /// it dies with the test process, and the next one removes its directory).
    fn drop(&mut self) {
        self.stop();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl Directory for Ds389Store<'_> {
    fn url(&self, base: &str) -> String {
        self.ds.url(base)
    }
    fn port(&self) -> u16 {
        self.ds.port
    }
    fn base(&self) -> String {
        self.base.clone()
    }
    fn bind_dn(&self) -> String {
        VOUCH_DN.into()
    }
    fn password_file(&self) -> PathBuf {
        self.ds.password_file()
    }
    fn ldapsearch(&self, base: &str, filter: &str, attrs: &[&str]) -> LdapOutput {
        let mut args = vec!["-LLL", "-o", "ldif-wrap=no", "-b", base, filter];
        args.extend_from_slice(attrs);
        self.ds.manager("ldapsearch", &args, None)
    }
    fn ldapmodify(&self, ldif: &str) -> LdapOutput {
        self.ds.manager("ldapmodify", &[], Some(ldif))
    }
    fn server(&self) -> &'static str {
        "389ds"
    }
    fn ldap_tool(&self, tool: &str, args: &[&str], stdin: Option<&str>) -> LdapOutput {
        self.ds.manager(tool, args, stdin)
    }
    fn stop(&self) {
        self.ds.stop();
    }
    fn restart(&self) {
        self.ds.restart();
    }
}

/// The ACI docs/ldap.md gives vouch's bind DN `dn` on the suffix.
pub fn aci(dn: &str) -> String {
    format!(
        "(targetattr=\"*\")(version 3.0; acl \"vouch masters\"; allow (read, search, compare, add, delete, write) \
         userdn=\"ldap:///{dn}\";)"
    )
}

/// lib389's defaults with every path leading into `dir`, and no systemd.
fn private_defaults(dir: &Path) -> String {
    let text = fs::read_to_string(DEFAULTS).unwrap_or_else(|e| panic!("{DEFAULTS}: {e}: {INSTALL}"));
    let d = dir.display();
    let mut out = String::new();
    for line in text.lines() {
        let line = match line.split_once(" = ") {
            Some(("with_systemd", _)) => "with_systemd = 0".to_string(),
            Some((k, v))
                if k != "sysconf_dir" && ["/etc", "/var", "/run", "/dev/shm"].iter().any(|p| v.starts_with(p)) =>
            {
                format!("{k} = {d}{v}")
            }
            Some(("inst_dir", v)) => format!("inst_dir = {d}{v}"),
            _ => line.to_string(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Removes the directories of instances whose test process is gone (its ns-slapd died with it).
fn remove_stale(tmp: &Path) {
    let Ok(entries) = fs::read_dir(tmp) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid =
            name.strip_prefix("vouch-389ds.").and_then(|p| p.split('.').next()).and_then(|p| p.parse::<u32>().ok());
        let Some(pid) = pid else { continue };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

fn require_tools() {
    let on_path = |tool: &str| {
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
    };
    let mut missing: Vec<&str> = ["ldapsearch", "ldapmodify", "dscreate"].into_iter().filter(|t| !on_path(t)).collect();
    for f in [NS_SLAPD, DEFAULTS] {
        if !Path::new(f).is_file() {
            missing.push(f);
        }
    }
    assert!(
        missing.is_empty(),
        "these tests run a private 389 Directory Server; missing: {}.\n  Install them as root: {INSTALL}\n  \
         (scripts/test does so when run as root)",
        missing.join(", ")
    );
}
