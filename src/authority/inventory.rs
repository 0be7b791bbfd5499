//! `vouch reconcile --inventory SOURCE`: the names the fleet's real inventory holds.
//!
//! - `file:PATH`: one certname a line; `#` starts a comment; blank lines are skipped.
//! - `cmd:PROGRAM ARGS…`: the program's standard output, one name a line (split on
//!   whitespace, no shell); a non-zero exit (or death by a signal) aborts the run.
//! - `ldap:URL` with an RFC 4516 URL `ldap://HOST:PORT/BASE?ATTRIBUTE?SCOPE?FILTER`: the
//!   values of ATTRIBUTE of every entry the search finds (paged, 1,000 a page).
//!
//! Names are trimmed and lowercased (Puppet lowercases certnames), a trailing dot dropped
//! (a fully qualified DNS name's root). Each is handed to a
//! callback as it arrives: nothing keeps the whole inventory.

use crate::error::Error;
use crate::files::input::{read_line_bounded, Line};
use crate::store::ldap::{Pool, Server};
use crate::store::StoreUrl;
use std::io::Read;

/// A parsed `--inventory` SOURCE.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    File(std::path::PathBuf),
    Cmd { program: String, args: Vec<String> },
    Ldap(LdapSearch),
}

/// An RFC 4516 LDAP URL's search: where, which attribute, how deep, which entries.
#[derive(Debug, Clone, PartialEq)]
pub struct LdapSearch {
    /// `ldap://host:port/BASE` (without the `?` parts), as `--store` takes it.
    pub url: String,
    pub base: String,
    pub attribute: String,
    pub scope: ldap3::Scope,
    pub filter: String,
}

fn bad(source: &str, detail: impl std::fmt::Display) -> Error {
    Error::InventorySource { source: source.to_string(), detail: detail.to_string() }
}

fn decode(source: &str, part: &str) -> Result<String, Error> {
    crate::encoding::percent_decode(part).ok_or_else(|| bad(source, format!("{part:?} has an invalid percent escape")))
}

impl Source {
    /// Parses `file:PATH`, `cmd:PROGRAM ARGS…` or `ldap:URL` (an `ldap://`, `ldaps://` or
    /// `ldapi://` URL is taken as `ldap:URL` too).
    pub fn parse(s: &str) -> Result<Source, Error> {
        if let Some(p) = s.strip_prefix("file:") {
            if p.is_empty() {
                return Err(bad(s, "no path after file:"));
            }
            return Ok(Source::File(p.into()));
        }
        if let Some(c) = s.strip_prefix("cmd:") {
            let mut words = c.split_whitespace().map(str::to_string);
            let program = words.next().ok_or_else(|| bad(s, "no program after cmd:"))?;
            return Ok(Source::Cmd { program, args: words.collect() });
        }
        let url = if s.starts_with("ldap://") || s.starts_with("ldaps://") || s.starts_with("ldapi://") {
            s
        } else if let Some(u) = s.strip_prefix("ldap:") {
            u
        } else {
            return Err(bad(s, "not file:PATH, cmd:PROGRAM ARGS… or ldap:URL"));
        };
        Ok(Source::Ldap(parse_rfc4516(s, url)?))
    }
}

