//! Private OpenLDAP servers for the tests. [`Slapd::start`] runs one slapd from a scratch
//! directory, on a free loopback port and an ldapi socket in that directory;
//! [`Slapd::start_pair`] runs two providers that replicate each other (multi-provider
//! syncrepl). Each one is stopped by its PID when its [`Slapd`] is dropped (SIGTERM, then
//! SIGKILL), and a slapd whose test process dies without dropping it is killed by the kernel
//! (parent-death signal). The system's slapd (port 389, /var/run/slapd) is never touched.
//!
//! Needs `slapd` and `ldap-utils` (`apt-get install -y slapd ldap-utils`; scripts/test installs
//! them as root): missing, the test panics, never skips. slapd is run as `/usr/sbin/slapd`, which
//! is not on a non-root user's PATH. As a user other than root it works the same (a port above
//! 1023, files in the temporary directory); on a system whose AppArmor profile confines
//! `/usr/sbin/slapd` to /etc/ldap and /var/lib/ldap (Ubuntu's), put the profile in complain mode
//! (`aa-complain /usr/sbin/slapd`): slapd then may read its configuration here.
//!
//! Every instance: `dc=vouch,dc=test` (dcObject + organization, added at the first start) in an
//! mdb database, root DN `cn=admin,dc=vouch,dc=test` with a random password in a file of mode
//! 0600, core and cosine schemas plus the caller's, `index objectClass eq` plus the caller's.
//! Anonymous clients read the root DSE and the subschema, nothing else. Over ldapi://, SASL
//! EXTERNAL as the user running the tests is the root DN.

use std::fs;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

/// The slapd binary (Debian's `slapd` package), by absolute path.
pub const SLAPD: &str = "/usr/sbin/slapd";
/// Every instance's suffix (naming context).
pub const SUFFIX: &str = "dc=vouch,dc=test";
/// Every instance's root DN ([`Slapd::bind_dn`]); its password is in [`Slapd::password_file`].
pub const ROOT_DN: &str = "cn=admin,dc=vouch,dc=test";
const INSTALL: &str = "apt-get install -y slapd ldap-utils";
/// From the start of slapd until a search must have answered.
const START_LIMIT: Duration = Duration::from_secs(10);
/// From SIGTERM until SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// Any one run of an ldap tool.
const TOOL_LIMIT: Duration = Duration::from_secs(30);
/// New ports tried when another process took the free one before slapd bound it.
const PORT_ATTEMPTS: usize = 5;
const POLL: Duration = Duration::from_millis(10);

/// What an instance has beyond the common configuration.
#[derive(Clone, Debug, Default)]
pub struct SlapdOpts {
    /// Schema text (`attributetype` and `objectclass` definitions), written to `extra.schema` in the
    /// instance's directory and included after core.schema and cosine.schema.
    pub schema: Option<String>,
    /// More index lines, without the keyword: `"vouchCertname eq"` becomes `index vouchCertname eq`.
    pub indexes: Vec<String>,
    /// More lines for the database section (`"sizelimit unlimited"`, `"limits ..."`), before its overlays.
    pub database: Vec<String>,
    /// `dbnosync`: commits are not flushed to disk. For benchmarks only (a SIGKILL may lose writes).
    pub dbnosync: bool,
    /// Also listen on `ldaps://127.0.0.1:PORT/` with this certificate and key (PEM files):
    /// [`Slapd::ldaps_url`].
    pub tls: Option<(PathBuf, PathBuf)>,
}

/// What an ldap tool printed and its exit code (-1 when a signal ended it).
#[derive(Clone, Debug)]
pub struct LdapOutput {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl LdapOutput {
    pub fn success(&self) -> bool {
        self.code == 0
    }

    /// Asserts exit code 0; returns stdout.
    pub fn ok(&self) -> &str {
        assert!(self.success(), "ldap tool failed: {self}");
        &self.stdout
    }
}

impl std::fmt::Display for LdapOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}\nstdout: {}\nstderr: {}", self.code, self.stdout.trim_end(), self.stderr.trim_end())
    }
}

