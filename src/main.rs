#![deny(unsafe_code)]
// No unwrap, expect or panic on any path input reaches (as in the library).
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;

/// Invoked as `vouch-autosign CERTNAME` or `vouch-enc CERTNAME` (symlinks to
/// vouch), behave as `vouch autosign CERTNAME` / `vouch enc CERTNAME`: Puppet
/// Server's `autosign` and `external_nodes` settings take a path, not a command line.
fn args() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let called_as = args.first().and_then(|a| std::path::Path::new(a).file_name().map(|n| n.to_os_string()));
    match called_as.as_deref().and_then(|n| n.to_str()) {
        // `--` so that a certname can never be read as an option (`--help` would exit 0: "sign").
        Some("vouch-autosign") => {
            args.insert(1, "autosign".into());
            args.insert(2, "--".into());
        }
        Some("vouch-enc") => args.insert(1, "enc".into()),
        _ => {}
    }
    args
}

fn main() {
    // An empty VOUCH_DIR or VOUCH_METRICS_LISTEN (`VOUCH_DIR=` in a script or unit file) means unset, as an empty
    // VOUCH_POLICY, HOME or XDG_DATA_HOME does; clap would otherwise report a missing
    // `--dir` value the user never typed. Still one thread here: nothing reads the environment.
    for var in ["VOUCH_DIR", "VOUCH_METRICS_LISTEN"] {
        if std::env::var_os(var).is_some_and(|v| v.is_empty()) {
            std::env::remove_var(var);
        }
    }
    let args = args();
    let cli = match vouch::cli::parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // For the autosign hook, exit 0 means "sign": help, version or any usage error
            // must never end in 0 there.
            let hook = args.iter().any(|a| a == "autosign");
            std::process::exit(if hook { vouch::cli::EXIT_ERROR } else { e.exit_code() });
        }
    };
    // The log (stderr only: stdout carries each command's output, and the hook's answer).
    vouch::obs::init_logging(cli.log_format.map(|f| match f {
        vouch::cli::args::LogFormatArg::Json => vouch::obs::LogFormat::Json,
        vouch::cli::args::LogFormatArg::Text => vouch::obs::LogFormat::Text,
    }));
    let only_reads = cli.command.only_reads();
    let code = match vouch::cli::run(cli) {
        Ok(code) => code,
        // A refusal (renewal): each reason with its code and hint, exit 1, as for a CSR.
        Err(vouch::Error::Refused { certname, refused }) => {
            let mut err = std::io::stderr();
            for reason in &refused.reasons {
                let _ = writeln!(err, "vouch: refused [{}]: {certname}: {reason}", reason.code());
                let _ = writeln!(err, "  hint: {}", reason.hint());
            }
            vouch::cli::EXIT_REFUSED
        }
        // A closed pipe on stdout: quiet, as a process killed by SIGPIPE (SIGPIPE itself stays
        // ignored: `vouch serve` writes to sockets and must never die of it).
        Err(vouch::Error::StdoutClosed) if only_reads => vouch::cli::EXIT_PIPE,
        // A command that changed the CA before its output was cut short says so.
        Err(vouch::Error::StdoutClosed) => {
            let mut err = std::io::stderr();
            let _ = writeln!(
                err,
                "vouch: error: stdout was closed before vouch could write all of its output; what the command \
                 wrote before that (to the CA, to files) stays written"
            );
            let _ = writeln!(err, "  hint: `vouch list --all` and `vouch audit show` show what the CA holds now");
            vouch::cli::EXIT_ERROR
        }
        Err(e) => {
            // Never eprintln!: it panics (exit 101) when stderr cannot be written.
            let mut err = std::io::stderr();
            let _ = writeln!(err, "vouch: error: {e}");
            if let Some(h) = e.hint() {
                let _ = writeln!(err, "  hint: {h}");
            }
            match e {
                vouch::Error::StoreUnavailable { .. }
                | vouch::Error::Mistake(vouch::error::Mistake::MigrateTargetUnavailable { .. })
                | vouch::Error::StoreUnconfirmed { .. }
                | vouch::Error::Limited(_)
                | vouch::Error::Busy(_) => vouch::cli::EXIT_TEMPFAIL,
                // Stopped part way by the store going away (`vouch migrate` after it marked the
                // directory): the same command later finishes it.
                vouch::Error::Unfinished { error, .. } if matches!(*error, vouch::Error::StoreUnavailable { .. }) => {
                    vouch::cli::EXIT_TEMPFAIL
                }
                vouch::Error::RevokedCrlNotWritten { .. }
                | vouch::Error::ReconcileCrlNotWritten { .. }
                | vouch::Error::RenewedCrlNotWritten { .. }
                | vouch::Error::ConductorRevokedCrlNotWritten { .. } => vouch::cli::EXIT_REVOKED_CRL_NOT_WRITTEN,
                _ => vouch::cli::EXIT_ERROR,
            }
        }
    };
    std::process::exit(code);
}
