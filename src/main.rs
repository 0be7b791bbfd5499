use clap::Parser;

/// Invoked as `vouch-autosign CERTNAME` or `vouch-enc CERTNAME` (symlinks to
/// vouch), behave as `vouch autosign CERTNAME` / `vouch enc CERTNAME`: Puppet
/// Server's `autosign` and `external_nodes` settings take a path, not a command line.
fn args() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let called_as = args.first().and_then(|a| std::path::Path::new(a).file_name().map(|n| n.to_os_string()));
    match called_as.as_deref().and_then(|n| n.to_str()) {
        Some("vouch-autosign") => args.insert(1, "autosign".into()),
        Some("vouch-enc") => args.insert(1, "enc".into()),
        _ => {}
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