/// `ldap://host:port/BASE?ATTRIBUTE?SCOPE?FILTER?EXTENSIONS` (RFC 4516): exactly one
/// attribute; scope `base` (the default), `one` or `sub`; filter `(objectClass=*)` by
/// default; a critical extension (`!name`) is refused, others are ignored.
pub fn parse_rfc4516(source: &str, url: &str) -> Result<LdapSearch, Error> {
    let mut parts = url.splitn(5, '?');
    let head = parts.next().unwrap_or_default();
    let attrs = decode(source, parts.next().unwrap_or_default())?;
    let scope = decode(source, parts.next().unwrap_or_default())?;
    let filter = decode(source, parts.next().unwrap_or_default())?;
    let exts = parts.next().unwrap_or_default();
    let u = crate::store::parse_ldap_url(head).map_err(|e| bad(source, e))?;
    let attrs: Vec<&str> = attrs.split(',').map(str::trim).filter(|a| !a.is_empty()).collect();
    let attribute = match attrs.as_slice() {
        [a] if a.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b';') => a.to_string(),
        [] => {
            return Err(bad(
                source,
                "no attribute: ldap://HOST/BASE?ATTRIBUTE?SCOPE?FILTER names the one whose values are certnames",
            ))
        }
        _ => return Err(bad(source, "name exactly one attribute (its values are the certnames)")),
    };
    let scope = match scope.to_ascii_lowercase().as_str() {
        "" | "base" => ldap3::Scope::Base,
        "one" => ldap3::Scope::OneLevel,
        "sub" => ldap3::Scope::Subtree,
        other => return Err(bad(source, format!("scope {other:?} is not base, one or sub"))),
    };
    let filter = if filter.trim().is_empty() { "(objectClass=*)".to_string() } else { filter };
    for ext in exts.split(',').filter(|e| !e.is_empty()) {
        if ext.starts_with('!') {
            return Err(bad(source, format!("critical extension {ext:?} is not supported")));
        }
    }
    Ok(LdapSearch { url: head.to_string(), base: u.base, attribute, scope, filter })
}

/// The longest line an inventory may have (a certname is at most 255 bytes; comments and
/// spaces around it fit): a longer one is an error naming its line number.
pub const MAX_NAME_LINE: usize = 4096;

/// Line `number` as text, or why it is no inventory line.
fn line_text(line: Line, number: u64) -> Result<String, String> {
    match line {
        Line::Text(b) => String::from_utf8(b).map_err(|_| format!("line {number} is not UTF-8 text: not a certname")),
        Line::TooLong => Err(format!("line {number} is longer than {MAX_NAME_LINE} bytes: not a certname")),
    }
}

/// One name as the inventory gives it: trimmed, lowercased, without the DNS root's trailing
/// dot (`web01.example.com.` is `web01.example.com`: no certname ends in a dot, so the dotted
/// form would make every node an orphan); `None` for nothing.
fn name_of(line: &str) -> Option<String> {
    let t = line.trim();
    let t = t.strip_suffix('.').unwrap_or(t);
    (!t.is_empty()).then(|| t.to_ascii_lowercase())
}

/// Reads every name of `source`, handing each to `f`. `store_url`: the `--ldap-*` options
/// (bind DN, password file, CA) an `ldap:` source binds with.
/// A `cmd:` program still running after `timeout` is killed (with every process of its
/// group: a background child holding its output too) and the read fails.
pub fn read(
    source: &Source,
    store_url: &StoreUrl,
    timeout: std::time::Duration,
    f: &mut (dyn FnMut(String) + Send),
) -> Result<(), Error> {
    match source {
        Source::File(path) => {
            let file =
                std::fs::File::open(path).map_err(|e| Error::Io { path: path.clone(), op: "read", source: e })?;
            let mut r = std::io::BufReader::new(file);
            let mut number = 0u64;
            while let Some(line) = read_line_bounded(&mut r, MAX_NAME_LINE).map_err(|e| Error::Io {
                path: path.clone(),
                op: "read",
                source: e,
            })? {
                number = number.saturating_add(1);
                let line = line_text(line, number).map_err(|d| bad(&format!("file:{}", path.display()), d))?;
                let content = line.split('#').next().unwrap_or_default();
                if let Some(n) = name_of(content) {
                    f(n);
                }
            }
            Ok(())
        }
        Source::Cmd { program, args } => read_cmd(program, args, timeout, f),
        Source::Ldap(search) => {
            let u = crate::store::parse_ldap_url(&search.url).map_err(|e| bad(&search.url, e))?;
            let server: Server = store_url.ldap_server(&u)?;
            let pool = Pool::new(server).map_err(Error::from)?;
            paged_values(&pool, search, f).map_err(Error::from)
        }
    }
}

