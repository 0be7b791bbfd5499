// Every clap definition of vouch's command line: the parsed types ([`Cli`], [`Command`], the
// `*Args` structs, the value enums), their value parsers and limits, and [`command`].
//
// This file depends on `clap` and `std` only (no `crate::` path): a build script can
// `include!` it (or mount it with `#[path]`) to generate man pages and shell completions.
// The command code (`src/cli/`) converts the value enums into the library's types.

use clap::{Args, Parser, Subcommand};
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
    },
    /// Revoke a certname's certificate and forget it (and any pending request);
    /// exit 2 if the CA has neither for that name, 3 if the revocation is stored but the CRL
    /// could not be written after it (`vouch crl` writes it once the cause is fixed).
    Clean {
        /// The node to revoke and forget.
        certname: String,
    },
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
    /// under junk (a dry run unless --confirm).
    Purge {
        /// The generated names (unnamed-...), as `vouch reconcile` lists them.
        #[arg(required = true, value_name = "NAME")]
        names: Vec<String>,
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

/// `vouch enc` on a compile server (the CA is vouch serve elsewhere). Puppet Server passes the
/// ENC only the certname: every setting also comes from the environment or a config file.
#[derive(Args, Debug, Default)]
pub struct EncRemoteArgs {
    /// vouch serve's address, https://HOST:PORT: the node's certificate is fetched from it
    /// (GET certificate/CERTNAME), verified against --cacert and the CA's CRL.
    #[arg(long, env = "VOUCH_ENC_CA_URL", value_name = "URL", conflicts_with = "puppet_cadir")]
    pub ca_url: Option<String>,
    /// The CA bundle (PEM: the master CA and the root) certificates must chain to.
    #[arg(long, env = "VOUCH_ENC_CACERT", value_name = "BUNDLE")]
    pub cacert: Option<PathBuf>,
    /// How long a fetched CRL and a cached certificate are used before asking the CA again
    /// (a revocation is refused at most this long after it; see --crl) [default: 60s].
    #[arg(long, env = "VOUCH_ENC_CRL_REFRESH", value_name = "DURATION", allow_hyphen_values = true)]
    pub crl_refresh: Option<String>,
    /// A CRL file checked too (repeatable), such as Puppet's hostcrl kept by `vouch crl --fetch`:
    /// a certificate listed there is refused at once.
    #[arg(long, env = "VOUCH_ENC_CRL", value_name = "FILE", value_delimiter = ',')]
    pub crl: Vec<PathBuf>,
    /// The cache of CRLs and certificates [default: /var/cache/vouch/enc for root, else
    /// $XDG_CACHE_HOME/vouch/enc or ~/.cache/vouch/enc].
    #[arg(long, env = "VOUCH_ENC_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// At most this many certificates are cached (the oldest are dropped) [default: 10000].
    #[arg(long, env = "VOUCH_ENC_CACHE_MAX", value_name = "N", allow_negative_numbers = true, value_parser = |s: &str| whole_number::<usize>(s, 0, None))]
    pub cache_max: Option<usize>,
    /// Where refusals and answers from a stale cache are logged: syslog (/dev/log, the
    /// default), stderr, or a file (Puppet Server discards an ENC's stderr).
    #[arg(long, env = "VOUCH_ENC_LOG", value_name = "syslog|stderr|FILE")]
    pub log: Option<String>,
    /// An administrator's certificate (PEM): with --client-key, administrators' overrides are
    /// read from the CA (classification_override/CERTNAME) and printed instead.
    #[arg(long, env = "VOUCH_ENC_CLIENT_CERT", value_name = "FILE", requires = "client_key")]
    pub client_cert: Option<PathBuf>,
    /// The key of --client-cert.
    #[arg(long, env = "VOUCH_ENC_CLIENT_KEY", value_name = "FILE", requires = "client_cert")]
    pub client_key: Option<PathBuf>,
    /// A TOML file with any of these settings (ca_url, cacert, crl_refresh, crl, cache_dir,
    /// cache_max, log, client_cert, client_key); the command line and the environment win
    /// [default: /etc/vouch/enc.toml when it exists].
    #[arg(long, env = "VOUCH_ENC_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ReconcileArgs {
    /// Where the fleet's names come from: file:PATH (one certname a line, # comments),
    /// cmd:PROGRAM ARGS... (its standard output, one name a line; a non-zero exit aborts), or
    /// ldap:URL, an RFC 4516 URL ldap://HOST:PORT/BASE?ATTRIBUTE?SCOPE?FILTER whose
    /// attribute values are certnames (paged; bound with the --ldap-* options).
    #[arg(long, value_name = "SOURCE")]
    pub inventory: String,
    /// Act: revoke the orphans' certificates and drop the stale pending requests.
    #[arg(long)]
    pub confirm: bool,
    /// Also forget (clean) what is revoked: the orphans' certificates, revoked or not.
    #[arg(long)]
    pub prune: bool,
    /// Report format (json and yaml: for scripts and review; no progress bars).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = ReportFormat::Text)]
    pub output: ReportFormat,
    /// A pending request older than this is stale (30m, 24h, 7d, 2w).
    #[arg(long, value_name = "DUR", default_value = "7d", allow_hyphen_values = true)]
    pub pending_older_than: String,
    /// A `cmd:` inventory program still running after this is killed (with its process
    /// group) and reconcile aborts (30s, 10m, 1h).
    #[arg(long, value_name = "DUR", default_value = "10m", allow_hyphen_values = true)]
    pub inventory_timeout: String,
    /// Refuse --confirm when more than this many changes would be made: a number, or a
    /// percentage of the fleet's valid certificates.
    #[arg(long, value_name = "N|P%", default_value = "10%", allow_hyphen_values = true)]
    pub max_changes: String,
    /// Act even on an empty inventory, or beyond --max-changes.
    #[arg(long)]
    pub force: bool,
}

/// Report formats of `vouch reconcile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ReportFormat {
    #[default]
    Text,
    Json,
    Yaml,
}

