//! Processes a test starts (a Puppet Server, agents, `vouch serve`): stopped by PID, whatever
//! happens to the test, and commands run with a deadline; and waits with a deadline, for a
//! condition or for a process to end.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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

/// A wait with a deadline for a condition ([`Wait::until`]): how long at most, how often to
/// look (200 ms unless told), and what to show beside the failure (a server's log).
pub struct Wait<'a> {
    limit: Duration,
    every: Duration,
    show: Option<Box<dyn Fn() -> String + 'a>>,
}

impl<'a> Wait<'a> {
    /// A wait of `limit` at most, looking every 200 ms.
    pub fn up_to(limit: Duration) -> Wait<'a> {
        Wait { limit, every: Duration::from_millis(200), show: None }
    }

    /// Looks every `every` in place of 200 ms.
    pub fn every(self, every: Duration) -> Wait<'a> {
        Wait { every, ..self }
    }

    /// On failure, the message ends with what `show` returns then (a log, the state seen).
    pub fn showing(self, show: impl Fn() -> String + 'a) -> Wait<'a> {
        Wait { show: Some(Box::new(show)), ..self }
    }

    /// Waits until `done` holds: the time that took. Past the limit it panics, saying what
    /// it waited for (`what`) and what [`Wait::showing`] gives.
    pub fn until(self, what: &str, mut done: impl FnMut() -> bool) -> Duration {
        let t = Instant::now();
        while !done() {
            if t.elapsed() >= self.limit {
                let shown = self.show.as_ref().map(|f| format!("\n{}", f())).unwrap_or_default();
                panic!("still not so after {:?}: {what}{shown}", self.limit);
            }
            std::thread::sleep(self.every);
        }
        t.elapsed()
    }
}

/// Waits until `f` holds (checked every 200 ms), at most `limit`; panics with `what` after.
pub fn wait_until(limit: Duration, what: &str, f: impl FnMut() -> bool) -> Duration {
    Wait::up_to(limit).until(what, f)
}

/// `child`'s status if it ends within `limit` (looked at every 50 ms); None if it is still
/// running then (left running: the caller decides).
pub fn ended_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let t = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if t.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for `child` to end, `limit` at most: its status. Past the limit it kills it and
/// panics, saying that `what` did not end.
pub fn wait_within(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    ended_within(child, limit).unwrap_or_else(|| {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{what} did not end within {limit:?}");
    })
}

/// Runs `cmd`, its stdout and stderr piped: its output, or, if it is still running after
/// `limit`, Err(what it wrote until it was killed) for the caller's failure message.
pub fn output_within(cmd: &mut Command, limit: Duration) -> Result<Output, Output> {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    match ended_within(&mut child, limit) {
        Some(_) => Ok(child.wait_with_output().unwrap()),
        None => {
            let _ = child.kill();
            Err(child.wait_with_output().unwrap())
        }
    }
}

/// Kills a process the test started (SIGKILL, by its PID) if the test still runs after a
/// limit, so that a hung `vouch serve` fails the test instead of blocking it. Dropped, it
/// stands down.
pub struct Watchdog {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Watches `pid` (`what`, for the message said when it is killed) for `limit`.
    pub fn kill_after(pid: i32, what: &'static str, limit: Duration) -> Watchdog {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            while !flag.load(Ordering::SeqCst) {
                if start.elapsed() > limit {
                    eprintln!("{what} (pid {pid}): the test still runs after {limit:?}: SIGKILL");
                    // SAFETY: kill(2) on the PID of a process this test started.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Watchdog { done, thread: Some(thread) }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether `/proc/locks` shows process `pid` waiting (a `->` line) for a `flock` on the inode `ino`.
pub fn waits_for_flock(pid: u32, ino: u64) -> bool {
    std::fs::read_to_string("/proc/locks").unwrap().lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.get(1) == Some(&"->")
            && f.get(2) == Some(&"FLOCK")
            && f.get(5) == Some(&pid.to_string().as_str())
            && f.get(6).and_then(|id| id.rsplit(':').next()) == Some(ino.to_string().as_str())
    })
}

/// A child's stderr read on a thread of its own: each line as it comes
/// ([`StderrLines::wait_for`]), and all of them once it has ended ([`StderrLines::all`]).
pub struct StderrLines {
    seen: std::sync::mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<Vec<String>>,
}

impl StderrLines {
    /// Takes `child`'s stderr (piped) and reads it.
    pub fn follow(child: &mut Child) -> StderrLines {
        use std::io::BufRead;
        let stderr = child.stderr.take().expect("the child's stderr piped");
        let (lines, seen) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            for line in std::io::BufReader::new(stderr).lines() {
                let line = line.unwrap();
                let _ = lines.send(line.clone());
                all.push(line);
            }
            all
        });
        StderrLines { seen, reader }
    }

    /// The next line that contains `needle`, waiting `limit` at most for each line. If none
    /// comes (the limit passed, or stderr closed), kills `child` and panics, saying what it
    /// waited for (`what`).
    pub fn wait_for(&self, child: &mut Child, needle: &str, limit: Duration, what: &str) -> String {
        loop {
            match self.seen.recv_timeout(limit) {
                Ok(l) if l.contains(needle) => return l,
                Ok(_) => continue,
                Err(e) => {
                    let _ = child.kill();
                    panic!("{what}: no line with {needle:?} on its stderr ({e})");
                }
            }
        }
    }

    /// Every line, once stderr has closed.
    pub fn all(self) -> Vec<String> {
        self.reader.join().unwrap()
    }
}

/// Starts the Puppet Server in `server` (its `start.sh`, a 512 MB heap, its output in
/// `log/stdout.log`) and waits until `log/puppetserver.log` says it has started, 300 s at
/// most; the guard stops it whatever happens to the test. Panics, with the logs, if it exits
/// first or does not start in time.
pub fn start_puppetserver(server: &Path) -> Guard {
    let stdout = std::fs::File::create(server.join("log/stdout.log")).unwrap();
    let start = Instant::now();
    let child = Command::new(server.join("start.sh"))
        .env("HEAP", "512m")
        .stdin(Stdio::null())
        .stdout(stdout.try_clone().unwrap())
        .stderr(stdout)
        .spawn()
        .unwrap();
    let mut guard = Guard { child, what: "puppetserver (java)", grace: Duration::from_secs(30) };
    let log = || read(&server.join("log/puppetserver.log"));
    while !log().contains("Puppet Server has successfully started") {
        if let Some(st) = guard.child.try_wait().unwrap() {
            panic!("Puppet Server exited ({st}) before it was ready:\n{}", read(&server.join("log/stdout.log")));
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "Puppet Server did not start in 300 s:\n{}\nits stdout:\n{}",
            log(),
            read(&server.join("log/stdout.log"))
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!("Puppet Server (pid {}) ready after {:.1} s", guard.pid(), start.elapsed().as_secs_f64());
    guard
}