/// The values of `attr` in a search answer's entry, read without panicking (ldap3's
/// `SearchEntry::construct` panics on a DN that is not UTF-8); a referral (a search
/// continuation reference: entries on another server) and a value that is not UTF-8 are
/// refused, never skipped: the inventory would be incomplete.
fn entry_values(e: &ldap3::ResultEntry, attr: &str) -> Result<Vec<String>, String> {
    use ldap3::asn1::PL;
    if e.is_ref() {
        let urls: Vec<String> = match &e.0.payload {
            PL::C(refs) => refs
                .iter()
                .filter_map(|t| match &t.payload {
                    PL::P(b) => Some(String::from_utf8_lossy(b).chars().take(256).collect()),
                    PL::C(_) => None,
                })
                .collect(),
            PL::P(_) => Vec::new(),
        };
        return Err(format!(
            "the server answered with a referral to {} (entries held by another server): the inventory would \
             be incomplete; search that server directly",
            if urls.is_empty() { "another server".to_string() } else { urls.join(", ") }
        ));
    }
    if e.is_intermediate() {
        return Ok(Vec::new());
    }
    let malformed = || "the server sent a malformed search entry".to_string();
    let PL::C(parts) = &e.0.payload else { return Err(malformed()) };
    if e.0.id != 4 {
        return Err(malformed());
    }
    let (Some(PL::P(dn)), Some(PL::C(attrs))) = (parts.first().map(|t| &t.payload), parts.get(1).map(|t| &t.payload))
    else {
        return Err(malformed());
    };
    let dn: String = String::from_utf8_lossy(dn).chars().take(256).collect();
    let mut out = Vec::new();
    for a in attrs {
        let PL::C(pa) = &a.payload else { return Err(malformed()) };
        let (Some(PL::P(name)), Some(PL::C(vals))) = (pa.first().map(|t| &t.payload), pa.get(1).map(|t| &t.payload))
        else {
            return Err(malformed());
        };
        if !name.eq_ignore_ascii_case(attr.as_bytes()) {
            continue;
        }
        for v in vals {
            let PL::P(b) = &v.payload else { return Err(malformed()) };
            let text = String::from_utf8(b.clone())
                .map_err(|_| format!("entry {dn:?}: a value of {attr} is not UTF-8 text (no certname is)"))?;
            out.push(text);
        }
    }
    Ok(out)
}

/// How much of a `cmd:` program's stderr is kept for the error message (all of it is read:
/// a program writing more never blocks or dies of a closed pipe).
const STDERR_KEPT: usize = 4096;

/// The child, shared with the watchdog: it is reaped (try_wait) under the lock, and the
/// watchdog kills its group only while it is not (never a reused process id).
struct Shared {
    child: std::process::Child,
    status: Option<std::process::ExitStatus>,
    timed_out: bool,
}

type SharedChild = std::sync::Arc<std::sync::Mutex<Shared>>;

/// Kills the child's process group `pid` (and the child), unless it was reaped.
fn kill_group(g: &mut Shared, pid: u32) {
    if g.status.is_none() {
        if let Some(p) = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap_or(0)) {
            let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
        }
        let _ = g.child.kill();
    }
}