impl Command {
    /// Whether the command changes nothing (what it writes besides, a CRL that is due, every
    /// command writes): its output cut short by a closed pipe ends quietly (exit 141, as a
    /// process killed by SIGPIPE). A command that changes the CA or writes files says
    /// instead that its output could not be written, and that what it wrote stays (exit 2).
    pub fn only_reads(&self) -> bool {
        match self {
            Command::List { .. } | Command::Crl { .. } | Command::Enc { .. } | Command::Check(_) => true,
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

#[derive(Subcommand, Debug)]
pub enum AuditCommand {
    /// Verify the chain of the audit log (default: the policy's [audit] log), FILEs in order
    /// (a rotated file first), and its checkpoints' signatures; exit 1 at the first modified,
    /// inserted, deleted or reordered line, or a tail cut off before --checkpoint.
    Verify {
        /// The log files, oldest first (default: the policy's audit log, after its rotated
        /// files `<log>.N` ... `<log>.1` that exist).
        #[arg(value_name = "FILE")]
        files: Vec<PathBuf>,
        /// A published checkpoint line (a file holding it, as `vouch audit checkpoint` printed it):
        /// the log must reach it unchanged.
        #[arg(long, value_name = "FILE")]
        checkpoint: Option<PathBuf>,
        /// The files given do not start at the chain's first line (older rotated files are
        /// gone): they start at this published checkpoint line (a file holding it), or right after it.
        #[arg(long, value_name = "FILE")]
        from_checkpoint: Option<PathBuf>,
        /// The master CA certificate that signs the checkpoints (default: the data directory's).
        #[arg(long, value_name = "FILE")]
        ca_cert: Option<PathBuf>,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value_t = OutFormat::Text)]
        output: OutFormat,
    },
    /// Show the audit log's lines, for people.
    Show {
        /// Only lines about this certname.
        #[arg(long, value_name = "N")]
        certname: Option<String>,
        /// Only lines from this time on: RFC 3339, or a duration back from now (24h, 7d).
        #[arg(long, value_name = "T", allow_hyphen_values = true)]
        since: Option<String>,
        /// text: one line per event; json: the log's JSON lines as they are.
        #[arg(short = 'o', long = "output", value_enum, default_value_t = OutFormat::Text)]
        output: OutFormat,
        /// The log file (default: the policy's audit log).
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
    },
    /// Append a checkpoint signed with the master CA's key now, and print it (to publish:
    /// `vouch audit verify --checkpoint` then detects a log cut off before it).
    Checkpoint,
}

#[derive(Subcommand, Debug)]
pub enum StoreCommand {
    /// Check that the store agrees with itself and with the CA: every current certificate
    /// whole, signed by a master CA of the store and matching its record; the inventory and
    /// the records in agreement; every revoked certificate on the revocation list and on the
    /// CRL; the file store's own files (no operation left half-done, no unsettled serial,
    /// never two unexpired unrevoked certificates of one certname, no junk); the CA bundle and
    /// the root certificate file. Reads the store first without its lock (issuance goes on);
    /// at the first finding it reads it all again holding the lock (which first finishes any
    /// recovery), and reports only what that reading finds. Writes only what every command
    /// writes: a CRL that is due. Exit 0: no finding; 1: findings, each named with what to do;
    /// 2: the store could not be read; 141: stdout's reader exited early.
    Verify {
        /// Output format: text; jsonl (one JSON object per finding, then one summary object).
        #[arg(long, value_enum, default_value_t = VerifyFormat::Text)]
        format: VerifyFormat,
    },
}

/// `vouch store verify --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VerifyFormat {
    /// One line per finding, then a summary and what to do for each kind found.
    Text,
    /// One JSON object per finding (finding, its fields, message, hint), then
    /// {"summary": {certificates, inventory, revocations, findings, store}}.
    Jsonl,
}

