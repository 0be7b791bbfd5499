use clap::Parser;

/// Invoked as `vouch-autosign CERTNAME` (a symlink to vouch), behave as
/// `vouch autosign CERTNAME`: Puppet Server's `autosign` setting takes a path,
/// not a command line.
fn args() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let called_as = args.first().and_then(|a| std::path::Path::new(a).file_name().map(|n| n.to_os_string()));
    if called_as.as_deref() == Some(std::ffi::OsStr::new("vouch-autosign")) {
        args.insert(1, "autosign".into());
    }
    args
}

fn main() {
    let cli = vouch::cli::Cli::parse_from(args());
    let code = match vouch::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("vouch: error: {e}");
            if let Some(h) = e.hint() {
                eprintln!("  hint: {h}");
            }
            vouch::cli::EXIT_ERROR
        }
    };
    std::process::exit(code);
}