/// `cmd:PROGRAM ARGS…`: its stdout's names; in a process group of its own, killed with the
/// group after `timeout`; its stderr drained on a thread (the last [`STDERR_KEPT`] bytes kept).
fn read_cmd(
    program: &str,
    args: &[String],
    timeout: std::time::Duration,
    f: &mut (dyn FnMut(String) + Send),
) -> Result<(), Error> {
    use std::sync::{Arc, Mutex};
    let shown = std::iter::once(program).chain(args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ");
    let child = spawn_cmd(program, args, &shown)?;
    let pid = child.id();
    let shared = Arc::new(Mutex::new(Shared { child, status: None, timed_out: false }));
    let (out, err) = {
        let mut g = shared.lock().unwrap_or_else(|e| e.into_inner());
        (g.child.stdout.take(), g.child.stderr.take())
    };
    let (cancel, watchdog) = start_watchdog(&shared, pid, timeout);
    let errs = drain_stderr(err);
    let failed = out.and_then(|out| read_cmd_names(out, f));
    if failed.is_some() {
        let mut g = shared.lock().unwrap_or_else(|e| e.into_inner());
        kill_group(&mut g, pid);
    }
    let status = reap(&shared);
    let _ = cancel.send(());
    let _ = watchdog.join();
    // A background child of its group may still hold stderr: the group is killed if it timed out.
    let timed_out = shared.lock().unwrap_or_else(|e| e.into_inner()).timed_out;
    if timed_out {
        return Err(Error::InventoryTimeout { command: shown, after: crate::policy::format_duration(timeout) });
    }
    let status = status
        .map_err(|e| Error::InventoryCommand { command: shown.clone(), detail: format!("cannot wait for it: {e}") })?;
    // Output that is no inventory first: vouch killed the program for it.
    if let Some(d) = failed {
        return Err(Error::InventoryCommand { command: shown, detail: d });
    }
    let stderr = errs.join().unwrap_or_default();
    if !status.success() {
        let how = match status.code() {
            Some(c) => format!("it exited with status {c}"),
            None => "it was killed by a signal".to_string(),
        };
        let said = if stderr.is_empty() { String::new() } else { format!("; it said: {stderr}") };
        return Err(Error::InventoryCommand { command: shown, detail: format!("{how}{said}") });
    }
    Ok(())
}

/// Starts the program (`shown`: its command line, for messages) in a process group of its
/// own, stdin empty, stdout and stderr piped.
fn spawn_cmd(program: &str, args: &[String], shown: &str) -> Result<std::process::Child, Error> {
    use std::os::unix::process::CommandExt;
    std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| Error::InventoryCommand { command: shown.to_string(), detail: format!("cannot run it: {e}") })
}

/// The watchdog: kills the group `pid` after `timeout` (marking it timed out) unless it was
/// reaped, or cancelled first (by sending on the channel returned).
fn start_watchdog(
    shared: &SharedChild,
    pid: u32,
    timeout: std::time::Duration,
) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (cancel, cancelled) = std::sync::mpsc::channel::<()>();
    let watchdog = {
        let shared = std::sync::Arc::clone(shared);
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = cancelled.recv_timeout(timeout) {
                let mut g = shared.lock().unwrap_or_else(|e| e.into_inner());
                if g.status.is_none() {
                    g.timed_out = true;
                    kill_group(&mut g, pid);
                }
            }
        })
    };
    (cancel, watchdog)
}

/// Its stderr read to the end on a thread of its own, the last [`STDERR_KEPT`] bytes kept.
fn drain_stderr(err: Option<std::process::ChildStderr>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut kept: Vec<u8> = Vec::new();
        if let Some(mut e) = err {
            let mut buf = [0u8; 8192];
            loop {
                match e.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        kept.extend_from_slice(buf.get(..n).unwrap_or_default());
                        if kept.len() > STDERR_KEPT {
                            kept.drain(..kept.len().saturating_sub(STDERR_KEPT));
                        }
                    }
                }
            }
        }
        String::from_utf8_lossy(&kept).trim().to_string()
    })
}

/// The names of the program's output, each handed to `f`; why the output is no inventory,
/// if it is not (the reading stops there).
fn read_cmd_names(out: std::process::ChildStdout, f: &mut (dyn FnMut(String) + Send)) -> Option<String> {
    let mut r = std::io::BufReader::new(out);
    let mut number = 0u64;
    loop {
        match read_line_bounded(&mut r, MAX_NAME_LINE) {
            Ok(None) => break,
            Ok(Some(l)) => {
                number = number.saturating_add(1);
                match line_text(l, number) {
                    Ok(l) => {
                        if let Some(n) = name_of(&l) {
                            f(n);
                        }
                    }
                    Err(d) => {
                        // Its output is no inventory: stop it (it may never end).
                        return Some(d);
                    }
                }
            }
            Err(e) => {
                return Some(format!("reading its output: {e}"));
            }
        }
    }
    None
}