#[derive(Subcommand, Debug)]
pub enum LdapCommand {
    /// Print vouch's LDAP schema: for slapd.conf (include it after core.schema), or with
    /// --ldif for cn=config (ldapadd -Y EXTERNAL -H ldapi:/// -f FILE).
    Schema {
        /// The cn=config LDIF form.
        #[arg(long)]
        ldif: bool,
    },
    /// Create the store's containers under --store's base DN (which must exist). Idempotent.
    Init {
        /// Also create the base DN itself, if it is an ou= whose parent exists.
        #[arg(long)]
        create_base: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum OverrideCommand {
    /// Set NAME's classification (YAML or JSON, checked as a conductor's would be).
    Set {
        /// The node.
        certname: String,
        /// The classification file.
        #[arg(long, value_name = "FILE")]
        classification: PathBuf,
        /// Only if the override is still at this revision (0: none was ever set); a stale
        /// writer gets a conflict (exit 2).
        #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 0, None))]
        expect_revision: Option<u64>,
    },
    /// Show NAME's override and its revision.
    Show {
        /// The node.
        certname: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutFormat::Text)]
        format: OutFormat,
    },
    /// Remove NAME's override (the certificate's classification applies again); the
    /// revision goes on counting.
    Clear {
        /// The node.
        certname: String,
        /// Only if the override is still at this revision.
        #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 0, None))]
        expect_revision: Option<u64>,
    },
}

/// The rule for every file vouch writes, shown in each output option's help.
const OUTPUT_RULE: &str = "Outputs: - is stdout; a device or FIFO is written through; a symbolic link or \
                           directory is refused; a regular file is written atomically (temporary file, \
                           rename). A private key, and the certificate or CSR made with it, never \
                           replace an existing file; every other output (attributes, certificates, \
                           CRLs) replaces it.";

