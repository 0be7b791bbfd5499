//! What vouch trusts (the data directory, `ca/`, the policy, the CA keys, the trust anchors
//! a policy names) must be owned by root or the user running vouch and not be writable
//! by anyone else.

use std::fs;
use std::path::{Path, PathBuf};

/// A path vouch trusts (the data directory, `ca/`, the policy, the CA keys, the trust
/// anchors a policy names) that another user could change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted {
    /// The file or directory at fault (perhaps a parent of the one vouch reads).
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: String,
    /// The command that fixes it.
    pub fix: String,
}

impl std::fmt::Display for Untrusted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}; fix: {}", self.path.display(), self.problem, self.fix)
    }
}

impl std::error::Error for Untrusted {}

/// The effective user id of this process.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// A user's name (for messages and `chown` lines), else the number.
///
/// The one `unsafe` left in `files`: rustix has no user database, and the name must come
/// from the C library's getpwuid_r (NSS: /etc/passwd, LDAP, systemd's dynamic users...).
#[allow(unsafe_code)]
pub fn user_name(uid: u32) -> String {
    // SAFETY: `passwd` is plain C data (integers and pointers): all zeroes is a valid value.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; buf outlives the use of pw's strings.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() || pw.pw_name.is_null() {
        return uid.to_string();
    }
    // SAFETY: getpwuid_r succeeded: pw_name is a NUL-terminated string inside buf.
    unsafe { std::ffi::CStr::from_ptr(pw.pw_name) }.to_string_lossy().into_owned()
}

/// One file or directory: owned by root or by the user running vouch, and not writable by
/// group or others (a root-owned sticky directory such as /tmp is accepted as a parent:
/// others cannot rename or remove what they do not own there). Missing or unreadable
/// paths pass: whoever reads them reports that.
fn check_one(path: &Path, parent: bool) -> Result<(), Untrusted> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = fs::metadata(path) else { return Ok(()) };
    let me = euid();
    let quoted = shell_quote(path);
    if meta.uid() != 0 && meta.uid() != me {
        return Err(Untrusted {
            path: path.to_path_buf(),
            problem: format!(
                "is owned by {} (uid {}), neither root nor the user running vouch ({}): that user could \
                 change what vouch trusts",
                user_name(meta.uid()),
                meta.uid(),
                user_name(me)
            ),
            fix: format!(
                "chown {} {quoted} (or, if {owner} is the service account that should own it, run vouch as {owner}: \
                 sudo -u {owner} vouch …)",
                user_name(me),
                owner = user_name(meta.uid())
            ),
        });
    }
    let mode = meta.mode() & 0o7777;
    let sticky_root_dir = parent && meta.is_dir() && mode & 0o1000 != 0 && meta.uid() == 0;
    if mode & 0o022 != 0 && !sticky_root_dir {
        // A directory shared on purpose (/tmp, /dev/shm: sticky) or a device (/dev/null) is
        // not vouch's to change: chmod there would break the machine for every user.
        let shared = (meta.is_dir() && mode & 0o1000 != 0) || !(meta.is_dir() || meta.is_file());
        return Err(Untrusted {
            path: path.to_path_buf(),
            problem: format!(
                "is writable by {} (mode {:04o}): they could change what vouch trusts",
                if mode & 0o002 != 0 { "every user" } else { "its group" },
                mode
            ),
            fix: if shared && meta.is_dir() {
                format!(
                    "do not change {quoted}, which other users and programs share: give vouch a path of its own \
                     (a new directory such as {}, which vouch creates private)",
                    shell_quote(&path.join("vouch"))
                )
            } else if shared {
                format!("do not change {quoted}, which other programs share: give vouch a regular file of its own")
            } else {
                format!("chmod go-w {quoted}")
            },
        });
    }
    Ok(())
}

fn shell_quote(path: &Path) -> String {
    let s = path.display().to_string();
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@%".contains(c)) {
        s
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Refuses a directory vouch keeps trusted state in on behalf of one user (the
/// classifier's cache) unless that user — the one running vouch — owns it and neither its
/// group nor others may write it. Stricter than [`check_trusted`]: root's ownership is not
/// enough for a non-root user (it did not make the directory, and cannot vouch for what is
/// in it). A missing directory passes (vouch creates it private).
pub fn check_private_dir(path: &Path) -> Result<(), Untrusted> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = fs::metadata(path) else { return Ok(()) };
    let me = euid();
    let quoted = shell_quote(path);
    if meta.uid() != me {
        return Err(Untrusted {
            path: path.to_path_buf(),
            problem: format!(
                "is owned by {} (uid {}), not by the user running vouch ({}): its owner could plant \
                 what vouch then trusts",
                user_name(meta.uid()),
                meta.uid(),
                user_name(me)
            ),
            fix: format!("chown -R {} {quoted}, or give vouch a directory of its own", user_name(me)),
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(Untrusted {
            path: path.to_path_buf(),
            problem: format!(
                "is writable by {} (mode {:04o}): they could plant what vouch then trusts",
                if mode & 0o002 != 0 { "every user" } else { "its group" },
                mode
            ),
            fix: format!("chmod 0700 {quoted}"),
        });
    }
    Ok(())
}

/// Refuses a path that vouch trusts (data directory, `ca/`, policy, CA key, trust anchor)
/// when another user could change it: the path itself (symbolic links followed), the
/// directory holding it (whoever may write there can swap the file), and, for a symbolic
/// link, the directory of its target. Ancestors further up are not checked.
pub fn check_trusted(path: &Path) -> Result<(), Untrusted> {
    check_one(path, false)?;
    let holder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    check_one(&holder, true)?;
    if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        if let Some(real_parent) = fs::canonicalize(path).ok().and_then(|r| r.parent().map(Path::to_path_buf)) {
            check_one(&real_parent, true)?;
        }
    }
    Ok(())
}

/// [`check_trusted`] for a private key, which must also be unreadable by group and others.
pub fn check_private_key(path: &Path) -> Result<(), Untrusted> {
    check_secret(path, "a private key")
}

/// [`check_private_key`] for any secret (`what`: "a private key", "a password file").
pub fn check_secret(path: &Path, what: &str) -> Result<(), Untrusted> {
    use std::os::unix::fs::MetadataExt;
    check_trusted(path)?;
    if let Ok(meta) = fs::metadata(path) {
        let mode = meta.mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(Untrusted {
                path: path.to_path_buf(),
                problem: format!("is {what} that group or others may read (mode {mode:04o})"),
                fix: format!("chmod 600 {}", shell_quote(path)),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn trusted_paths_refuse_what_others_may_write_but_accept_a_root_sticky_parent() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let open = d.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let p = open.join("policy.toml");
        fs::write(&p, "x").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        let e = check_trusted(&p).unwrap_err();
        assert_eq!(e.path, open);
        assert!(e.problem.contains("every user") && e.fix.starts_with("chmod go-w"), "{e}");
        // Sticky and root-owned (as /tmp): others cannot rename what they do not own there.
        fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
        if fs::metadata(&open).unwrap().uid() == 0 {
            check_trusted(&p).unwrap();
        }
        // But a sticky directory is no excuse for the file itself.
        fs::set_permissions(&p, fs::Permissions::from_mode(0o666)).unwrap();
        assert!(check_trusted(&p).is_err());
        // A missing path passes: its reader reports it.
        check_trusted(&d.path().join("missing")).unwrap();
    }
}
