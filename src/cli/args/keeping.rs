//! Keeping the store: `vouch store`, `vouch ldap`, `vouch override`, `vouch reconcile`,
//! `vouch audit`.

use super::formats::{OutFormat, ReportFormat, VerifyFormat};
use super::values::{ds389_backend, whole_number};
use clap::{Args, Subcommand};
use std::path::PathBuf;

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

#[derive(Subcommand, Debug)]
pub enum LdapCommand {
    /// Print vouch's LDAP schema: for slapd.conf (include it after core.schema), with
    /// --ldif (or --format cn-config) for cn=config (ldapadd -Y EXTERNAL -H ldapi:/// -f FILE),
    /// or with --format 389ds for 389 Directory Server (ldapmodify -c -D "cn=Directory
    /// Manager" -W -f FILE: the schema into cn=schema, the indexes and their reindex task).
    Schema {
        /// The cn=config LDIF form (the same as --format cn-config).
        #[arg(long, conflicts_with = "format")]
        ldif: bool,
        /// Which server's form: slapd-conf (the default), cn-config, 389ds.
        #[arg(long, value_enum)]
        format: Option<SchemaFormat>,
        /// With --format 389ds: the backend that holds the store's base DN (its indexes, and
        /// the reindex task's nsInstance).
        #[arg(long, value_name = "NAME", default_value = "userRoot", value_parser = ds389_backend)]
        backend: String,
    },
    /// Create the store's containers under --store's base DN (which must exist). Idempotent.
    Init {
        /// Also create the base DN itself, if it is an ou= whose parent exists.
        #[arg(long)]
        create_base: bool,
    },
}

/// The forms `vouch ldap schema` prints.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaFormat {
    /// OpenLDAP's slapd.conf (`include`).
    SlapdConf,
    /// OpenLDAP's cn=config (an LDIF entry for ldapadd).
    CnConfig,
    /// 389 Directory Server (an LDIF of changes for ldapmodify as cn=Directory Manager).
    #[value(name = "389ds")]
    Ds389,
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