#[derive(Args, Debug)]
#[command(after_help = OUTPUT_RULE)]
pub struct SignArgs {
    /// The certificate request (PEM or DER) to decide on.
    #[arg(long, value_name = "FILE")]
    pub csr: PathBuf,
    /// The certname (default: the CSR's CN).
    #[arg(long)]
    pub certname: Option<String>,
    /// Write the certificate and chain here (an existing file is replaced; - or no --out: stdout).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum CaCommand {
    /// Create a root CA, a master CA and a default policy in DIR (created 0700 if new); with
    /// --root-cert and --root-key, a further master CA under that existing root instead.
    Init {
        /// Key type of the root and master CA (with --root-cert: of the new master CA; the root's may differ).
        #[arg(long, value_enum, default_value_t = KeyTypeArg::P256)]
        key_type: KeyTypeArg,
        /// An existing root CA's certificate (another CA's DIR/ca/root_crt.pem): DIR gets a new master
        /// CA under it, which it signs, and a copy of it as its trust anchor.
        #[arg(long, value_name = "FILE", requires = "root_key")]
        root_cert: Option<PathBuf>,
        /// That root's private key (DIR/ca/root_key.pem of its CA; mode 0600, this user's or root's):
        /// read to sign the new master CA, never copied into DIR.
        #[arg(long, value_name = "FILE", requires = "root_cert")]
        root_key: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum ConductorCommand {
    /// Issue a conductor certificate (EKU 1.3.6.1.4.1.34380.2.0) from the root.
    #[command(after_help = OUTPUT_RULE)]
    New {
        /// The conductor's name (its certificate's CN).
        name: String,
        /// Write the conductor's certificate here (never replaces an existing file).
        #[arg(long, value_name = "FILE")]
        cert_out: PathBuf,
        /// Write the conductor's private key here, mode 0600 (never replaces an existing file).
        #[arg(long, value_name = "FILE")]
        key_out: PathBuf,
        /// The conductor's key type.
        #[arg(long, value_enum, default_value_t = KeyTypeArg::P256)]
        key_type: KeyTypeArg,
        /// Validity in days, at least 1 (capped at the root's notAfter).
        #[arg(long, default_value_t = 365, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u32>(s, 1, None))]
        days: u32,
    },
    /// Sign a node's attributes with a conductor key.
    Sign(ConductorSignArgs),
    /// Revoke a conductor: put it on the root's CRL (DIR/ca/root_crl.pem), written at once.
    ///
    /// Needs the root key (run it where DIR/ca/root_key.pem is). Every CA counts its own
    /// root CRL: with the fleet's shared store (--store ldap://...) it is published there,
    /// and every master sharing it takes it; a master on a file store needs the new
    /// root_crl.pem copied to DIR/ca/. Node certificates the conductor vouched for stay valid: the command says how
    /// many are current and how to list them. Revoking a revoked conductor again changes
    /// nothing (exit 0). Exit 3: recorded, but the root CRL could not be written after it.
    #[command(after_help = "One of --cert and --serial, or both of the same certificate.")]
    Revoke {
        /// The conductor's certificate (PEM or DER), as `vouch conductor new` wrote it.
        // One of --cert and --serial is required: the command says so itself (clap's
        // `required_unless_present` named --cert alone).
        #[arg(long, value_name = "FILE")]
        cert: Option<PathBuf>,
        /// Its serial instead (hex, as `openssl x509 -noout -serial` prints it, colons allowed):
        /// alone, only a conductor this data directory knows (DIR/ca/root_issued.txt, a node's
        /// record, DIR/conductor/); any other serial is refused (give --cert).
        #[arg(long, value_name = "HEX", allow_hyphen_values = true)]
        serial: Option<String>,
        /// Why, kebab-case or as RFC 5280 spells it: key-compromise (keyCompromise), unspecified,
        /// affiliation-changed (affiliationChanged), superseded, cessation-of-operation
        /// (cessationOfOperation), privilege-withdrawn (privilegeWithdrawn), ca-compromise (caCompromise).
        #[arg(long, default_value = "key-compromise")]
        reason: String,
    },
    /// Publish the root CRL (DIR/ca/root_crl.pem) in the fleet's shared store (--store
    /// ldap://...), for a revocation made without it.
    ///
    /// Every master sharing the store takes it (when a command opens the store, and in `vouch
    /// serve`'s maintenance) if it is signed by its root and numbered higher than its own.
    /// One numbered as high or higher in the store stays there (exit 0, nothing changed).
    PublishCrl,
}

#[derive(Args, Debug)]
#[command(after_help = OUTPUT_RULE)]
pub struct ConductorSignArgs {
    /// The conductor's certificate (PEM or DER), carrying EKU 1.3.6.1.4.1.34380.2.0.
    #[arg(long, value_name = "FILE")]
    pub cert: PathBuf,
    /// The conductor's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// YAML classification file, or - for stdin.
    #[arg(long, value_name = "FILE")]
    pub classification: String,
    /// Lifetime of the attributes: 90s, 30m, 2h, 1d (the CA's policy caps it: 7d by default;
    /// vouch warns when the policy at hand, from --dir, VOUCH_POLICY or /etc/vouch, would refuse).
    #[arg(long, conflicts_with = "expires", required_unless_present = "expires", allow_hyphen_values = true)]
    pub expires_in: Option<String>,
    /// Absolute expiry, RFC 3339.
    #[arg(long)]
    pub expires: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FormatArg::PuppetYaml)]
    pub format: FormatArg,
    /// Write the attributes here, mode 0600 (an existing file is replaced; - or no --out: stdout).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// How attribute .2.4 carries the conductor certificate.
    #[arg(long, value_enum, default_value_t = CertEncodingArg::Base64Der)]
    pub cert_encoding: CertEncodingArg,
    /// The classification mirror extension request OID (must match the CA's policy).
    #[arg(long, default_value = "1.3.6.1.4.1.34380.1.2.5")]
    pub mirror_oid: String,
    /// Do not add the classification mirror extension request.
    #[arg(long)]
    pub no_mirror: bool,
    /// Bind the attributes to this certname (signature version 2, with a one-time nonce).
    #[arg(long)]
    pub certname: Option<String>,
    /// Signature version: 2 whenever --certname is given, else 1 (the seed's).
    #[arg(long, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u32>(s, 1, Some(2)))]
    pub version: Option<u32>,
}

