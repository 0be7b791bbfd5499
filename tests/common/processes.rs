//! Processes a test starts (a Puppet Server, agents, `vouch serve`): stopped by PID, whatever
//! happens to the test, and commands run with a deadline.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A process the test started: SIGTERM, then SIGKILL after `grace`, on drop, by its PID.
pub struct Guard {
    pub child: Child,
    pub what: &'static str,
    pub grace: Duration,
}

impl Guard {
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SAFETY: kill(2) on the PID of a child this guard owns and has not reaped.
        unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        let deadline = Instant::now() + self.grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("{} (pid {}) ignored SIGTERM for {:?}: SIGKILL", self.what, self.pid(), self.grace);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A file's text (lossy), or empty if it cannot be read.
pub fn read(p: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned()
}

/// A free loopback port (not 8140: another server may run there).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Runs a command with a deadline (its output in `dir/tag.out`); the guard stops it if the
/// deadline passes or the test panics. Returns (exit code, stdout+stderr), without the
/// complaint Facter makes in a container about /proc/1/environ.
pub fn run_guarded(mut cmd: Command, dir: &Path, tag: &str, limit: Duration) -> (i32, String) {
    let out = dir.join(format!("{tag}.out"));
    let f = std::fs::File::create(&out).unwrap();
    cmd.stdin(Stdio::null()).stdout(f.try_clone().unwrap()).stderr(f);
    let mut g = Guard { child: cmd.spawn().unwrap(), what: "puppet", grace: Duration::from_secs(5) };
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = g.child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "{tag}: still running after {limit:?}; output so far:\n{}", read(&out));
        std::thread::sleep(Duration::from_millis(50));
    };
    let text: String =
        read(&out).lines().filter(|l| !l.contains("/proc/1/environ")).map(|l| format!("{l}\n")).collect();
    (status.code().unwrap_or(-1), text)
}

/// This machine's host name and an IPv4 address of it (a compile server's alt name, which
/// agents on this machine reach without touching /etc/hosts). It must resolve to an address
/// of this machine (Puppet Server listens there).
pub fn host_name_and_address() -> (String, std::net::IpAddr) {
    use std::net::ToSocketAddrs;
    let name = read(Path::new("/proc/sys/kernel/hostname")).trim().to_ascii_lowercase();
    let addr = (name.as_str(), 0u16)
        .to_socket_addrs()
        .unwrap_or_else(|e| panic!("this test needs the host name {name:?} to resolve (/etc/hosts): {e}"))
        .map(|a| a.ip())
        .find(|ip| ip.is_ipv4())
        .unwrap_or_else(|| panic!("the host name {name:?} has no IPv4 address"));
    std::net::TcpListener::bind((addr, 0))
        .unwrap_or_else(|e| panic!("the host name {name:?} resolves to {addr}, not an address of this machine: {e}"));
    (name, addr)
}
