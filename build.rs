//! Generates vouch's man pages and shell completions from its clap definitions.
//!
//! `src/cli/args.rs` depends on clap and std only, so it compiles here as it does in the
//! crate. Written to `$OUT_DIR/man/` (`vouch.1`, and one page per subcommand:
//! `vouch-serve.1`, `vouch-ca-init.1`, ...) and `$OUT_DIR/completions/` (`vouch.bash`, `_vouch`,
//! `vouch.fish`), then copied to `target/<profile>/assets/` (the profile directory that
//! holds the binary, found from OUT_DIR), where `[package.metadata.deb]` and
//! `scripts/package` find them. Reruns only when `src/cli/args.rs`, `src/cli/args/` (or this file) changes.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt;
use std::path::{Path, PathBuf};

#[allow(dead_code, unused_imports)]
#[path = "src/cli/args.rs"]
mod args;

/// What went wrong, with the path involved: cargo prints it when the build script fails.
struct Failure(String);

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn io(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> Failure {
    let context = format!("vouch build script: cannot {what} {}", path.display());
    move |e| Failure(format!("{context}: {e}"))
}

fn main() -> Result<(), Failure> {
    println!("cargo:rerun-if-changed=src/cli/args.rs");
    println!("cargo:rerun-if-changed=src/cli/args");
    println!("cargo:rerun-if-changed=src/encoding/server_name.rs");
    println!("cargo:rerun-if-changed=build.rs");
    let out_dir = std::env::var_os("OUT_DIR")
        .map(PathBuf::from)
        .ok_or_else(|| Failure("vouch build script: cargo did not set OUT_DIR".into()))?;

    let man = fresh_dir(&out_dir.join("man"))?;
    let mut cmd = args::command().disable_help_subcommand(true);
    cmd.build();
    man_pages(&cmd, &man)?;

    let completions = fresh_dir(&out_dir.join("completions"))?;
    for shell in [clap_complete::Shell::Bash, clap_complete::Shell::Zsh, clap_complete::Shell::Fish] {
        let mut cmd = args::command();
        clap_complete::generate_to(shell, &mut cmd, "vouch", &completions)
            .map_err(io(&format!("write the {shell} completion into"), &completions))?;
    }

    // OUT_DIR is <profile dir>/build/vouch-<hash>/out; the binary is in <profile dir>.
    let profile_dir = out_dir
        .ancestors()
        .nth(3)
        .filter(|_| out_dir.ancestors().nth(2).and_then(Path::file_name).is_some_and(|n| n == "build"));
    match profile_dir {
        Some(profile_dir) => {
            let assets = fresh_dir(&profile_dir.join("assets"))?;
            copy_dir(&man, &fresh_dir(&assets.join("man"))?)?;
            copy_dir(&completions, &fresh_dir(&assets.join("completions"))?)?;
        }
        None => println!(
            "cargo:warning=OUT_DIR {} is not <profile>/build/<package>/out: man pages and completions stay there",
            out_dir.display()
        ),
    }
    Ok(())
}

/// `cmd`'s page and, recursively, one per visible subcommand, each titled with vouch's
/// version (clap gives subcommands none).
fn man_pages(cmd: &clap::Command, dir: &Path) -> Result<(), Failure> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        man_pages(sub, dir)?;
    }
    let page = clap_mangen::Man::new(cmd.clone()).source(format!("vouch {}", env!("CARGO_PKG_VERSION")));
    let path = dir.join(page.get_filename());
    let mut text = Vec::new();
    page.render(&mut text).map_err(io("render", &path))?;
    std::fs::write(&path, text).map_err(io("write", &path))
}

/// An empty directory at `path` (whatever a previous run left there is removed).
fn fresh_dir(path: &Path) -> Result<PathBuf, Failure> {
    if path.exists() {
        std::fs::remove_dir_all(path).map_err(io("remove", path))?;
    }
    std::fs::create_dir_all(path).map_err(io("create", path))?;
    Ok(path.to_path_buf())
}

/// Copies the files of `from` (no subdirectories) into `to`.
fn copy_dir(from: &Path, to: &Path) -> Result<(), Failure> {
    for entry in std::fs::read_dir(from).map_err(io("read", from))? {
        let path = entry.map_err(io("read", from))?.path();
        if let Some(name) = path.file_name() {
            std::fs::copy(&path, to.join(name)).map_err(io("copy", &path))?;
        }
    }
    Ok(())
}
