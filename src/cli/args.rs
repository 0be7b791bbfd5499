// Every clap definition of vouch's command line: the parsed types ([`Cli`], [`Command`], the
// `*Args` structs, the value enums), their value parsers and limits, and [`command`]. This
// file holds the top: [`Cli`], [`Command`] and [`command`]; each family of subcommands has
// its own file under `args/` (named with `#[path]`, so that the build script finds them too).
//
// These files depend on `clap` and `std` only (no `crate::` path): a build script can
// mount this file with `#[path]` to generate man pages and shell completions.
// The command code (`src/cli/`) converts the value enums into the library's types.

#[path = "args/approve.rs"]
mod approve;
#[path = "args/authority.rs"]
mod authority;
#[path = "args/decide.rs"]
mod decide;
#[path = "args/enc.rs"]
mod enc;
#[path = "args/formats.rs"]
mod formats;
#[path = "args/import.rs"]
mod import;
#[path = "args/keeping.rs"]
mod keeping;
#[path = "args/serve.rs"]
mod serve;
#[path = "args/values.rs"]
mod values;

pub use approve::ApproveArgs;
pub use authority::{AdminCommand, CaCommand, ConductorCommand, ConductorSignArgs, TemplateCommand};
pub use decide::{AutosignArgs, CheckArgs, CsrArgs, IdentityCommand, SignArgs};
pub use enc::EncRemoteArgs;
pub use formats::{
    CertEncodingArg, FormatArg, KeyTypeArg, ListFormat, LogFormatArg, OutFormat, ReportFormat, VerifyFormat,
};
pub use import::ImportArgs;
pub use keeping::{AuditCommand, LdapCommand, OverrideCommand, ReconcileArgs, SchemaFormat, StoreCommand};
#[cfg(feature = "bench")]
pub use serve::BenchCommand;
pub use serve::ServeArgs;
pub use values::{
    check_server_name, MAX_BODY_LIMIT, MAX_CONNECTIONS, MAX_LIFETIME_SECS, MAX_TEMPLATE_USES, MAX_THREADS,
    MAX_TIMEOUT_SECS,
};

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(name = "vouch", version, about = "A CA that autosigns Puppet agents vouched for by a cloud conductor")]
pub struct Cli {
    /// The CA's data directory
    /// [default: /var/lib/vouch for root, else $XDG_DATA_HOME/vouch or ~/.local/share/vouch].
    /// It, `ca/`, the policy and the CA keys must be owned by root or the user running vouch and
    /// not be writable by group or others; a new one is created 0700.
    #[arg(long, global = true, env = "VOUCH_DIR", value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Decide as of this RFC 3339 time instead of the clock (for tests and investigations).
    #[arg(long, global = true, hide = true)]
    pub now: Option<String>,
    /// How log lines are written to stderr: json (one object per line) or text; which lines: the
    /// filter in VOUCH_LOG or RUST_LOG, such as warn or debug (info when unset) [default: the
    /// VOUCH_LOG_FORMAT variable, else text when stderr is a terminal, else json].
    #[arg(long, global = true, value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormatArg>,
    /// The CA store: files (the data directory's, the default) or an LDAP URL whose path is the
    /// base DN, shared by several masters: ldap://HOST:PORT/BASE, ldaps://HOST:PORT/BASE (with
    /// --ldap-ca) or ldapi://%2Fpath%2Fto%2Fsocket/BASE (SASL EXTERNAL). The keys and the policy
    /// stay in the data directory.
    #[arg(long, global = true, env = "VOUCH_STORE", value_name = "URL")]
    pub store: Option<String>,
    /// LDAP simple bind: the DN (with --ldap-password-file; without both, ldapi binds by SASL
    /// EXTERNAL and ldap/ldaps anonymously).
    #[arg(long, global = true, env = "VOUCH_LDAP_BIND_DN", value_name = "DN")]
    pub ldap_bind_dn: Option<String>,
    /// LDAP simple bind: a file holding the password (one line; never a password on the command line).
    #[arg(long, global = true, env = "VOUCH_LDAP_PASSWORD_FILE", value_name = "FILE")]
    pub ldap_password_file: Option<PathBuf>,
    /// ldaps: the CA certificates (PEM) the LDAP server's certificate must chain to.
    #[arg(long, global = true, env = "VOUCH_LDAP_CA", value_name = "FILE")]
    pub ldap_ca: Option<PathBuf>,
    /// A replica of the LDAP store (same base DN; repeatable). Writes go to --store only.
    #[arg(long, global = true, value_name = "URL")]
    pub store_replica: Vec<String>,
    /// After each claim, wait (at most 2 s) until every --store-replica shows it before signing;
    /// on time-out refuse with 503 (the claim stays the requester's).
    #[arg(long, global = true)]
    pub store_confirm_replicas: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands that never read the data directory: `--dir` is hidden from their help.
#[cfg(feature = "bench")]
const WITHOUT_DIR: [&[&str]; 3] = [&["csr"], &["bench", "decide"], &["bench", "hook"]];
#[cfg(not(feature = "bench"))]
const WITHOUT_DIR: [&[&str]; 1] = [&["csr"]];

/// vouch's command line, with `--dir` shown only where it is used: the commands that never
/// read the data directory get their own hidden `--dir` (accepted and ignored, so that
/// `VOUCH_DIR` or a habitual `--dir` never breaks them), which global propagation leaves alone.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    fn hide_dir(c: clap::Command, path: &[&str]) -> clap::Command {
        match path.split_first() {
            None => c.arg(
                clap::Arg::new("dir")
                    .long("dir")
                    .env("VOUCH_DIR")
                    .value_name("DIR")
                    .value_parser(clap::value_parser!(PathBuf))
                    .hide(true),
            ),
            Some((first, rest)) => c.mut_subcommand(*first, |sub| hide_dir(sub, rest)),
        }
    }
    let mut c = Cli::command();
    for path in WITHOUT_DIR {
        c = hide_dir(c, path);
    }
    c
}