/// One private slapd. Every method takes `&self`: share it between threads (`std::thread::scope`,
/// `Arc`) to restart it while other threads use it.
pub struct Slapd {
    dir: tempfile::TempDir,
    port: u16,
    /// The ldaps:// port, with [`SlapdOpts::tls`].
    tls_port: Option<u16>,
    name: String,
    child: Mutex<Option<Child>>,
}

impl Slapd {
    /// A running slapd with `dc=vouch,dc=test` in it. Panics, with slapd's log, if it does not
    /// answer a search within 10 s.
    pub fn start(opts: &SlapdOpts) -> Slapd {
        require_tools();
        let password = random_password();
        let mut taken = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let s = Slapd::prepare(opts, &password, "slapd", free_ports::<1>()[0], None);
            match s.launch() {
                Ok(()) => {
                    s.add_base();
                    return s;
                }
                Err(log) => taken = log,
            }
        }
        panic!(
            "slapd: every free port was taken before slapd could bind it ({PORT_ATTEMPTS} tries); last log:\n{taken}"
        )
    }

    /// Two providers replicating each other (serverID 1 and 2, syncprov, syncrepl
    /// refreshAndPersist to the other, `multiprovider on`), sharing one root password; the suffix
    /// entry is added on the first and has reached the second. Each can be stopped, killed and
    /// restarted on its own.
    pub fn start_pair(opts: &SlapdOpts) -> (Slapd, Slapd) {
        require_tools();
        let password = random_password();
        let mut taken = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let [p1, p2] = free_ports::<2>();
            let one = Slapd::prepare(opts, &password, "slapd 1", p1, Some((1, p2)));
            let two = Slapd::prepare(opts, &password, "slapd 2", p2, Some((2, p1)));
            if let Err(log) = one.launch().and_then(|()| two.launch()) {
                taken = log;
                continue;
            }
            one.add_base();
            if let Err(e) = two.wait_for_dn(SUFFIX, START_LIMIT) {
                panic!("{SUFFIX} added on slapd 1 did not reach slapd 2: {e}\nslapd 1's log:\n{}", one.log());
            }
            return (one, two);
        }
        panic!("slapd pair: every free port was taken before slapd could bind it ({PORT_ATTEMPTS} tries); last log:\n{taken}")
    }

    /// The loopback port of `ldap://` (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `ldap://127.0.0.1:PORT/BASE` (BASE percent-encoded where a URL needs it; "" for none).
    pub fn url(&self, base: &str) -> String {
        format!("ldap://127.0.0.1:{}/{}", self.port, percent_encode(base, b",="))
    }

    /// `ldaps://127.0.0.1:PORT/BASE` (an instance started with [`SlapdOpts::tls`]).
    pub fn ldaps_url(&self, base: &str) -> String {
        let port = self.tls_port.unwrap_or_else(|| panic!("{}: started without SlapdOpts::tls", self.name));
        format!("ldaps://127.0.0.1:{port}/{}", percent_encode(base, b",="))
    }

    /// `ldapi://ENCODED-SOCKET-PATH/BASE`.
    pub fn ldapi_url(&self, base: &str) -> String {
        format!("ldapi://{}/{}", percent_encode(&self.socket().to_string_lossy(), b""), percent_encode(base, b",="))
    }

    /// The ldapi socket's path.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("ldapi")
    }

    pub fn bind_dn(&self) -> &'static str {
        ROOT_DN
    }

    /// The root DN's password, alone in a file of mode 0600 (no newline).
    pub fn password_file(&self) -> PathBuf {
        self.dir.path().join("password")
    }

    /// The instance's directory: slapd.conf, slapd.log, slapd.pid, the database in db/.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Everything slapd wrote to stdout and stderr, every start included.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&fs::read(self.dir.path().join("slapd.log")).unwrap_or_default()).into_owned()
    }

    /// The running slapd's PID (`None` once stopped or killed).
    pub fn pid(&self) -> Option<u32> {
        self.lock().as_ref().map(Child::id)
    }

    /// Whether slapd still runs (false if it exited by itself, as after a crash).
    pub fn is_running(&self) -> bool {
        self.lock().as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGTERM, then SIGKILL after 10 s; returns how it ended (`None` if it was not running).
    pub fn stop(&self) -> Option<ExitStatus> {
        let child = self.lock().take()?;
        Some(terminate(child, &self.name))
    }

    /// SIGKILL; returns how it ended (`None` if it was not running).
    pub fn kill(&self) -> Option<ExitStatus> {
        let mut child = self.lock().take()?;
        let _ = child.kill();
        child.wait().ok()
    }

    /// Stops slapd if it runs, then starts it again on the same port, configuration and
    /// database; returns once it answers. Panics if the port stays taken for 5 s.
    pub fn restart(&self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.launch() {
                Ok(()) => return,
                Err(log) if Instant::now() >= deadline => {
                    panic!("{}: port {} stayed taken by another process; log:\n{log}", self.name, self.port)
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// Runs `tool` (ldapsearch, ldapadd, ldapmodify, ldapdelete, ldapcompare...) bound as the root
    /// DN over `ldap://` with `args` after the connection options and `stdin` as its input.
    pub fn ldap_tool(&self, tool: &str, args: &[&str], stdin: Option<&str>) -> LdapOutput {
        let (url, password) = (self.url(""), self.password_file());
        let mut all = vec!["-x", "-H", &url, "-D", ROOT_DN, "-y", path_str(&password), "-o", "nettimeout=5"];
        all.extend_from_slice(args);
        run_tool(tool, &all, stdin, TOOL_LIMIT)
    }

    /// `ldapsearch -LLL` (unwrapped LDIF) of the subtree at `base`; no `attrs` means all user attributes.
    pub fn ldapsearch(&self, base: &str, filter: &str, attrs: &[&str]) -> LdapOutput {
        let mut args = vec!["-LLL", "-o", "ldif-wrap=no", "-b", base, filter];
        args.extend_from_slice(attrs);
        self.ldap_tool("ldapsearch", &args, None)
    }

    /// `ldapadd` of `ldif`.
    pub fn ldapadd(&self, ldif: &str) -> LdapOutput {
        self.ldap_tool("ldapadd", &[], Some(ldif))
    }

    /// `ldapmodify` of `ldif` (changetype records).
    pub fn ldapmodify(&self, ldif: &str) -> LdapOutput {
        self.ldap_tool("ldapmodify", &[], Some(ldif))
    }

    /// Whether the entry `dn` exists. Panics on any answer but found / "No such object" (32).
    pub fn has_dn(&self, dn: &str) -> bool {
        let out = self.ldap_tool("ldapsearch", &["-LLL", "-b", dn, "-s", "base", "(objectClass=*)", "1.1"], None);
        match out.code {
            0 => true,
            32 => false,
            _ => panic!("{}: search of {dn}: {out}", self.name),
        }
    }

    /// Waits until the entry `dn` can be read here (the server may be down or restarting
    /// meanwhile); returns how long that took, or the last answer once `within` has passed.
    pub fn wait_for_dn(&self, dn: &str, within: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        loop {
            let out = self.ldap_tool("ldapsearch", &["-LLL", "-b", dn, "-s", "base", "(objectClass=*)", "1.1"], None);
            if out.success() {
                return Ok(start.elapsed());
            }
            if start.elapsed() >= within {
                return Err(format!("{dn} not readable on {} after {within:?}; last answer: {out}", self.name));
            }
            std::thread::sleep(POLL);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Child>> {
        // A panic while the lock was held (a failed start) leaves the state as it was.
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The directory and configuration of a slapd that does not run yet. `repl`: (this
    /// server's ID, the other provider's port).
    fn prepare(opts: &SlapdOpts, password: &str, name: &str, port: u16, repl: Option<(u8, u16)>) -> Slapd {
        let dir = tempfile::Builder::new().prefix("vouch-slapd.").tempdir().expect("tempdir");
        let tls_port = opts.tls.as_ref().map(|_| free_ports::<1>()[0]);
        let s = Slapd { dir, port, tls_port, name: name.to_string(), child: Mutex::new(None) };
        let d = s.dir.path();
        // sun_path holds 108 bytes: a long TMPDIR would make the ldapi socket unusable.
        assert!(s.socket().as_os_str().len() < 100, "{}: socket path too long; set a shorter TMPDIR", d.display());
        fs::create_dir(d.join("db")).expect("mkdir db");
        write_private(&s.password_file(), password);
        let q = |p: &str| format!("\"{}\"", d.join(p).display());
        let mut conf = vec![
            "# A private slapd for vouch's tests (tests/common/slapd.rs): started and stopped by PID.".to_string(),
            "include /etc/ldap/schema/core.schema".into(),
            "include /etc/ldap/schema/cosine.schema".into(),
        ];
        if let Some(schema) = &opts.schema {
            write_private(&d.join("extra.schema"), schema);
            conf.push(format!("include {}", q("extra.schema")));
        }
        conf.extend([format!("pidfile {}", q("slapd.pid")), format!("argsfile {}", q("slapd.args"))]);
        conf.extend(["modulepath /usr/lib/ldap".into(), "moduleload back_mdb".into()]);
        if let Some((id, _)) = repl {
            conf.extend(["moduleload syncprov".into(), format!("serverID {id}")]);
        }
        if let Some((cert, key)) = &opts.tls {
            conf.push(format!("TLSCertificateFile \"{}\"", cert.display()));
            conf.push(format!("TLSCertificateKeyFile \"{}\"", key.display()));
        }
        let (uid, gid) = (rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw());
        conf.extend([
            "# ldapi:// with SASL EXTERNAL as the user running the tests is the root DN.".into(),
            format!(
                "authz-regexp \"gidNumber={gid}\\\\+uidNumber={uid},cn=peercred,cn=external,cn=auth\" \"{ROOT_DN}\""
            ),
            "access to dn.base=\"\" by * read".into(),
            "access to dn.base=\"cn=Subschema\" by * read".into(),
            "access to * by * none".into(),
            "database mdb".into(),
            format!("suffix \"{SUFFIX}\""),
            format!("rootdn \"{ROOT_DN}\""),
            format!("rootpw {password}"),
            format!("directory {}", q("db")),
            "maxsize 1073741824".into(),
            "index objectClass eq".into(),
        ]);
        if repl.is_some() {
            conf.push("index entryCSN,entryUUID eq".into());
        }
        conf.extend(opts.indexes.iter().map(|i| format!("index {i}")));
        if opts.dbnosync {
            conf.push("dbnosync".into());
        }
        conf.extend(opts.database.iter().cloned());
        if let Some((id, peer)) = repl {
            conf.extend([
                format!(
                    "syncrepl rid={:03} provider=ldap://127.0.0.1:{peer}/ bindmethod=simple binddn=\"{ROOT_DN}\" \
                     credentials={password} searchbase=\"{SUFFIX}\" type=refreshAndPersist retry=\"1 +\" timeout=3",
                    3 - id
                ),
                "multiprovider on".into(),
                "overlay syncprov".into(),
                "syncprov-checkpoint 100 10".into(),
            ]);
        }
        write_private(&d.join("slapd.conf"), &(conf.join("\n") + "\n"));
        s
    }

    /// Starts slapd and waits until a search answers on both URLs. `Err(its log)` if the port
    /// was taken; any other failure panics with slapd's log.
    fn launch(&self) -> Result<(), String> {
        let mut state = self.lock();
        assert!(state.is_none(), "{}: already running", self.name);
        let d = self.dir.path();
        let log_path = d.join("slapd.log");
        let mut log = fs::OpenOptions::new().create(true).append(true).open(&log_path).expect("slapd.log");
        let from = log.seek(std::io::SeekFrom::End(0)).expect("seek slapd.log");
        let log_since = || {
            let mut f = fs::File::open(&log_path).expect("slapd.log");
            let _ = f.seek(std::io::SeekFrom::Start(from));
            let mut text = String::new();
            let _ = f.read_to_string(&mut text);
            text
        };
        let mut cmd = Command::new(SLAPD);
        // -d none: stay in the foreground (a child this process reaps), log only what matters.
        let mut listen = format!("{} {}", self.url(""), self.ldapi_url(""));
        if let Some(p) = self.tls_port {
            listen.push_str(&format!(" ldaps://127.0.0.1:{p}/"));
        }
        cmd.args(["-d", "none", "-h", &listen]).arg("-f").arg(d.join("slapd.conf"));
        cmd.stdin(Stdio::null()).stdout(log.try_clone().expect("log fd")).stderr(log);
        let child = spawn_tied(cmd).unwrap_or_else(|e| panic!("{SLAPD}: {e}: {INSTALL}"));
        let pid = child.id();
        // Held from here: a panic below leaves it to Drop to stop.
        *state = Some(child);
        let deadline = Instant::now() + START_LIMIT;
        let root_dse = |url: &str| {
            let args = ["-x", "-H", url, "-o", "nettimeout=1", "-LLL", "-b", "", "-s", "base", "namingContexts"];
            run_tool("ldapsearch", &args, None, Duration::from_secs(2))
        };
        loop {
            if let Some(status) = state.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                *state = None;
                let text = log_since();
                if text.contains("Address already in use") {
                    return Err(text);
                }
                panic!(
                    "{} ({SLAPD} pid {pid}) exited ({status}) before answering a search; its log:\n{text}",
                    self.name
                );
            }
            let probe = root_dse(&self.url(""));
            if probe.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{} (pid {pid}) did not answer a search on {} within {START_LIMIT:?}; last try: {probe}\nits log:\n{}",
                self.name,
                self.url(""),
                log_since()
            );
            std::thread::sleep(POLL);
        }
        // slapd may answer before it has written its pid file (seen once on a loaded machine).
        let written = Instant::now() + Duration::from_secs(5);
        let mut recorded = fs::read_to_string(d.join("slapd.pid")).unwrap_or_default();
        while recorded.trim().is_empty() && Instant::now() < written {
            std::thread::sleep(POLL);
            recorded = fs::read_to_string(d.join("slapd.pid")).unwrap_or_default();
        }
        assert_eq!(recorded.trim(), pid.to_string(), "{}: slapd.pid does not name the slapd started", self.name);
        let probe = root_dse(&self.ldapi_url(""));
        assert!(
            probe.success(),
            "{} answers on ldap:// but not on {}: {probe}\nits log:\n{}",
            self.name,
            self.ldapi_url(""),
            log_since()
        );
        Ok(())
    }

    fn add_base(&self) {
        let ldif = format!("dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: vouch\no: vouch\n");
        let out = self.ldapadd(&ldif);
        assert!(out.success(), "{}: adding {SUFFIX}: {out}\nits log:\n{}", self.name, self.log());
    }
}

impl Drop for Slapd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs an ldap tool with `args` as given (no connection options added; LDAPNOINIT set, so no
/// ldap.conf or .ldaprc of the machine applies). Panics, killing it, after `limit`.
pub fn run_tool(tool: &str, args: &[&str], stdin: Option<&str>, limit: Duration) -> LdapOutput {
    let mut cmd = Command::new(tool);
    cmd.args(args).env("LDAPNOINIT", "1");
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{tool}: {e}: install it as root: {INSTALL}"));
    let pid = child.id();
    let input = stdin.map(str::to_owned);
    let pipe = child.stdin.take();
    let (tx, rx) = mpsc::channel();
    // Written from a thread of its own while the output is read: a tool that answers each
    // entry (ldapadd's "adding new entry") fills its stdout pipe long before a large input ends.
    let writer = std::thread::spawn(move || {
        if let (Some(mut pipe), Some(input)) = (pipe, input) {
            // The tool may exit without reading all of it (an error first): that is its answer.
            let _ = pipe.write_all(input.as_bytes());
        }
    });
    std::thread::spawn(move || {
        let out = child.wait_with_output();
        let _ = writer.join();
        let _ = tx.send(out);
    });
    let out = match rx.recv_timeout(limit) {
        Ok(out) => out,
        Err(_) => {
            signal(pid, Signal::KILL);
            let _ = rx.recv();
            panic!("{tool} {args:?} still running after {limit:?}: killed");
        }
    };
    let out = out.unwrap_or_else(|e| panic!("{tool}: {e}"));
    LdapOutput {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `s` with every byte other than ASCII letters, digits, `-._~` and `keep` as `%XX`.
pub fn percent_encode(s: &str, keep: &[u8]) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || keep.contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn require_tools() {
    let on_path = |tool: &str| {
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
    };
    let mut missing: Vec<&str> = ["ldapsearch", "ldapadd", "ldapmodify"].into_iter().filter(|t| !on_path(t)).collect();
    if !Path::new(SLAPD).is_file() {
        missing.push(SLAPD);
    }
    assert!(
        missing.is_empty(),
        "these tests run a private OpenLDAP server; missing: {}.\n  Install them as root: {INSTALL}\n  (scripts/test does so when run as root)",
        missing.join(", ")
    );
}

/// `N` distinct loopback ports that were free a moment ago (all held at once while chosen).
pub fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<std::net::TcpListener> =
        (0..N).map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0")).collect();
    std::array::from_fn(|i| held[i].local_addr().expect("local_addr").port())
}

pub fn random_password() -> String {
    let mut bytes = [0u8; 24];
    fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).expect("/dev/urandom");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn write_private(path: &Path, text: &str) {
    let mut f = fs::OpenOptions::new().create_new(true).write(true).mode(0o600).open(path).expect("create");
    f.write_all(text.as_bytes()).expect("write");
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

fn signal(pid: u32, sig: Signal) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

/// SIGTERM, then SIGKILL after [`STOP_GRACE`]; reaps it.
pub fn terminate(mut child: Child, name: &str) -> ExitStatus {
    if let Ok(Some(status)) = child.try_wait() {
        return status;
    }
    signal(child.id(), Signal::TERM);
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        std::thread::sleep(POLL);
    }
    eprintln!("{name} (pid {}) ignored SIGTERM for {STOP_GRACE:?}: SIGKILL", child.id());
    let _ = child.kill();
    child.wait().expect("wait for slapd")
}

/// Spawns `cmd` from one thread that lives as long as the test process, with SIGKILL as its
/// parent-death signal: a slapd outlives neither the process (if it dies without dropping the
/// [`Slapd`]) nor, because that thread never exits, dies early with the test thread that started it.
pub fn spawn_tied(mut cmd: Command) -> std::io::Result<Child> {
    type Request = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: OnceLock<mpsc::Sender<Request>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("slapd-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawn the slapd spawner thread");
        tx
    });
    // SAFETY: between fork and exec the closure makes one system call (prctl), which is
    // async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(|| Ok(rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?));
    }
    let (tx, rx) = mpsc::channel();
    spawner.send((cmd, tx)).expect("the slapd spawner thread is gone");
    rx.recv().expect("the slapd spawner thread is gone")
}