#[derive(Args, Debug)]
#[command(after_help = OUTPUT_RULE)]
pub struct CsrArgs {
    /// The node's certname (the CSR's CN).
    #[arg(long)]
    pub certname: String,
    /// The attributes file written by 'vouch conductor sign' (yaml, txt, json or cloud-config).
    #[arg(long, value_name = "FILE")]
    pub attributes: PathBuf,
    /// The node's key type.
    #[arg(long, value_enum, default_value_t = KeyTypeArg::P256)]
    pub key_type: KeyTypeArg,
    /// Write the node's new private key here, mode 0600 (never replaces an existing file).
    #[arg(long, value_name = "FILE")]
    pub key_out: PathBuf,
    /// Write the CSR (PEM) here (never replaces an existing file).
    #[arg(long, value_name = "FILE")]
    pub csr_out: PathBuf,
}

#[derive(Args, Debug)]
pub struct AutosignArgs {
    /// The certname Puppet Server asks about; the CSR is read from stdin.
    pub certname: String,
    /// The policy [default: VOUCH_POLICY, then DIR/policy.toml, then /etc/vouch/policy.toml].
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
}

/// Upper bounds of `vouch serve`'s numeric limits (each also at least 1).
pub const MAX_BODY_LIMIT: u64 = 64 * 1024 * 1024;
pub const MAX_TIMEOUT_SECS: u64 = 3600;
pub const MAX_LIFETIME_SECS: u64 = 7 * 86_400;
pub const MAX_CONNECTIONS: u64 = 1_000_000;
pub const MAX_THREADS: u64 = 1024;

/// A numeric flag's value: a whole number from `min` to `max` (none: as large as `T` holds).
/// Every numeric flag takes a negative number as its value (`allow_negative_numbers`), so
/// that `--days -1` is refused here with the range instead of as an unknown flag `-1`.
fn whole_number<T: TryFrom<u64>>(s: &str, min: u64, max: Option<u64>) -> Result<T, String> {
    let range = match max {
        Some(max) => format!("a whole number from {min} to {max}"),
        None => format!("a whole number, at least {min}"),
    };
    // The largest value the flag takes: its own maximum, else the largest `T` holds.
    let largest = max.unwrap_or_else(|| {
        [u64::MAX, u64::from(u32::MAX), u64::from(u16::MAX), u64::from(u8::MAX)]
            .into_iter()
            .find(|n| T::try_from(*n).is_ok())
            .unwrap_or(0)
    });
    let t = s.trim();
    let too_large = || format!("{t} is too large: at most {largest}");
    match t.parse::<u64>() {
        Ok(n) if n > largest && n >= min => Err(too_large()),
        Ok(n) if n >= min => T::try_from(n).map_err(|_| too_large()),
        // A number (digits only) too large for any flag.
        Err(_) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => Err(too_large()),
        _ => Err(format!("must be {range}")),
    }
}

