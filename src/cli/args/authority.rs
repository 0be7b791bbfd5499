//! The CA, its conductors and its administrators: `vouch ca`, `vouch conductor`, `vouch admin`;
//! and the templates conductors sign: `vouch template`.

use super::formats::{CertEncodingArg, FormatArg, KeyTypeArg, OutFormat};
use super::values::{count_value, whole_number, OUTPUT_RULE};
use clap::{Args, Subcommand};
use std::path::PathBuf;

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
    #[arg(long, conflicts_with = "template")]
    pub certname: Option<String>,
    /// Signature version: 2 whenever --certname is given, 3 with --template, else 1 (the seed's).
    #[arg(long, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u32>(s, 1, Some(3)))]
    pub version: Option<u32>,
    /// Sign a template for an autoscaling group (signature version 3): one set of attributes
    /// for every instance, good for --max-uses certificates whose names match
    /// --certname-pattern, until it expires.
    #[arg(long, requires_all = ["certname_pattern", "max_uses"])]
    pub template: bool,
    /// The template's certname pattern: PREFIX*.DOMAIN, e.g. 'web-*.asg.example.com' (`*`:
    /// one or more letters, digits, '-' or '_', never a dot).
    #[arg(long, value_name = "PATTERN", requires = "template")]
    pub certname_pattern: Option<String>,
    /// At most how many certificates the template yields: from 1 to the CA policy's
    /// templates.max_uses (at most 1000000).
    #[arg(long, value_name = "N", requires = "template", allow_negative_numbers = true, value_parser = count_value)]
    pub max_uses: Option<u64>,
    /// Bind the template to the instance's identity document: 'aws:{instance-id}.DOMAIN'
    /// (the certname derived from the instance id). Without it the template is unbound:
    /// whoever reads the user-data can enroll names matching the pattern.
    #[arg(long, value_name = "BINDING", requires = "template")]
    pub identity_binding: Option<String>,
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

/// `vouch template`: templates for autoscaling groups (signature version 3).
#[derive(Subcommand, Debug)]
pub enum TemplateCommand {
    /// How many of a template's uses are spent and how many are left, as this CA's store
    /// counts them for the whole fleet (the data directory's replay journal, or the shared
    /// store with --store); reads, never counts.
    Uses {
        /// The template's attributes as `vouch conductor sign --template` wrote them (any
        /// --format: csr_attributes.yaml, cloud-config, JSON, text).
        #[arg(value_name = "TEMPLATE-FILE")]
        file: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutFormat::Text)]
        format: OutFormat,
    },
}
