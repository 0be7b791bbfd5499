//! The value enums of vouch's flags (`--format`, `--output`, `--key-type`, ...): the command
//! code converts them into the library's types.

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

/// Report formats of `vouch reconcile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ReportFormat {
    #[default]
    Text,
    Json,
    Yaml,
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