/// `--listen`/`--addr`: an IP address and a port, with the fix for a bare port or name.
fn parse_socket_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    s.parse::<std::net::SocketAddr>().map_err(|_| {
        let port = s.trim().trim_start_matches(':');
        if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
            format!("'{s}' is a port without an address: give 127.0.0.1:{port} (this host only) or 0.0.0.0:{port} (every interface; [::]:{port} for IPv6)")
        } else {
            format!("'{s}' is not an IP address and port such as 127.0.0.1:8140, 0.0.0.0:8140 or [::1]:8140 (host names are not accepted)")
        }
    })
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// IP address and port to listen on (0.0.0.0:8140 for every interface).
    #[arg(long, default_value = "127.0.0.1:8140", value_parser = parse_socket_addr)]
    pub listen: std::net::SocketAddr,
    /// A DNS name or IP address agents use to reach this service (repeatable); the first
    /// is the service certificate's certname [default: this host's name, localhost].
    #[arg(long = "server-name", value_parser = check_server_name)]
    pub server_names: Vec<String>,
    /// Key type for a CA created on the first run and for the service's certificate.
    #[arg(long, value_enum, default_value_t = KeyTypeArg::P256)]
    pub key_type: KeyTypeArg,
    /// Largest request body accepted, in bytes (1 to 67108864).
    #[arg(long, default_value_t = 256 * 1024, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(MAX_BODY_LIMIT)))]
    pub max_body: u64,
    /// Seconds allowed for a request's headers and for an idle kept-alive connection (1 to 3600).
    #[arg(long, default_value_t = 30, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(MAX_TIMEOUT_SECS)))]
    pub header_timeout: u64,
    /// Seconds allowed for a request body and for the TLS handshake (1 to 3600).
    #[arg(long, default_value_t = 30, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(MAX_TIMEOUT_SECS)))]
    pub body_timeout: u64,
    /// Connections served at once, 1 to 1000000 (more wait in the kernel's backlog).
    #[arg(long, default_value_t = 1024, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(MAX_CONNECTIONS)))]
    pub max_connections: u64,
    /// Connections from one client address at once, 1 to 1000000 (more are closed at once); once half of --max-connections are in use, a sixteenth of them per address and a quarter per /24.
    #[arg(long, default_value_t = 256, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(MAX_CONNECTIONS)))]
    pub max_connections_per_address: u64,
    /// Seconds a connection may stay open, whatever it does (1 to 604800).
    #[arg(long, default_value_t = 300, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(MAX_LIFETIME_SECS)))]
    pub connection_lifetime: u64,
    /// Worker threads, 1 to 1024 [default: one per core].
    #[arg(long, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(MAX_THREADS)))]
    pub threads: Option<u64>,
    /// Also serve Prometheus metrics over plain HTTP at http://ADDR/metrics, such as
    /// 127.0.0.1:9140 (this host only) [default: no metrics].
    #[arg(long, env = "VOUCH_METRICS_LISTEN", value_name = "ADDR", value_parser = parse_socket_addr)]
    pub metrics_listen: Option<std::net::SocketAddr>,
}

/// `vouch bench` (a vouch built with `--features bench`).
#[cfg(feature = "bench")]
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Decision, and decision + issuance (no store), per core, next to the signature floor.
    Decide {
        /// CA key types, comma-separated.
        #[arg(long, value_enum, value_delimiter = ',', default_value = "rsa4096,rsa2048,p256,ed25519")]
        ca_keys: Vec<KeyTypeArg>,
        /// Client (agent) key types, comma-separated.
        #[arg(long, value_enum, value_delimiter = ',', default_value = "rsa2048,rsa4096,p256")]
        client_keys: Vec<KeyTypeArg>,
        /// Seconds spent on each measurement (0.01 to 600).
        #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
        seconds: f64,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutFormat::Text)]
        format: OutFormat,
    },
    /// `vouch autosign` as Puppet Server runs it: process start to exit, median and p99.
    Hook {
        /// How many times the hook runs (1 to 100000).
        #[arg(long, default_value_t = 200, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(100_000)))]
        runs: u64,
        /// Without the replay journal and the audit log (no fsync).
        #[arg(long)]
        no_journal: bool,
    },
    /// N agents at once against a CA service (vouch serve or Puppet Server): PUT + GET each.
    Serve {
        /// The service's IP address and port.
        #[arg(long, default_value = "127.0.0.1:8140", value_parser = parse_socket_addr)]
        addr: std::net::SocketAddr,
        /// The name its certificate carries.
        #[arg(long, default_value = "localhost")]
        host: String,
        /// The CA bundle to trust [default: DIR/ca/ca_bundle.pem].
        #[arg(long, value_name = "FILE")]
        ca_bundle: Option<PathBuf>,
        /// The conductor certificate that vouches for the CSRs [default: DIR/conductor/conductor_crt.pem].
        #[arg(long, value_name = "FILE")]
        conductor_cert: Option<PathBuf>,
        /// The conductor's private key [default: DIR/conductor/conductor_key.pem].
        #[arg(long, value_name = "FILE")]
        conductor_key: Option<PathBuf>,
        /// Concurrency levels, comma-separated.
        #[arg(long, default_value = "1,8,64,256")]
        agents: String,
        /// Certificates each agent asks for (1 to 100000).
        #[arg(long, default_value_t = 10, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(100_000)))]
        per_agent: u64,
        /// The agents' key type (Puppet agents: RSA).
        #[arg(long, value_enum, default_value_t = KeyTypeArg::Rsa2048)]
        client_key: KeyTypeArg,
        /// The server's PID, to report its peak RSS.
        #[arg(long, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u32>(s, 1, None))]
        server_pid: Option<u32>,
        /// Each certificate is a whole agent bootstrap, as `puppet ssl bootstrap` does it: a new
        /// TLS connection, GET the CA bundle, GET the CRLs (no copy yet), PUT the CSR, GET the certificate.
        #[arg(long)]
        bootstrap: bool,
        /// Do not ask for gzip-compressed answers (Puppet's agents do: `Accept-Encoding: gzip`).
        #[arg(long)]
        no_gzip: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutFormat::Text)]
        format: OutFormat,
    },
}