/// Parses a command line (with [`command`]).
pub fn parse_from(args: &[std::ffi::OsString]) -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    let mut c = command();
    let m = c.try_get_matches_from_mut(args)?;
    Cli::from_arg_matches(&m).map_err(|e| e.format(&mut c))
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Manage the CA itself.
    #[command(subcommand)]
    Ca(CaCommand),
    /// Conductor credentials and signing.
    #[command(subcommand)]
    Conductor(ConductorCommand),
    /// Templates for autoscaling groups: how many of a template's uses are spent and left.
    #[command(subcommand)]
    Template(TemplateCommand),
    /// Make a key and a CSR carrying attributes, exactly as a Puppet agent does.
    Csr(CsrArgs),
    /// Puppet Server's policy-based autosign executable: certname as argument, CSR on stdin, exit 0 signs.
    Autosign(AutosignArgs),
    /// Explain the decision for a CSR (like autosign, but reads a file and prints every reason).
    Check(CheckArgs),
    /// Decide on a CSR and, on a grant, issue its certificate from the master CA
    /// (prints the certificate, then the master CA and root certificates).
    Sign(SignArgs),
    /// Serve the Puppet CA API over HTTPS for Puppet agents (creates a CA on the first run).
    Serve(ServeArgs),
    /// Measure vouch next to the cost of its signatures (decision, hook, service).
    #[cfg(feature = "bench")]
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Not in this build (`vouch bench` needs the `bench` feature): says so.
    #[cfg(not(feature = "bench"))]
    #[command(hide = true, disable_help_flag = true)]
    Bench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        rest: Vec<String>,
    },
    /// Instance identity documents: check one, print the node's cloud-init part.
    #[command(subcommand)]
    Identity(IdentityCommand),
    /// Administrator certificates for `vouch serve` (Puppet's pp_cli_auth).
    #[command(subcommand)]
    Admin(AdminCommand),
    /// List requests; with --all, signed and revoked certificates too.
    ///
    /// Requests come sorted by certname. Certificates are streamed in the store's own order
    /// (the file store's signed/ directory order, the LDAP server's), not sorted, so that a
    /// fleet of any size lists in constant memory: pipe through `sort` for an order.
    List {
        /// Also list each certname's current certificate, signed or revoked (default: pending
        /// requests only).
        #[arg(long)]
        all: bool,
        /// Output format: text; json (one array, written element by element); jsonl (one
        /// JSON object per line).
        #[arg(long, value_enum, default_value_t = ListFormat::Text)]
        format: ListFormat,
        /// With --all: only the certificates this conductor vouched for (its certificate's
        /// SHA-256, hex, colons allowed), signed and revoked; no requests. Reads each
        /// certificate's record (one read per certificate).
        #[arg(long, value_name = "FINGERPRINT", requires = "all")]
        conductor: Option<String>,
    },
    /// Revoke a certname's certificate and regenerate the CRL.
    ///
    /// Exit 3: the revocation is stored (the certificate is revoked) but the CRL could not be
    /// written after it; `vouch crl` writes it once the cause is fixed.
    Revoke {
        /// The node whose current certificate is revoked.
        #[arg(required_unless_present = "serial", conflicts_with = "serial", value_name = "CERTNAME|--serial HEX")]
        certname: Option<String>,
        /// Revoke the certificate with this serial instead (hex, as `openssl x509 -noout
        /// -serial` or `vouch list --all` prints it): one whose certname's file is lost or
        /// damaged, or that is no longer its certname's current one.
        #[arg(long, value_name = "HEX", allow_hyphen_values = true)]
        serial: Option<String>,
        /// Why, kebab-case or as RFC 5280 spells it: unspecified, key-compromise (keyCompromise),
        /// ca-compromise (caCompromise), affiliation-changed (affiliationChanged), superseded,
        /// cessation-of-operation (cessationOfOperation), privilege-withdrawn (privilegeWithdrawn).
        #[arg(long, default_value = "unspecified")]
        reason: String,
        /// Revoke a master's service certificate (that master presents a revoked certificate,
        /// refused by every agent, until its vouch serve restarts) or the store's last valid
        /// administrator certificate (no client may then use the administrator API) too.
        #[arg(long)]
        force: bool,
    },
    /// Revoke a certname's certificate and forget it (and any pending request);
    /// exit 2 if the CA has neither for that name, 3 if the revocation is stored but the CRL
    /// could not be written after it (`vouch crl` writes it once the cause is fixed).
    Clean {
        /// The node to revoke and forget.
        certname: String,
        /// Clean a master's service certname or the last administrator too (see `vouch
        /// revoke --force`).
        #[arg(long)]
        force: bool,
    },
    /// Approve a node no conductor launched: issue its pending request with the
    /// classification set for it (`vouch override set`); only under `issuance.admin_approval`.
    /// Exit 2 when refused (the reason and what to do on stderr).
    Approve(ApproveArgs),
    /// Regenerate the CRL (signed by the master CA) and print or write it.
    Crl {
        /// Write the CRL here (an existing file is replaced; - or no --out: stdout).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// On a compile server: fetch the CA's CRLs (the master CA's and the root's, what
        /// Puppet's hostcrl must hold) from --ca-url into --out, replaced atomically; asks with
        /// If-Modified-Since from the last fetch and sets the file's time to Last-Modified.
        #[arg(long, requires_all = ["ca_url", "cacert", "out"])]
        fetch: bool,
        /// With --fetch: vouch serve's address, https://HOST:PORT (the agents' ca_server, ca_port).
        #[arg(long, value_name = "URL", requires = "fetch")]
        ca_url: Option<String>,
        /// With --fetch: the CA bundle vouch serve's certificate must chain to (Puppet's localcacert).
        #[arg(long, value_name = "BUNDLE", requires = "fetch")]
        cacert: Option<PathBuf>,
    },
    /// A new certificate for the same key and classification, new validity; the old one is superseded.
    ///
    /// Exit 3: renewed (the new certificate is written out) and the old one revoked, but the CRL
    /// could not be written after it; `vouch crl` writes it once the cause is fixed.
    Renew {
        /// The node whose current certificate is renewed.
        certname: String,
        /// Write the certificate and chain here (an existing file is replaced; - or no --out: stdout).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// The shared LDAP store: print its schema, create its containers.
    #[command(subcommand)]
    Ldap(LdapCommand),
    /// The CA store (the data directory's files, or --store): check it.
    #[command(subcommand)]
    Store(StoreCommand),
    /// Administrators' classifications: they override the certificate's in `vouch enc`.
    #[command(subcommand)]
    Override(OverrideCommand),
    /// Take over an existing Puppet 7/8 (or OpenVox) CA in a new data directory: its CA and
    /// keys, every signed certificate (listed and revocable), its revocations and CRL numbers;
    /// agents it enrolled keep working against `vouch serve`. Refuses to overwrite a CA.
    Import(ImportArgs),
    /// Copy this data directory's file store (certificates, revocations, pending requests,
    /// overrides, unexpired replay-journal entries) into the LDAP store --to names;
    /// idempotent and resumable.
    Migrate {
        /// The LDAP store (URL as for --store; bound with the --ldap-* options).
        #[arg(long, value_name = "URL")]
        to: String,
    },
    /// Compare the store with the fleet's real inventory: certificates of names it lacks
    /// (orphans), expired certificates, stale pending requests, names with no certificate, and
    /// entries with no usable name (junk). A dry run unless --confirm.
    Reconcile(ReconcileArgs),
    /// Remove entries with no usable name, by the generated names `vouch reconcile` lists
    /// under junk; or with --tombstones, the shared store's tombstones of cleaned certnames
    /// whose certificate expired a CRL period ago (a dry run unless --confirm).
    Purge {
        /// The generated names (unnamed-...), as `vouch reconcile` lists them.
        #[arg(required_unless_present = "tombstones", conflicts_with = "tombstones", value_name = "NAME")]
        names: Vec<String>,
        /// The shared LDAP store's tombstones of cleaned certnames whose certificate expired
        /// a CRL period ago (crl.validity): off every CRL, their revocation entries keep them.
        #[arg(long)]
        tombstones: bool,
        /// Remove them (default: only show what would be removed).
        #[arg(long)]
        confirm: bool,
    },
    /// The tamper-evident audit log: verify its chain and checkpoints, show it, checkpoint it.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Print a node's classification from its certificate, as Puppet's external node classifier.
    Enc {
        /// The node (its current certificate in the store, from --ca-url, or in --puppet-cadir).
        certname: Option<String>,
        /// Read this certificate file instead, verified against --cacert and the CRLs of --crl
        /// or --ca-url (without them: the --dir CA's bundle and CRLs); its CN must be CERTNAME
        /// when one is given.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["puppet_cadir"])]
        cert: Option<PathBuf>,
        #[command(flatten)]
        remote: EncRemoteArgs,
        /// Hook mode: read CERTNAME's certificate from Puppet Server's CA directory
        /// (DIR/signed/CERTNAME.pem), verified against DIR/ca_crt.pem and DIR/ca_crl.pem.
        #[arg(long, value_name = "DIR", requires = "certname")]
        puppet_cadir: Option<PathBuf>,
        /// The policy whose classification settings (mirror OID, size cap) apply
        /// [default: the --dir CA's policy, if any, else vouch's defaults].
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
    },
}

impl Command {
    /// Whether the command changes nothing (what it writes besides, a CRL that is due, every
    /// command writes): its output cut short by a closed pipe ends quietly (exit 141, as a
    /// process killed by SIGPIPE). A command that changes the CA or writes files says
    /// instead that its output could not be written, and that what it wrote stays (exit 2).
    pub fn only_reads(&self) -> bool {
        match self {
            Command::List { .. } | Command::Crl { .. } | Command::Enc { .. } | Command::Check(_) => true,
            Command::Identity(_) | Command::Template(_) => true,
            Command::Store(StoreCommand::Verify { .. }) => true,
            Command::Override(OverrideCommand::Show { .. }) | Command::Ldap(LdapCommand::Schema { .. }) => true,
            // Neither touches the CA: what they print is all they make.
            Command::Conductor(ConductorCommand::Sign(_)) => true,
            Command::Audit(a) => !matches!(a, AuditCommand::Checkpoint),
            Command::Reconcile(r) => !r.confirm,
            Command::Purge { confirm, .. } => !confirm,
            _ => false,
        }
    }
}