/// Reaped under the lock (polling): the watchdog may still kill it meanwhile.
fn reap(shared: &SharedChild) -> std::io::Result<std::process::ExitStatus> {
    loop {
        {
            let mut g = shared.lock().unwrap_or_else(|e| e.into_inner());
            match g.child.try_wait() {
                Ok(Some(st)) => {
                    g.status = Some(st);
                    break Ok(st);
                }
                Ok(None) => {}
                Err(e) => break Err(e),
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The values of `search.attribute` of every entry `search` finds, handed to `f` page by
/// page (1,000 entries a page) over one connection (a paged-results cookie is valid on its
/// own connection only). A connection that fails before the first name is handed is
/// replaced once; one that fails later fails the read (never a name handed twice).
fn paged_values(
    pool: &Pool,
    search: &LdapSearch,
    f: &mut (dyn FnMut(String) + Send),
) -> Result<(), crate::store::StoreError> {
    use crate::store::StoreError;
    let attr = search.attribute.clone();
    let mut handed = false;
    pool.run(|c| {
        let mut cookie: Vec<u8> = Vec::new();
        let mut cookies: std::collections::HashSet<Vec<u8>> = std::collections::HashSet::new();
        loop {
            let page = ldap3::controls::PagedResults { size: 1000, cookie: cookie.clone() };
            let res =
                match c.with_controls(page).search(&search.base, search.scope, &search.filter, vec![attr.as_str()]) {
                    Ok(r) => r,
                    Err(e) if !handed => return Err(e),
                    Err(e) => {
                        return Ok(Err(StoreError::Unavailable {
                            detail: format!("LDAP search of {:?} broke off after some entries: {e}", search.base),
                        }))
                    }
                };
            let (entries, result) = (res.0, res.1);
            if result.rc != 0 {
                return Ok(Err(StoreError::Ldap {
                    op: "search",
                    dn: search.base.clone(),
                    detail: format!("result {}: {}", result.rc, result.text),
                }));
            }
            for e in entries {
                let values = match entry_values(&e, &attr) {
                    Ok(v) => v,
                    Err(detail) => return Ok(Err(StoreError::Ldap { op: "search", dn: search.base.clone(), detail })),
                };
                for v in values {
                    if let Some(n) = name_of(&v) {
                        handed = true;
                        f(n);
                    }
                }
            }
            let next = result.ctrls.iter().find_map(|c| match c {
                ldap3::controls::Control(Some(ldap3::controls::ControlType::PagedResults), raw) => {
                    Some(raw.parse::<ldap3::controls::PagedResults>())
                }
                _ => None,
            });
            match next {
                Some(p) if !p.cookie.is_empty() => {
                    // A server that hands a cookie again would page forever.
                    if !cookies.insert(p.cookie.clone()) {
                        return Ok(Err(StoreError::Ldap {
                            op: "search",
                            dn: search.base.clone(),
                            detail: "the server repeated a paged-results cookie (it would page forever): the \
                                     inventory cannot be read completely"
                                .into(),
                        }));
                    }
                    cookie = p.cookie
                }
                _ => return Ok(Ok(())),
            }
        }
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(dn: &[u8], attr: &str, values: &[&[u8]]) -> ldap3::ResultEntry {
        use ldap3::asn1::{StructureTag, TagClass, PL};
        let p = |b: &[u8]| StructureTag { class: TagClass::Universal, id: 4, payload: PL::P(b.to_vec()) };
        let c = |id: u64, v: Vec<StructureTag>| StructureTag { class: TagClass::Universal, id, payload: PL::C(v) };
        let vals = c(17, values.iter().map(|v| p(v)).collect());
        let attrs = c(16, vec![c(16, vec![p(attr.as_bytes()), vals])]);
        ldap3::ResultEntry::new(StructureTag {
            class: TagClass::Application,
            id: 4,
            payload: PL::C(vec![p(dn), attrs]),
        })
    }

    /// Security review, issue 18 #7: a DN that is not UTF-8 does not panic; a value that is
    /// not UTF-8 and a referral are refused (never skipped).
    #[test]
    fn ldap_entries_are_read_without_panics_and_refused_when_incomplete() {
        assert_eq!(entry_values(&entry(b"cn=a,dc=x", "cn", &[b"a.example.test"]), "CN").unwrap(), ["a.example.test"]);
        assert_eq!(entry_values(&entry(b"cn=\xff\xfe", "cn", &[b"b.example.test"]), "cn").unwrap(), ["b.example.test"]);
        assert!(entry_values(&entry(b"cn=a", "other", &[b"\xff"]), "cn").unwrap().is_empty());
        let e = entry_values(&entry(b"cn=c", "cn", &[b"ok.example.test", b"\xffbad"]), "cn").unwrap_err();
        assert!(e.contains("not UTF-8"), "{e}");
        use ldap3::asn1::{StructureTag, TagClass, PL};
        let referral = ldap3::ResultEntry::new(StructureTag {
            class: TagClass::Application,
            id: 19,
            payload: PL::C(vec![StructureTag {
                class: TagClass::Universal,
                id: 4,
                payload: PL::P(b"ldap://other.example.test/dc=x".to_vec()),
            }]),
        });
        let e = entry_values(&referral, "cn").unwrap_err();
        assert!(e.contains("referral") && e.contains("ldap://other.example.test/dc=x"), "{e}");
        let junk =
            ldap3::ResultEntry::new(StructureTag { class: TagClass::Application, id: 4, payload: PL::P(vec![1]) });
        assert!(entry_values(&junk, "cn").is_err());
    }

    #[test]
    fn sources_parse_and_bad_ones_are_refused() {
        assert_eq!(Source::parse("file:/tmp/x").unwrap(), Source::File("/tmp/x".into()));
        assert_eq!(
            Source::parse("cmd:aws ec2 list").unwrap(),
            Source::Cmd { program: "aws".into(), args: vec!["ec2".into(), "list".into()] }
        );
        let Source::Ldap(l) =
            Source::parse("ldap:ldap://127.0.0.1:389/ou=hosts,dc=example,dc=test?cn?sub?(objectClass=device)").unwrap()
        else {
            panic!("not ldap")
        };
        assert_eq!(l.base, "ou=hosts,dc=example,dc=test");
        assert_eq!(l.attribute, "cn");
        assert_eq!(l.scope, ldap3::Scope::Subtree);
        assert_eq!(l.filter, "(objectClass=device)");
        let Source::Ldap(l) = Source::parse("ldap://h:1/dc=x?cn?one?%28cn%3Dweb%2A%29").unwrap() else { panic!() };
        assert_eq!((l.scope, l.filter.as_str()), (ldap3::Scope::OneLevel, "(cn=web*)"));
        let Source::Ldap(l) = Source::parse("ldap:ldap://h:1/dc=x?cn").unwrap() else { panic!() };
        assert_eq!((l.scope, l.filter.as_str()), (ldap3::Scope::Base, "(objectClass=*)"));
        for bad in [
            "file:",
            "cmd:",
            "http://x",
            "ldap:ldap://h/dc=x",
            "ldap:ldap://h/dc=x?cn,uid?sub",
            "ldap:ldap://h/dc=x?cn?deep",
            "ldap:ldap://h/dc=x?cn?sub??!bindname=x",
        ] {
            assert!(Source::parse(bad).is_err(), "{bad}");
        }
    }
}