#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// Issue an administrator certificate (clientAuth, pp_cli_auth) from the master CA.
    #[command(after_help = OUTPUT_RULE)]
    New {
        /// The administrator's certname.
        name: String,
        /// Write the administrator's certificate here (never replaces an existing file).
        #[arg(long, value_name = "FILE")]
        cert_out: PathBuf,
        /// Write the administrator's private key here, mode 0600 (never replaces an existing file).
        #[arg(long, value_name = "FILE")]
        key_out: PathBuf,
        /// The administrator's key type.
        #[arg(long, value_enum, default_value_t = KeyTypeArg::P256)]
        key_type: KeyTypeArg,
    },
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The certificate request (PEM or DER) to explain.
    #[arg(long, value_name = "FILE")]
    pub csr: PathBuf,
    /// The certname (default: the CSR's CN).
    #[arg(long)]
    pub certname: Option<String>,
    /// The policy [default: VOUCH_POLICY, then DIR/policy.toml, then /etc/vouch/policy.toml].
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutFormat::Text)]
    pub format: OutFormat,
}

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormatArg {
    /// One JSON object per line.
    Json,
    /// Human-readable lines.
    Text,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutFormat {
    Text,
    Json,
}

/// `vouch list --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    /// Sections: requested, signed, revoked.
    Text,
    /// One JSON array of objects (name, state, serial, not_after, reasons).
    Json,
    /// The same objects, one per line (JSON lines).
    Jsonl,
}

// `check_server_name`: one source, also compiled as `vouch::encoding::server_name` (the
// library checks `ServeOptions` with it); `include!` keeps this file clap + std only.
include!("../encoding/server_name.rs");

/// A key type for CAs, conductors and nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum KeyTypeArg {
    /// ECDSA on NIST P-256 with SHA-256 (the default).
    #[default]
    P256,
    /// ECDSA on NIST P-384 with SHA-384.
    P384,
    /// Ed25519.
    Ed25519,
    /// RSA 2048-bit, PKCS#1 v1.5 with SHA-256.
    Rsa2048,
    /// RSA 3072-bit.
    Rsa3072,
    /// RSA 4096-bit (Puppet's default).
    Rsa4096,
}

/// Output formats of `vouch conductor sign`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum FormatArg {
    /// Puppet's csr_attributes.yaml, values quoted for Puppet's safe_load.
    #[default]
    PuppetYaml,
    /// The seed's csr_attributes.txt: `OID = value` lines.
    Txt,
    /// A #cloud-config document with puppet: csr_attributes:.
    CloudConfig,
    /// JSON: {"custom_attributes": {...}, "extension_requests": {...}}.
    Json,
}

/// How the conductor certificate travels in attribute .2.4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum CertEncodingArg {
    /// Standard base64 of the DER certificate on one line (default: fits every format).
    #[default]
    Base64Der,
    /// PEM, as in the seed's example (multi-line: not for the txt format).
    Pem,
}
