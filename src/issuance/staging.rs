//! The staging directories `ca init` and `vouch import` fill beside `DIR/ca` before renaming
//! them into place (`.ca.tmp-PID-TIME-N`, 0700, holding copies of the CA's private keys): a
//! run killed before that rename leaves one, hidden from a plain `ls`. Each is found here; one
//! surely dead run's (named as vouch names them, a directory of this user, its process gone) is
//! removed by the next `ca init` or import; `vouch store verify` names any.

use std::path::{Path, PathBuf};

/// The prefix of a staging directory's name (`durable::temp_beside` of `DIR/ca`).
const PREFIX: &str = ".ca.tmp-";

/// A staging directory found in a data directory, and whether it may be removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staging {
    pub path: PathBuf,
    pub state: StagingState,
}

/// What a staging directory is: a dead run's of this user (removable), or one to leave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StagingState {
    /// Named by a process that no longer runs, a directory this user owns: a killed run's.
    Dead { pid: u32 },
    /// Its process still runs: a `ca init` or import under way (or the number reused).
    Running { pid: u32 },
    /// Not named as vouch names them, not a directory, or another user's: left alone.
    Foreign { why: String },
}

impl std::fmt::Display for StagingState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StagingState::Dead { pid } => write!(f, "left by process {pid}, which no longer runs"),
            StagingState::Running { pid } => write!(f, "of process {pid}, which still runs"),
            StagingState::Foreign { why } => write!(f, "{why}"),
        }
    }
}

/// The process id a staging directory's name carries (`.ca.tmp-PID-HEXTIME-N`), if it is
/// named exactly as vouch names them.
fn pid_of(name: &str) -> Option<u32> {
    let mut parts = name.strip_prefix(PREFIX)?.split('-');
    let (pid, time, n) = (parts.next()?, parts.next()?, parts.next()?);
    let digits = |s: &str, hex: bool| {
        !s.is_empty() && s.bytes().all(|b| if hex { b.is_ascii_hexdigit() } else { b.is_ascii_digit() })
    };
    if parts.next().is_some() || !digits(pid, false) || !digits(time, true) || !digits(n, false) {
        return None;
    }
    pid.parse().ok()
}

/// Whether process `pid` runs (or cannot be told: a process of another user counts as running).
fn runs(pid: u32) -> bool {
    let Some(p) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else { return false };
    match rustix::process::test_kill_process(p) {
        Ok(()) => true,
        Err(e) => e != rustix::io::Errno::SRCH,
    }
}

/// The staging directories in `dir` (none when it cannot be read), sorted by name.
pub fn find(dir: &Path) -> Vec<Staging> {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return vec![] };
    let me = crate::files::trust::euid();
    let mut found: Vec<Staging> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(PREFIX).then(|| (e.path(), name))
        })
        .map(|(path, name)| {
            let meta = std::fs::symlink_metadata(&path);
            let state = match (pid_of(&name), meta) {
                (_, Err(e)) => StagingState::Foreign { why: format!("it cannot be examined: {e}") },
                (None, _) => StagingState::Foreign { why: "not named as vouch names them".into() },
                (Some(_), Ok(m)) if !m.file_type().is_dir() => {
                    StagingState::Foreign { why: "not a directory (a link or a file)".into() }
                }
                (Some(_), Ok(m)) if m.uid() != me => StagingState::Foreign {
                    why: format!("owned by {}, not by the user running vouch", crate::files::trust::user_name(m.uid())),
                },
                (Some(pid), Ok(_)) if runs(pid) => StagingState::Running { pid },
                (Some(pid), Ok(_)) => StagingState::Dead { pid },
            };
            Staging { path, state }
        })
        .collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

/// What [`clear`] did: the dead runs' directories it removed, and those it left.
#[derive(Debug, Default)]
pub struct Cleared {
    pub removed: Vec<PathBuf>,
    pub left: Vec<Staging>,
}

/// Removes the staging directories of dead runs of this user from `dir` (whole: they hold only
/// what the run wrote); names the others, and those that could not be removed.
pub fn clear(dir: &Path) -> Cleared {
    let mut out = Cleared::default();
    for s in find(dir) {
        match &s.state {
            StagingState::Dead { .. } => match std::fs::remove_dir_all(&s.path) {
                Ok(()) => out.removed.push(s.path),
                Err(e) => out.left.push(Staging {
                    path: s.path,
                    state: StagingState::Foreign { why: format!("it could not be removed: {e}") },
                }),
            },
            _ => out.left.push(s),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_vouch_makes_carry_a_process() {
        assert_eq!(pid_of(".ca.tmp-4242-18c1f0a2b3-0"), Some(4242));
        for other in
            [".ca.tmp-x-1-0", ".ca.tmp-42-1", ".ca.tmp-42-1-0-9", ".ca.tmp--1-0", "ca.tmp-42-1-0", ".ca.tmp-42-zz-0"]
        {
            assert_eq!(pid_of(other), None, "{other}");
        }
    }

    #[test]
    fn a_dead_runs_directory_is_removed_and_a_running_ones_kept() {
        let t = tempfile::tempdir().unwrap();
        // No process has a pid this large (pid_max is at most 2^22).
        let dead = t.path().join(".ca.tmp-99999999-1a-0");
        let mine = t.path().join(format!(".ca.tmp-{}-1b-0", std::process::id()));
        let odd = t.path().join(".ca.tmp-odd");
        for d in [&dead, &mine, &odd] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("ca_key.pem"), "key").unwrap();
        }
        let c = clear(t.path());
        assert_eq!(c.removed, vec![dead.clone()]);
        assert!(!dead.exists() && mine.exists() && odd.exists());
        let states: Vec<_> = c.left.iter().map(|s| s.state.clone()).collect();
        assert!(states.contains(&StagingState::Running { pid: std::process::id() }), "{states:?}");
        assert!(states.iter().any(|s| matches!(s, StagingState::Foreign { .. })), "{states:?}");
    }
}
