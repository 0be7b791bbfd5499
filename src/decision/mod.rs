//! The autosign decision: a pure function of the CSR bytes, the certname asked
//! about, the policy (with its trust anchors) and the time. No I/O, no clock.
//!
//! It returns a [`Grant`], which only this module can construct and which
//! issuance consumes, or every [`Refusal`] that applies.

// A refusal carries every reason and who vouched; it is returned once per decision,
// so its size does not matter.
#![allow(clippy::result_large_err)]

use crate::encoding::csr::{self, Csr, CsrError, KeyKind};
use crate::encoding::der::tag;
use crate::encoding::hex;
use crate::encoding::oids;
use crate::policy::{Policy, Scope};
use crate::vouching::attrs;
use crate::vouching::classification::{Classification, ClassificationError};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rustls_pki_types::{CertificateDer, UnixTime};
use time::OffsetDateTime;

/// What is wrong with a certname.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CertnameProblem {
    Empty,
    TooLong,
    Uppercase,
    Wildcard,
    TrailingDot,
    EmptyLabel,
    LabelTooLong,
    LabelHyphen,
    InvalidCharacter(char),
}

impl std::fmt::Display for CertnameProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CertnameProblem::Empty => f.write_str("it is empty"),
            CertnameProblem::TooLong => write!(f, "it is longer than {MAX_CERTNAME} characters"),
            CertnameProblem::Uppercase => f.write_str("it has uppercase letters (Puppet certnames are lowercase)"),
            CertnameProblem::Wildcard => f.write_str("it is a wildcard"),
            CertnameProblem::TrailingDot => f.write_str("it ends with a dot"),
            CertnameProblem::EmptyLabel => f.write_str("it has an empty label (two dots in a row, or a leading dot)"),
            CertnameProblem::LabelTooLong => f.write_str("a label is longer than 63 characters"),
            CertnameProblem::LabelHyphen => f.write_str("a label starts or ends with a hyphen"),
            CertnameProblem::InvalidCharacter(c) => write!(f, "it contains the character {c:?}"),
        }
    }
}

impl std::error::Error for CertnameProblem {}

/// Checks a certname against host-name rules as Puppet uses them: lowercase
/// labels of letters, digits, `-` and `_`, separated by dots.
/// The longest certname: a DNS name may have 253 characters, but the store names files
/// (and their temporary copies, `.NAME.pem.tmp-PID-TIME-N`) after it, and a file name
/// has at most 255 bytes; 200 leaves room, and no real host name comes near it.
pub const MAX_CERTNAME: usize = 200;

pub fn check_certname(name: &str) -> Result<(), CertnameProblem> {
    if name.is_empty() {
        return Err(CertnameProblem::Empty);
    }
    if name.len() > MAX_CERTNAME {
        return Err(CertnameProblem::TooLong);
    }
    if name.contains('*') {
        return Err(CertnameProblem::Wildcard);
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))) {
        return Err(CertnameProblem::InvalidCharacter(c));
    }
    if name.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(CertnameProblem::Uppercase);
    }
    if name.ends_with('.') {
        return Err(CertnameProblem::TrailingDot);
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(CertnameProblem::EmptyLabel);
        }
        if label.len() > 63 {
            return Err(CertnameProblem::LabelTooLong);
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(CertnameProblem::LabelHyphen);
        }
    }
    Ok(())
}

/// Certnames Puppet reserves, which no node may be issued. Puppet 7 reserves exactly one:
/// - puppet-agent 7.23 `lib/puppet/defaults.rb`, setting `certname`: "The special value `ca`
///   is reserved, and can't be used as the certname for a normal node" (`Puppet::SSL::CA_NAME`,
///   `lib/puppet/ssl.rb`; `ssl/certificate_request.rb` swaps it for `ca_name` in a CSR);
/// - puppetserver 7.9 `puppetlabs/puppetserver/certificate_authority.clj`, `get-certificate`:
///   for the subject "ca" it answers the CA certificate (`cacert`), never `signed/ca.pem`;
///   `certificate_revocation_list/ca` is the CA's CRL. (`validate-subject!` checks only
///   syntax, so Puppet Server's own CA would sign a "ca" CSR that nobody can ever fetch.)
///
/// vouch serves the same routes (`GET certificate/ca` is the CA bundle): a certificate
/// for "ca" could never be downloaded, and issuing it would spend the attributes.
pub const RESERVED_CERTNAMES: &[&str] = &["ca"];

/// Whether Puppet reserves `name` (see [`RESERVED_CERTNAMES`]).
pub fn is_reserved_certname(name: &str) -> bool {
    RESERVED_CERTNAMES.contains(&name)
}

/// One reason to refuse a CSR. Each has a stable [`code`](Refusal::code), a
/// message and a hint.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The input holds no CSR.
    CsrMissing { detail: String },
    /// The CSR's structure is broken.
    CsrMalformed { detail: String },
    /// The CSR's self-signature does not verify.
    CsrSignatureInvalid,
    /// The CSR is signed with an algorithm vouch does not verify.
    CsrSignatureAlgorithmUnsupported { oid: String },
    /// The CSR's key type is not accepted.
    CsrKeyUnsupported { detail: String },
    /// The certname asked about is not a valid certname.
    CertnameInvalid { certname: String, problem: CertnameProblem },
    /// The certname is one Puppet reserves (`ca`).
    CertnameReserved { certname: String },
    /// The CSR has no commonName, or several.
    CommonNameCount { count: usize },
    /// The CSR's CN differs from the certname.
    CommonNameMismatch { common_name: String, certname: String },
    /// A required attribute is absent.
    AttributeMissing { oid: String },
    /// An attribute appears more than once.
    AttributeDuplicated { oid: String, count: usize },
    /// An attribute's SET holds other than one value.
    AttributeValueCount { oid: String, count: usize },
    /// An attribute value is not a string type, or not UTF-8.
    AttributeNotText { oid: String },
    /// An attribute in the vouch arc that this version does not define.
    AttributeUnexpected { oid: String },
    /// The version attribute is not a canonical decimal integer.
    VersionMalformed { value: String },
    /// The version is not one the policy accepts.
    VersionUnsupported { version: String, accepted: Vec<u32> },
    /// The expiry is not RFC 3339.
    ExpiryMalformed { value: String },
    /// The attributes have expired.
    AttributesExpired { expiry: String, now: String },
    /// The expiry lies further ahead than the policy allows.
    ExpiryTooFar { expiry: String, max_lifetime: String },
    /// The conductor certificate cannot be decoded or parsed.
    ConductorMalformed { detail: String },
    /// The conductor certificate is not yet valid.
    ConductorNotYetValid { subject: String },
    /// The conductor certificate has expired.
    ConductorExpired { subject: String },
    /// The conductor certificate does not chain to a trusted root.
    ConductorUntrusted { subject: String, detail: String },
    /// The conductor's own certificate lacks EKU .2.0.
    ConductorEkuMissing { subject: String },
    /// The conductor's own certificate lacks key usage digitalSignature.
    ConductorKeyUsageMissing { subject: String },
    /// The signature attribute is not base64.
    SignatureMalformed { detail: String },
    /// The signature does not verify with the conductor's key.
    SignatureInvalid { subject: String },
    /// The conductor's key type cannot sign attributes.
    SignatureKeyUnsupported { detail: String },
    /// The classification is unusable.
    ClassificationInvalid { error: ClassificationError },
    /// The classification has no exact JSON form for the ENC to print (a key that is not
    /// a string, a `<<` key, a float that is not finite).
    ClassificationUnrepresentable { detail: String },
    /// More than one extensionRequest attribute, or msExtReq.
    ExtensionRequestAmbiguous { detail: String },
    /// The same extension requested twice.
    ExtensionDuplicated { oid: String },
    /// An extension request is marked critical (in hook mode Puppet Server would copy it so).
    ExtensionCritical { oid: String },
    /// A subjectAltName was requested.
    SubjectAltNameRequested,
    /// An extension in the ppAuthCertExt arc (pp_cli_auth, pp_auth_role…) was requested.
    AuthorizationExtensionRequested { oid: String },
    /// A pp_* extension the policy does not allow.
    PuppetExtensionNotAllowed { oid: String },
    /// Any other extension the policy does not allow.
    ExtensionNotAllowed { oid: String },
    /// The classification mirror request differs from the signed classification.
    MirrorMismatch { oid: String },
    /// The policy requires the mirror request and it is absent.
    MirrorMissing { oid: String },
    /// Version 2: the CSR asks for another certname than the conductor signed.
    CertnameNotVouched { signed: String, certname: String },
    /// Version 2: the nonce is not 32–128 lowercase hex digits.
    NonceMalformed { value: String },
    /// Scopes are defined and this conductor matches none.
    ConductorUnscoped { subject: String },
    /// The conductor's scope does not cover this certname.
    CertnameOutOfScope { scope: String, certname: String },
    /// The conductor's scope does not allow this class.
    ClassOutOfScope { scope: String, class: String },
    /// The conductor's scope does not allow this environment (or none was set).
    EnvironmentOutOfScope { scope: String, environment: String },
    /// The conductor's scope does not allow this top-level parameter.
    ParameterOutOfScope { scope: String, parameter: String },
    /// The attributes live longer than the conductor's scope allows.
    LifetimeOutOfScope { scope: String, max_lifetime: String },
    /// The conductor certificate is on its issuer's CRL.
    ConductorRevoked { subject: String },
    /// These attributes were already used (one-time use).
    AttributesReplayed { first_certname: String, first_time: String },
    /// The certname already has a valid certificate (issuance: on_existing = refuse).
    CertificateExists { certname: String, serial: String },
    /// Superseding requires a new key (issuance: on_existing = supersede).
    SupersedeSameKey { certname: String },
    /// Superseding requires attributes that expire later than the old certificate's.
    SupersedeReplay { certname: String },
    /// Renewal: the store does not hold the certificate of the conductor that vouched
    /// (issued before vouch recorded it), so it cannot be checked again.
    ConductorNotRecorded { certname: String },
    /// The certname (or a subjectAltName asked for) is a name of this CA's own service or of
    /// an administrator: never a node's, and never superseded (issuance).
    NameReserved { certname: String, name: String, holder: String },
}

impl Refusal {
    /// A refusal because the certname already has a valid certificate (found under the
    /// store's lock): such a request is never kept pending beside that certificate.
    pub fn is_about_the_existing_certificate(&self) -> bool {
        matches!(
            self,
            Refusal::CertificateExists { .. } | Refusal::SupersedeSameKey { .. } | Refusal::SupersedeReplay { .. }
        )
    }

    /// A stable short code, for logs, JSON and tests.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::CsrMissing { .. } => "csr-missing",
            Refusal::CsrMalformed { .. } => "csr-malformed",
            Refusal::CsrSignatureInvalid => "csr-signature-invalid",
            Refusal::CsrSignatureAlgorithmUnsupported { .. } => "csr-signature-algorithm-unsupported",
            Refusal::CsrKeyUnsupported { .. } => "csr-key-unsupported",
            Refusal::CertnameInvalid { .. } => "certname-invalid",
            Refusal::CertnameReserved { .. } => "certname-reserved",
            Refusal::CommonNameCount { .. } => "common-name-count",
            Refusal::CommonNameMismatch { .. } => "common-name-mismatch",
            Refusal::AttributeMissing { .. } => "attribute-missing",
            Refusal::AttributeDuplicated { .. } => "attribute-duplicated",
            Refusal::AttributeValueCount { .. } => "attribute-value-count",
            Refusal::AttributeNotText { .. } => "attribute-not-text",
            Refusal::AttributeUnexpected { .. } => "attribute-unexpected",
            Refusal::VersionMalformed { .. } => "version-malformed",
            Refusal::VersionUnsupported { .. } => "version-unsupported",
            Refusal::ExpiryMalformed { .. } => "expiry-malformed",
            Refusal::AttributesExpired { .. } => "attributes-expired",
            Refusal::ExpiryTooFar { .. } => "expiry-too-far",
            Refusal::ConductorMalformed { .. } => "conductor-malformed",
            Refusal::ConductorNotYetValid { .. } => "conductor-not-yet-valid",
            Refusal::ConductorExpired { .. } => "conductor-expired",
            Refusal::ConductorUntrusted { .. } => "conductor-untrusted",
            Refusal::ConductorEkuMissing { .. } => "conductor-eku-missing",
            Refusal::ConductorKeyUsageMissing { .. } => "conductor-key-usage-missing",
            Refusal::SignatureMalformed { .. } => "signature-malformed",
            Refusal::SignatureInvalid { .. } => "signature-invalid",
            Refusal::SignatureKeyUnsupported { .. } => "signature-key-unsupported",
            Refusal::ClassificationInvalid { .. } => "classification-invalid",
            Refusal::ClassificationUnrepresentable { .. } => "classification-unrepresentable",
            Refusal::ExtensionRequestAmbiguous { .. } => "extension-request-ambiguous",
            Refusal::ExtensionDuplicated { .. } => "extension-duplicated",
            Refusal::ExtensionCritical { .. } => "extension-critical",
            Refusal::SubjectAltNameRequested => "subject-alt-name-requested",
            Refusal::AuthorizationExtensionRequested { .. } => "authorization-extension-requested",
            Refusal::PuppetExtensionNotAllowed { .. } => "puppet-extension-not-allowed",
            Refusal::ExtensionNotAllowed { .. } => "extension-not-allowed",
            Refusal::MirrorMismatch { .. } => "mirror-mismatch",
            Refusal::MirrorMissing { .. } => "mirror-missing",
            Refusal::CertnameNotVouched { .. } => "certname-not-vouched",
            Refusal::ConductorUnscoped { .. } => "conductor-unscoped",
            Refusal::CertnameOutOfScope { .. } => "certname-out-of-scope",
            Refusal::ClassOutOfScope { .. } => "class-out-of-scope",
            Refusal::EnvironmentOutOfScope { .. } => "environment-out-of-scope",
            Refusal::ParameterOutOfScope { .. } => "parameter-out-of-scope",
            Refusal::LifetimeOutOfScope { .. } => "lifetime-out-of-scope",
            Refusal::ConductorRevoked { .. } => "conductor-revoked",
            Refusal::NonceMalformed { .. } => "nonce-malformed",
            Refusal::AttributesReplayed { .. } => "attributes-replayed",
            Refusal::CertificateExists { .. } => "certificate-exists",
            Refusal::SupersedeSameKey { .. } => "supersede-same-key",
            Refusal::SupersedeReplay { .. } => "supersede-replay",
            Refusal::ConductorNotRecorded { .. } => "conductor-not-recorded",
            Refusal::NameReserved { .. } => "name-reserved",
        }
    }

    /// What to do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            Refusal::CsrMissing { .. } | Refusal::CsrMalformed { .. } => {
                "send the PEM certificate request exactly as the agent produced it"
            }
            Refusal::CsrSignatureInvalid => "the request was altered after the agent signed it; make a new one",
            Refusal::CsrSignatureAlgorithmUnsupported { .. } | Refusal::CsrKeyUnsupported { .. } => {
                "use an RSA (2048+ bits), ECDSA P-256/P-384 or Ed25519 agent key"
            }
            Refusal::CertnameInvalid { .. } => "use a lowercase host name without wildcards, e.g. web01.example.com",
            Refusal::CertnameReserved { .. } => {
                "give the node another certname (puppet.conf certname = its host name); Puppet keeps 'ca' for the CA itself"
            }
            Refusal::CommonNameCount { .. } | Refusal::CommonNameMismatch { .. } => {
                "the CSR subject must be CN=<certname>, exactly the name the agent asks for"
            }
            Refusal::AttributeMissing { .. }
            | Refusal::AttributeDuplicated { .. }
            | Refusal::AttributeValueCount { .. }
            | Refusal::AttributeNotText { .. }
            | Refusal::AttributeUnexpected { .. } => {
                "put the csr_attributes.yaml written by 'vouch conductor sign' on the node, unchanged"
            }
            Refusal::VersionMalformed { .. } | Refusal::VersionUnsupported { .. } => {
                "sign with a vouch version the policy accepts (attributes.versions)"
            }
            Refusal::ExpiryMalformed { .. } => "the expiry must be RFC 3339, e.g. 2030-01-01T00:00:00Z",
            Refusal::AttributesExpired { .. } => "have the conductor sign fresh attributes for this node",
            Refusal::ExpiryTooFar { .. } => "sign with a shorter --expires-in, or raise attributes.max_lifetime",
            Refusal::ConductorMalformed { .. } => "attribute .2.4 must hold the conductor certificate (PEM or base64 DER)",
            Refusal::ConductorNotYetValid { .. } | Refusal::ConductorExpired { .. } => {
                "renew the conductor certificate (vouch conductor new) and check the clocks"
            }
            Refusal::ConductorUntrusted { .. } => {
                "issue the conductor from a root in conductors.trusted_roots, listing any intermediate in conductors.intermediates"
            }
            Refusal::ConductorEkuMissing { .. } => {
                "the conductor certificate itself must carry EKU 1.3.6.1.4.1.34380.2.0 (vouch conductor new adds it)"
            }
            Refusal::ConductorKeyUsageMissing { .. } => "the conductor certificate must carry key usage digitalSignature",
            Refusal::SignatureMalformed { .. } | Refusal::SignatureInvalid { .. } => {
                "a signed value was changed after signing, or another key signed it; sign again with the conductor's own key"
            }
            Refusal::SignatureKeyUnsupported { .. } => "use an RSA, ECDSA P-256/P-384 or Ed25519 conductor key",
            Refusal::ClassificationInvalid { error } => error.hint().unwrap_or(
                "the classification must be base64 of a YAML mapping with classes, parameters and/or environment",
            ),
            Refusal::ClassificationUnrepresentable { .. } => {
                "use only string keys (quote them: '1': x), no '<<' key and finite numbers; the ENC prints JSON"
            }
            Refusal::ExtensionRequestAmbiguous { .. } | Refusal::ExtensionDuplicated { .. } => {
                "request each extension once, in one extensionRequest attribute"
            }
            Refusal::ExtensionCritical { .. } => {
                "request extensions as non-critical, as Puppet agents do (csr_attributes.yaml extension_requests)"
            }
            Refusal::SubjectAltNameRequested => "remove subjectAltName from the request, or set extensions.allow_subject_alt_names",
            Refusal::AuthorizationExtensionRequested { .. } => {
                "authorization extensions grant API rights and are never autosigned; sign such a request by hand"
            }
            Refusal::PuppetExtensionNotAllowed { .. } | Refusal::ExtensionNotAllowed { .. } => {
                "remove the extension request, or list it in the policy's extensions.allow"
            }
            Refusal::MirrorMismatch { .. } | Refusal::MirrorMissing { .. } => {
                "use the extension_requests written by 'vouch conductor sign', unchanged"
            }
            Refusal::CertnameNotVouched { .. } => {
                "the conductor vouched for another name; sign attributes for this certname (--certname)"
            }
            Refusal::NonceMalformed { .. } => "use the attributes written by 'vouch conductor sign', unchanged",
            Refusal::ConductorUnscoped { .. } => "add a [[conductor]] scope for it to the policy, or remove all scopes",
            Refusal::CertnameOutOfScope { .. }
            | Refusal::ClassOutOfScope { .. }
            | Refusal::EnvironmentOutOfScope { .. }
            | Refusal::ParameterOutOfScope { .. }
            | Refusal::LifetimeOutOfScope { .. } => {
                "this conductor may not vouch for that; use the conductor in charge of it, or widen its [[conductor]] scope"
            }
            Refusal::ConductorRevoked { .. } => "the conductor's certificate was revoked; issue it a new one",
            Refusal::AttributesReplayed { .. } => {
                "attributes are good for one certificate; have the conductor sign fresh ones for this node"
            }
            Refusal::CertificateExists { .. } => {
                "run 'vouch clean NAME' to retire the old certificate, or set issuance.on_existing = \"supersede\""
            }
            Refusal::SupersedeSameKey { .. } => "the same key is a renewal: use 'vouch renew NAME'",
            Refusal::SupersedeReplay { .. } => "have the conductor sign fresh attributes for the reinstalled host",
            Refusal::ConductorNotRecorded { .. } => {
                "have a conductor vouch for the node again: 'vouch clean NAME', then sign a new vouched CSR"
            }
            Refusal::NameReserved { .. } => {
                "set certname in the agent's puppet.conf to the name the conductor signed (--certname), \
                 not this host's name nor a name of the CA service"
            }
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::CsrMissing { detail } => write!(f, "no certificate request: {detail}"),
            Refusal::CsrMalformed { detail } => write!(f, "the certificate request is malformed: {detail}"),
            Refusal::CsrSignatureInvalid => f.write_str("the certificate request's self-signature does not verify"),
            Refusal::CsrSignatureAlgorithmUnsupported { oid } => {
                write!(f, "the certificate request is signed with unsupported algorithm {oid}")
            }
            Refusal::CsrKeyUnsupported { detail } => write!(f, "the certificate request's key is unsupported: {detail}"),
            Refusal::CertnameInvalid { certname, problem } => write!(f, "certname {certname:?} is invalid: {problem}"),
            Refusal::CertnameReserved { certname } => write!(
                f,
                "certname {certname:?} is reserved by Puppet: 'GET certificate/{certname}' answers the CA's \
                 own certificate, so a node could never fetch one issued under it"
            ),
            Refusal::CommonNameCount { count } => write!(f, "the CSR subject has {count} commonNames; exactly one is required"),
            Refusal::CommonNameMismatch { common_name, certname } => {
                write!(f, "the CSR's CN {common_name:?} differs from the certname {certname:?}")
            }
            Refusal::AttributeMissing { oid } => write!(f, "attribute {oid} is missing"),
            Refusal::AttributeDuplicated { oid, count } => write!(f, "attribute {oid} appears {count} times"),
            Refusal::AttributeValueCount { oid, count } => {
                write!(f, "attribute {oid} has {count} values; exactly one is required")
            }
            Refusal::AttributeNotText { oid } => write!(f, "attribute {oid} is not a UTF-8 string"),
            Refusal::AttributeUnexpected { oid } => write!(f, "attribute {oid} is not defined by the signature version"),
            Refusal::VersionMalformed { value } => write!(f, "signature version {value:?} is not a plain decimal integer"),
            Refusal::VersionUnsupported { version, accepted } => {
                write!(f, "signature version {version} is not accepted (policy accepts {accepted:?})")
            }
            Refusal::ExpiryMalformed { value } => write!(f, "expiry {value:?} is not an RFC 3339 date-time"),
            Refusal::AttributesExpired { expiry, now } => write!(f, "the attributes expired at {expiry} (now {now})"),
            Refusal::ExpiryTooFar { expiry, max_lifetime } => {
                write!(f, "expiry {expiry} is further ahead than the policy's maximum of {max_lifetime}")
            }
            Refusal::ConductorMalformed { detail } => write!(f, "the conductor certificate is unreadable: {detail}"),
            Refusal::ConductorNotYetValid { subject } => write!(f, "conductor certificate {subject} is not yet valid"),
            Refusal::ConductorExpired { subject } => write!(f, "conductor certificate {subject} has expired"),
            Refusal::ConductorUntrusted { subject, detail } => {
                write!(f, "conductor certificate {subject} does not chain to a trusted root: {detail}")
            }
            Refusal::ConductorEkuMissing { subject } => write!(
                f,
                "conductor certificate {subject} lacks the extended key usage 1.3.6.1.4.1.34380.2.0 (allowed to create new instances)"
            ),
            Refusal::ConductorKeyUsageMissing { subject } => {
                write!(f, "conductor certificate {subject} lacks the key usage digitalSignature")
            }
            Refusal::SignatureMalformed { detail } => write!(f, "the signature attribute is not base64: {detail}"),
            Refusal::SignatureInvalid { subject } => {
                write!(f, "the attribute signature does not verify with the key of conductor {subject}")
            }
            Refusal::SignatureKeyUnsupported { detail } => write!(f, "the conductor's key cannot sign attributes: {detail}"),
            Refusal::ClassificationInvalid { error } => write!(f, "{error}"),
            Refusal::ClassificationUnrepresentable { detail } => write!(
                f,
                "the classification cannot be handed to Puppet exactly as signed (the ENC prints JSON): {detail}"
            ),
            Refusal::ExtensionRequestAmbiguous { detail } => write!(f, "ambiguous extension requests: {detail}"),
            Refusal::ExtensionDuplicated { oid } => write!(f, "extension {oid} is requested more than once"),
            Refusal::ExtensionCritical { oid } => write!(
                f,
                "extension {oid} is requested as critical; no requested extension may be critical \
                 (Puppet Server would copy it into the certificate as critical)"
            ),
            Refusal::SubjectAltNameRequested => f.write_str("the CSR requests subjectAltNames, which the policy does not allow"),
            Refusal::AuthorizationExtensionRequested { oid } => {
                write!(f, "the CSR requests the authorization extension {oid}")
            }
            Refusal::PuppetExtensionNotAllowed { oid } => {
                write!(f, "the CSR requests the Puppet extension {oid}, which the policy does not allow")
            }
            Refusal::ExtensionNotAllowed { oid } => write!(f, "the CSR requests extension {oid}, which the policy does not allow"),
            Refusal::MirrorMismatch { oid } => {
                write!(f, "the classification mirror request {oid} differs from the signed classification")
            }
            Refusal::MirrorMissing { oid } => write!(f, "the policy requires the classification mirror request {oid}"),
            Refusal::CertnameNotVouched { signed, certname } => {
                write!(f, "the conductor vouched for {signed:?}, not for the certname {certname:?}")
            }
            Refusal::NonceMalformed { value } => write!(f, "nonce {value:?} is not 32 to 128 lowercase hex digits"),
            Refusal::ConductorUnscoped { subject } => write!(f, "conductor {subject} matches no [[conductor]] scope"),
            Refusal::CertnameOutOfScope { scope, certname } => {
                write!(f, "scope '{scope}' does not allow the certname {certname:?}")
            }
            Refusal::ClassOutOfScope { scope, class } => write!(f, "scope '{scope}' does not allow the class {class:?}"),
            Refusal::EnvironmentOutOfScope { scope, environment } => {
                write!(f, "scope '{scope}' does not allow the environment {environment}")
            }
            Refusal::ParameterOutOfScope { scope, parameter } => {
                write!(f, "scope '{scope}' does not allow the parameter {parameter:?}")
            }
            Refusal::LifetimeOutOfScope { scope, max_lifetime } => {
                write!(f, "scope '{scope}' allows attributes to live at most {max_lifetime}")
            }
            Refusal::ConductorRevoked { subject } => write!(f, "conductor certificate {subject} is revoked"),
            Refusal::AttributesReplayed { first_certname, first_time } => write!(
                f,
                "these attributes were already used, for {first_certname} at {first_time}; attributes are good once"
            ),
            Refusal::CertificateExists { certname, serial } => {
                write!(f, "{certname} already has a valid certificate (serial {serial})")
            }
            Refusal::SupersedeSameKey { certname } => {
                write!(f, "the request for {certname} uses the key of its current certificate; superseding needs a new key")
            }
            Refusal::ConductorNotRecorded { certname } => write!(
                f,
                "the certificate of {certname} was issued before vouch recorded the vouching conductor's \
                 certificate; renewal cannot check that conductor against the current policy"
            ),
            Refusal::NameReserved { certname, name, holder } if certname == name => {
                write!(f, "{name} is a name on {holder}; no node may have it")
            }
            Refusal::NameReserved { certname, name, holder } => {
                write!(f, "the request for {certname} asks for {name}, a name on {holder}; no node may have it")
            }
            Refusal::SupersedeReplay { certname } => write!(
                f,
                "the attributes for {certname} do not expire later than those that vouched for its current certificate (a replay?)"
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// Who vouched.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Conductor {
    /// The conductor certificate's subject.
    pub subject: String,
    /// SHA-256 of its DER, lowercase hex.
    pub fingerprint: String,
    /// Its serial, hex.
    pub serial: String,
    /// The subject of the certificate that issued it.
    pub issuer: String,
    /// Its notAfter, RFC 3339.
    pub not_after: String,
    /// Its subject and issuer names as read from the DER (scopes match these, not the strings).
    #[serde(skip)]
    pub subject_dn: Option<crate::encoding::dn::Dn>,
    #[serde(skip)]
    pub issuer_dn: Option<crate::encoding::dn::Dn>,
}

/// A granted decision. Only [`decide`] constructs one; issuing consumes it.
#[derive(Debug)]
pub struct Grant {
    certname: String,
    csr: Csr,
    classification: Classification,
    classification_b64: String,
    conductor: Conductor,
    expiry: OffsetDateTime,
    version: u32,
    decided_at: OffsetDateTime,
    binding: Option<attrs::Binding>,
    signed_digest: String,
    conductor_der: Vec<u8>,
}

impl Grant {
    pub fn certname(&self) -> &str {
        &self.certname
    }
    pub fn csr(&self) -> &Csr {
        &self.csr
    }
    pub fn classification(&self) -> &Classification {
        &self.classification
    }
    /// The signed .2.5 value, byte for byte.
    pub fn classification_base64(&self) -> &str {
        &self.classification_b64
    }
    pub fn conductor(&self) -> &Conductor {
        &self.conductor
    }
    /// The conductor's certificate (DER), which the store keeps so renewal can check it again.
    pub fn conductor_der(&self) -> &[u8] {
        &self.conductor_der
    }
    pub fn attributes_expiry(&self) -> OffsetDateTime {
        self.expiry
    }
    pub fn version(&self) -> u32 {
        self.version
    }
    pub fn decided_at(&self) -> OffsetDateTime {
        self.decided_at
    }
    /// The vouched certname and nonce (version 2).
    pub fn binding(&self) -> Option<&attrs::Binding> {
        self.binding.as_ref()
    }
    /// What makes these attributes one-time (see [`replay_key`]).
    pub fn replay_key(&self) -> ReplayKey {
        replay_key(self.binding.as_ref().map(|b| b.nonce.as_str()), &self.conductor_der, &self.signed_digest)
    }
}

use crate::vouching::replay_key::{replay_key, ReplayKey};

/// A refusal with what could be learnt before refusing (for logs).
#[derive(Debug, Clone)]
pub struct Refused {
    pub reasons: Vec<Refusal>,
    /// The conductor, if its certificate could be read.
    pub conductor: Option<Conductor>,
    /// Set when a trusted conductor did sign exactly these unexpired attributes and the
    /// CSR was refused for another reason: the attributes are good, so whoever keeps the
    /// request must make them this key's (see [`Held`]).
    pub held: Option<Held>,
}

impl Refused {
    /// Every reason as `[code] message`, the form logs, pending requests and the API use.
    pub fn tagged_reasons(&self) -> Vec<String> {
        self.reasons.iter().map(|r| format!("[{}] {r}", r.code())).collect()
    }
}

/// Vouched attributes in a refused CSR, and the key that presented them. A refused
/// request is kept (and may be shown), so its attributes must not stay usable by
/// another key: the store records this key as their holder, as a grant would.
#[derive(Debug, Clone)]
pub struct Held {
    pub replay_key: ReplayKey,
    pub expiry: OffsetDateTime,
    /// The CSR's public key (canonical SubjectPublicKeyInfo).
    pub spki: Vec<u8>,
}

/// What the decision needs.
pub struct Request<'a> {
    /// The CSR, PEM (junk and CRLF tolerated) or DER.
    pub csr: &'a [u8],
    /// The certname the agent asks for.
    pub certname: &'a str,
}

/// Decides. `now` is the time the decision is made for.
pub fn decide(req: &Request<'_>, policy: &Policy, now: OffsetDateTime) -> Result<Grant, Refused> {
    decide_parsed(req, csr::parse(req.csr), policy, now)
}

/// [`decide`] for a CSR the caller already parsed (`csr::parse(req.csr)`), so that a
/// service that checks the CSR's shape first does not parse and verify it twice.
pub fn decide_parsed(
    req: &Request<'_>,
    parsed: Result<Csr, CsrError>,
    policy: &Policy,
    now: OffsetDateTime,
) -> Result<Grant, Refused> {
    let mut reasons = Vec::new();
    let refuse = |reasons: Vec<Refusal>, conductor| Err(Refused { reasons, conductor, held: None });

    // 1. The CSR itself.
    let csr = match parsed {
        Ok(c) => c,
        Err(e) => {
            let r = match e {
                CsrError::NotFound { detail } => Refusal::CsrMissing { detail },
                CsrError::Malformed { detail } => Refusal::CsrMalformed { detail },
                CsrError::UnsupportedSignatureAlgorithm { oid } => Refusal::CsrSignatureAlgorithmUnsupported { oid },
                CsrError::UnsupportedKey { detail } => Refusal::CsrKeyUnsupported { detail },
                CsrError::BadSelfSignature => Refusal::CsrSignatureInvalid,
            };
            let mut all = vec![r];
            if let Err(problem) = check_certname(req.certname) {
                all.push(Refusal::CertnameInvalid { certname: req.certname.to_string(), problem });
            }
            return refuse(all, None);
        }
    };
    // The key's size was checked when the request was parsed (csr::check_key_size).

    // 2. Names.
    if let Err(problem) = check_certname(req.certname) {
        reasons.push(Refusal::CertnameInvalid { certname: req.certname.to_string(), problem });
    } else if is_reserved_certname(req.certname) {
        reasons.push(Refusal::CertnameReserved { certname: req.certname.to_string() });
    }
    match csr.common_names.as_slice() {
        [cn] if cn == req.certname => {}
        [cn] => {
            reasons.push(Refusal::CommonNameMismatch { common_name: cn.clone(), certname: req.certname.to_string() })
        }
        other => reasons.push(Refusal::CommonNameCount { count: other.len() }),
    }

    // 3. Attributes: each of the five exactly once, with exactly one text value.
    let mut take = |oid: &[u64]| -> Option<String> {
        let dotted = oids::dotted(oid);
        let found: Vec<_> = csr.attributes_with(oid).collect();
        match found.as_slice() {
            [] => reasons.push(Refusal::AttributeMissing { oid: dotted }),
            [a] => match a.values.as_slice() {
                [v] if matches!(v.tag, tag::PRINTABLE_STRING | tag::UTF8_STRING | tag::IA5_STRING) => {
                    match String::from_utf8(v.bytes.clone()) {
                        Ok(s) => return Some(s),
                        Err(_) => reasons.push(Refusal::AttributeNotText { oid: dotted }),
                    }
                }
                [_] => reasons.push(Refusal::AttributeNotText { oid: dotted }),
                vals => reasons.push(Refusal::AttributeValueCount { oid: dotted, count: vals.len() }),
            },
            many => reasons.push(Refusal::AttributeDuplicated { oid: dotted, count: many.len() }),
        }
        None
    };
    let signature = take(oids::ATTR_SIGNATURE);
    let version = take(oids::ATTR_VERSION);
    let expiry = take(oids::ATTR_EXPIRY);
    let conductor_value = take(oids::ATTR_CONDUCTOR);
    let classification_value = take(oids::ATTR_CLASSIFICATION);
    // Version 2 adds the certname and the nonce; in version 1 they are unexpected.
    let is_v2 = version.as_deref() == Some("2");
    let (vouched_certname, nonce) =
        if is_v2 { (take(oids::ATTR_CERTNAME), take(oids::ATTR_NONCE)) } else { (None, None) };
    let mut known = vec![
        oids::ATTR_SIGNATURE,
        oids::ATTR_VERSION,
        oids::ATTR_EXPIRY,
        oids::ATTR_CONDUCTOR,
        oids::ATTR_CLASSIFICATION,
    ];
    if is_v2 {
        known.extend([oids::ATTR_CERTNAME, oids::ATTR_NONCE]);
    }
    if let Some(signed) = &vouched_certname {
        if signed != req.certname {
            reasons.push(Refusal::CertnameNotVouched { signed: signed.clone(), certname: req.certname.to_string() });
        }
    }
    if let Some(n) = &nonce {
        if !attrs::is_nonce(n) {
            reasons.push(Refusal::NonceMalformed { value: n.clone() });
        }
    }
    // Sets, not lists: the CSR (the agent) chooses how many attributes and extensions
    // there are, and a list search per item would be quadratic in that.
    let mut seen_unexpected = std::collections::HashSet::new();
    for a in &csr.attributes {
        if (oids::is_under(&a.oid, oids::VOUCH_ARC) || a.oid == oids::VOUCH_ARC)
            && !known.contains(&a.oid.as_slice())
            && seen_unexpected.insert(a.oid.as_slice())
        {
            reasons.push(Refusal::AttributeUnexpected { oid: oids::dotted(&a.oid) });
        }
        if a.oid == oids::MS_EXTENSION_REQUEST {
            reasons.push(Refusal::ExtensionRequestAmbiguous {
                detail: "the CSR carries a Microsoft extension request attribute (1.3.6.1.4.1.311.2.1.14)".into(),
            });
        }
    }
    if csr.extension_request_attributes > 1 {
        reasons.push(Refusal::ExtensionRequestAmbiguous {
            detail: format!("{} extensionRequest attributes", csr.extension_request_attributes),
        });
    } else if csr.extension_request_values != csr.extension_request_attributes {
        // One attribute whose SET holds several Extensions values (or none): never merged.
        reasons.push(Refusal::ExtensionRequestAmbiguous {
            detail: format!(
                "the extensionRequest attribute holds {} values; exactly one is accepted",
                csr.extension_request_values
            ),
        });
    }

    // 4. Version.
    let mut version_num = None;
    if let Some(v) = &version {
        let canonical = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) && (v == "0" || !v.starts_with('0'));
        match v.parse::<u32>() {
            Ok(n) if canonical => {
                if policy.versions.contains(&n) {
                    version_num = Some(n);
                } else {
                    reasons.push(Refusal::VersionUnsupported { version: v.clone(), accepted: policy.versions.clone() });
                }
            }
            _ => reasons.push(Refusal::VersionMalformed { value: v.clone() }),
        }
    }

    // 5. Expiry.
    let mut expiry_time = None;
    if let Some(e) = &expiry {
        match crate::encoding::time::parse_rfc3339(e) {
            Err(_) => reasons.push(Refusal::ExpiryMalformed { value: e.clone() }),
            Ok(t) => {
                if t <= now {
                    reasons.push(Refusal::AttributesExpired {
                        expiry: e.clone(),
                        now: crate::encoding::time::format_rfc3339(now),
                    });
                } else if t - now > policy.max_attribute_lifetime {
                    reasons.push(Refusal::ExpiryTooFar {
                        expiry: e.clone(),
                        max_lifetime: crate::policy::format_duration(policy.max_attribute_lifetime),
                    });
                } else {
                    expiry_time = Some(t);
                }
            }
        }
    }

    // 6. The conductor certificate and its chain; 7. the signature over the canonical string.
    let mut conductor = None;
    // Whether a trusted conductor signed exactly these values.
    let mut vouched = false;
    // SHA-256 of the verified canonical string: the one-time-use key (a signature is
    // malleable — an ECDSA (r, s) is also valid as (r, n-s) — so it cannot be the key).
    let mut signed_digest = String::new();
    let mut conductor_der = Vec::new();
    // Whether the conductor's certificate chains to a trusted root and carries the
    // conductor EKU and key usage: only then are scopes judged (step 9).
    let mut conductor_trusted = false;
    if let Some(cv) = &conductor_value {
        match check_conductor(cv, policy, now) {
            Err(r) => reasons.push(r),
            Ok((info, leaf_der, chain_reasons)) => {
                let chain_ok = chain_reasons.is_empty();
                conductor_trusted = chain_ok;
                reasons.extend(chain_reasons);
                if let (Some(sig), Some(v), Some(e), Some(c)) = (&signature, &version, &expiry, &classification_value) {
                    // Verified even when the chain failed, so that the reasons are complete;
                    // a signature by an untrusted certificate grants nothing.
                    let msg = match (is_v2, &vouched_certname, &nonce) {
                        (false, _, _) => Some(attrs::canonical_v1(v, e, cv, c)),
                        (true, Some(cn), Some(n)) => Some(attrs::canonical_v2(v, e, cv, c, cn, n)),
                        // A missing .2.6/.2.7 is already a reason; nothing to verify against.
                        (true, _, _) => None,
                    };
                    if let Some(msg) = msg {
                        match verify_signature(&leaf_der, &info.subject, sig, &msg) {
                            Err(r) => reasons.push(r),
                            Ok(()) => {
                                vouched = chain_ok;
                                signed_digest =
                                    hex(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &msg).as_ref());
                            }
                        }
                    }
                }
                conductor = Some(info);
                conductor_der = leaf_der;
            }
        }
    }

    // 8. Classification. Its YAML is parsed only once a trusted conductor is known to
    // have signed it: unsigned YAML never reaches the parser (an alias bomb costs
    // ~0.1 s of CPU before the parser's limits refuse it; nobody unvouched gets that).
    let mut classification = None;
    if let (true, Some(c)) = (vouched, &classification_value) {
        match Classification::from_base64(c, policy.classification_max_bytes) {
            Ok(parsed) => classification = Some(parsed),
            Err(ClassificationError::Unrepresentable { detail }) => {
                reasons.push(Refusal::ClassificationUnrepresentable { detail })
            }
            Err(error) => reasons.push(Refusal::ClassificationInvalid { error }),
        }
    }

    // 9. Per-conductor scope: what this conductor may vouch for. Judged only for a
    // conductor whose chain verified: an untrusted certificate is refused anyway, and
    // its subject (anyone can make one that matches a scope) gets no further work done.
    if let (false, Some(c), true) = (policy.scopes.is_empty(), &conductor, conductor_trusted) {
        match policy.scopes.iter().find(|sc| scope_applies(sc, c)) {
            None => reasons.push(Refusal::ConductorUnscoped { subject: c.subject.clone() }),
            Some(scope) => check_scope(scope, req.certname, expiry_time, now, classification.as_ref(), &mut reasons),
        }
    }

    // 10. Extension requests: the node controls them all.
    let mut seen: std::collections::HashSet<&[u64]> = std::collections::HashSet::new();
    let mut mirror_seen = false;
    for ext in &csr.extensions {
        let shown = oids::display(&ext.oid);
        if !seen.insert(ext.oid.as_slice()) {
            reasons.push(Refusal::ExtensionDuplicated { oid: shown });
            continue;
        }
        // Whatever the extension, a node does not get to make it critical: Puppet Server
        // (hook mode) copies the flag, and relying parties must then understand it or fail.
        if ext.critical {
            reasons.push(Refusal::ExtensionCritical { oid: shown.clone() });
        }
        if ext.oid == oids::SUBJECT_ALT_NAME {
            if !policy.allow_subject_alt_names {
                reasons.push(Refusal::SubjectAltNameRequested);
            }
        } else if oids::is_under(&ext.oid, oids::PP_AUTH) {
            reasons.push(Refusal::AuthorizationExtensionRequested { oid: shown });
        } else if ext.oid == policy.mirror_oid {
            mirror_seen = true;
            let matches = match (&classification_value, ext.utf8_value()) {
                (Some(signed), Some(requested)) => signed == requested,
                _ => false,
            };
            if !matches {
                reasons.push(Refusal::MirrorMismatch { oid: shown });
            }
        } else if policy.allowed_extensions.contains(&ext.oid) {
        } else if oids::is_under(&ext.oid, oids::PUPPET) {
            reasons.push(Refusal::PuppetExtensionNotAllowed { oid: shown });
        } else {
            reasons.push(Refusal::ExtensionNotAllowed { oid: shown });
        }
    }
    if policy.mirror_required && !mirror_seen {
        reasons.push(Refusal::MirrorMissing { oid: oids::dotted(&policy.mirror_oid) });
    }

    if !reasons.is_empty() {
        // Held only by a request for the name they vouch for: attributes presented under
        // another name prove nothing about their owner, and must not lock the node out.
        let for_this_name = !reasons.iter().any(|r| {
            matches!(
                r,
                Refusal::CertnameNotVouched { .. }
                    | Refusal::CertnameInvalid { .. }
                    | Refusal::CertnameReserved { .. }
                    | Refusal::CommonNameCount { .. }
                    | Refusal::CommonNameMismatch { .. }
            )
        });
        let held = match (vouched && for_this_name, expiry_time) {
            (true, Some(expiry)) => Some(Held {
                replay_key: replay_key(
                    match (&vouched_certname, &nonce) {
                        (Some(_), Some(n)) if is_v2 => Some(n.as_str()),
                        _ => None,
                    },
                    &conductor_der,
                    &signed_digest,
                ),
                expiry,
                spki: csr.spki.clone(),
            }),
            _ => None,
        };
        return Err(Refused { reasons, conductor, held });
    }
    let binding = match (vouched_certname, nonce) {
        (Some(certname), Some(nonce)) => Some(attrs::Binding { certname, nonce }),
        _ => None,
    };
    match (classification, classification_value, conductor, expiry_time, version_num, signature) {
        (
            Some(classification),
            Some(classification_b64),
            Some(conductor),
            Some(expiry),
            Some(version),
            Some(_signature),
        ) if (version == 2) == binding.is_some() && !signed_digest.is_empty() => Ok(Grant {
            certname: req.certname.to_string(),
            csr,
            classification,
            classification_b64,
            conductor,
            expiry,
            version,
            decided_at: now,
            binding,
            signed_digest,
            conductor_der,
        }),
        // Unreachable when no reason was recorded; refuse rather than grant on doubt.
        (_, _, conductor, _, _, _) => {
            refuse(vec![Refusal::AttributeMissing { oid: "(internal: incomplete decision)".into() }], conductor)
        }
    }
}

/// Whether a scope applies to a conductor. Names are compared structurally
/// (`crate::encoding::dn`): two names that merely display alike never match.
fn scope_applies(scope: &Scope, c: &Conductor) -> bool {
    let name = |want: &Option<crate::encoding::dn::Dn>, got: &Option<crate::encoding::dn::Dn>| match (want, got) {
        (None, _) => true,
        (Some(w), Some(g)) => w == g,
        // A certificate name vouch could not read matches no configured name.
        (Some(_), None) => false,
    };
    scope.fingerprint.as_deref().is_none_or(|f| f == c.fingerprint)
        && name(&scope.subject_dn, &c.subject_dn)
        && name(&scope.issuer_dn, &c.issuer_dn)
}

fn check_scope(
    scope: &crate::policy::Scope,
    certname: &str,
    expiry: Option<OffsetDateTime>,
    now: OffsetDateTime,
    classification: Option<&Classification>,
    reasons: &mut Vec<Refusal>,
) {
    let name = scope.name.clone();
    if let Some(patterns) = &scope.certnames {
        if !patterns.iter().any(|p| p.is_match(certname)) {
            reasons.push(Refusal::CertnameOutOfScope { scope: name.clone(), certname: certname.to_string() });
        }
    }
    if let (Some(max), Some(exp)) = (scope.max_lifetime, expiry) {
        if exp - now > max {
            reasons.push(Refusal::LifetimeOutOfScope {
                scope: name.clone(),
                max_lifetime: crate::policy::format_duration(max),
            });
        }
    }
    let Some(value) = classification.map(|c| &c.value) else { return };
    if let Some(allowed) = &scope.classes {
        let classes: Vec<String> = match value.get("classes") {
            Some(serde_yaml_ng::Value::Sequence(list)) => {
                list.iter().filter_map(|v| v.as_str().map(String::from)).collect()
            }
            Some(serde_yaml_ng::Value::Mapping(m)) => m.keys().filter_map(|v| v.as_str().map(String::from)).collect(),
            _ => vec![],
        };
        for class in classes {
            let bare = class.trim_start_matches("::");
            if !allowed.iter().any(|p| p.is_match(bare)) {
                reasons.push(Refusal::ClassOutOfScope { scope: name.clone(), class });
            }
        }
    }
    if let Some(allowed) = &scope.environments {
        match value.get("environment").and_then(|e| e.as_str()) {
            Some(env) if allowed.iter().any(|a| a == env) => {}
            other => reasons.push(Refusal::EnvironmentOutOfScope {
                scope: name.clone(),
                environment: other.unwrap_or("(none: the agent would choose)").to_string(),
            }),
        }
    }
    if let Some(allowed) = &scope.parameters {
        if let Some(serde_yaml_ng::Value::Mapping(params)) = value.get("parameters") {
            for k in params.keys().filter_map(|k| k.as_str()) {
                if !allowed.iter().any(|a| a == k) {
                    reasons.push(Refusal::ParameterOutOfScope { scope: name.clone(), parameter: k.to_string() });
                }
            }
        }
    }
}

/// Renewal: whether the conductor that vouched for `certname` (its certificate, as the
/// store recorded it at issuance) would still be accepted by the current policy: not on a
/// conductor CRL, still chaining to a trusted root through listed intermediates, still
/// carrying EKU .2.0 and digitalSignature, and still matching a scope that covers this
/// certname and classification. Its own expiry does not count (a node's identity does not
/// lapse with its launcher's: the chain is checked at a time within the conductor's
/// validity), nor does the attributes' lifetime. Pure, like [`decide`].
pub fn recheck_conductor(
    conductor_der: &[u8],
    certname: &str,
    classification: Option<&Classification>,
    policy: &Policy,
    now: OffsetDateTime,
) -> Result<Conductor, Refused> {
    let (info, _, mut reasons) = match check_conductor_der(conductor_der.to_vec(), policy, now, true) {
        Ok(checked) => checked,
        Err(r) => return Err(Refused { reasons: vec![r], conductor: None, held: None }),
    };
    if !policy.scopes.is_empty() {
        match policy.scopes.iter().find(|sc| scope_applies(sc, &info)) {
            None => reasons.push(Refusal::ConductorUnscoped { subject: info.subject.clone() }),
            Some(scope) => check_scope(scope, certname, None, now, classification, &mut reasons),
        }
    }
    if reasons.is_empty() {
        Ok(info)
    } else {
        Err(Refused { reasons, conductor: Some(info), held: None })
    }
}

/// Reads the conductor certificate, verifies its chain, EKU and key usage.
/// Returns who it is, its DER, and chain problems (the certificate was readable).
fn check_conductor(
    value: &str,
    policy: &Policy,
    now: OffsetDateTime,
) -> Result<(Conductor, Vec<u8>, Vec<Refusal>), Refusal> {
    let der = attrs::decode_conductor_cert(value).map_err(|detail| Refusal::ConductorMalformed { detail })?;
    check_conductor_der(der, policy, now, false)
}

/// [`check_conductor`] on DER. With `at_validity`, the chain is checked at `now` moved
/// into the conductor's own validity period (renewal: a conductor that has since expired
/// still vouched while it was valid; revocation, trust, EKU and key usage still count).
fn check_conductor_der(
    der: Vec<u8>,
    policy: &Policy,
    now: OffsetDateTime,
    at_validity: bool,
) -> Result<(Conductor, Vec<u8>, Vec<Refusal>), Refusal> {
    let (rest, cert) =
        x509_parser::parse_x509_certificate(&der).map_err(|e| Refusal::ConductorMalformed { detail: e.to_string() })?;
    if !rest.is_empty() {
        return Err(Refusal::ConductorMalformed { detail: "trailing bytes after the certificate".into() });
    }
    let subject = cert.subject().to_string();
    let fingerprint = hex(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &der).as_ref());
    let info = Conductor {
        subject: subject.clone(),
        fingerprint,
        serial: cert.raw_serial_as_string(),
        issuer: cert.issuer().to_string(),
        not_after: crate::encoding::time::format_rfc3339(cert.validity().not_after.to_datetime()),
        subject_dn: crate::encoding::dn::Dn::from_der(cert.subject().as_raw()).ok(),
        issuer_dn: crate::encoding::dn::Dn::from_der(cert.issuer().as_raw()).ok(),
    };
    let mut problems = Vec::new();

    // Chain: webpki, with EKU .2.0 required wherever an EKU extension is present.
    let ee_der = CertificateDer::from(der.as_slice());
    match webpki::EndEntityCert::try_from(&ee_der) {
        Err(e) => problems.push(Refusal::ConductorMalformed { detail: format!("{e:?}") }),
        Ok(ee) => {
            let anchors: Vec<_> = policy
                .trust
                .roots
                .iter()
                .filter_map(|r| {
                    let d = CertificateDer::from(r.as_slice());
                    webpki::anchor_from_trusted_cert(&d).ok().map(|a| a.to_owned())
                })
                .collect();
            let intermediates: Vec<CertificateDer<'_>> =
                policy.trust.intermediates.iter().map(|d| CertificateDer::from(d.as_slice())).collect();
            let at = if at_validity {
                let validity = cert.validity();
                // Not Ord::clamp: it panics on a certificate whose notBefore is after its notAfter.
                now.min(validity.not_after.to_datetime()).max(validity.not_before.to_datetime())
            } else {
                now
            };
            let secs = u64::try_from(at.unix_timestamp()).unwrap_or(0);
            let time = UnixTime::since_unix_epoch(std::time::Duration::from_secs(secs));
            static EKU: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x8c, 0x4c, 0x02, 0x00];
            let crls: Vec<webpki::CertRevocationList<'_>> = policy
                .trust
                .crls
                .iter()
                .filter_map(|d| webpki::BorrowedCertRevocationList::from_der(d).ok().map(Into::into))
                .collect();
            let crl_refs: Vec<&webpki::CertRevocationList<'_>> = crls.iter().collect();
            let revocation = webpki::RevocationOptionsBuilder::new(&crl_refs).ok().map(|b| {
                b.with_depth(webpki::RevocationCheckDepth::Chain)
                    .with_status_policy(webpki::UnknownStatusPolicy::Allow)
                    .with_expiration_policy(webpki::ExpirationPolicy::Ignore)
                    .build()
            });
            let digest: [u8; 32] =
                aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &der).as_ref().try_into().unwrap_or([0u8; 32]);
            let unix = at.unix_timestamp();
            let verified = if policy.chain_cache.holds(&digest, unix) {
                Ok(())
            } else {
                ee.verify_for_usage(
                    webpki::ALL_VERIFICATION_ALGS,
                    &anchors,
                    &intermediates,
                    time,
                    webpki::KeyUsage::required_if_present(EKU),
                    revocation,
                    None,
                )
                .map(|path| {
                    // The window in which this chain holds: every certificate in it valid.
                    let v = cert.validity();
                    let mut window = (v.not_before.timestamp(), v.not_after.timestamp());
                    for c in path.intermediate_certificates() {
                        if let Ok((_, ic)) = x509_parser::parse_x509_certificate(c.der().as_ref()) {
                            let iv = ic.validity();
                            window = (window.0.max(iv.not_before.timestamp()), window.1.min(iv.not_after.timestamp()));
                        }
                    }
                    policy.chain_cache.insert(digest, window);
                })
            };
            if let Err(e) = verified {
                problems.push(match e {
                    webpki::Error::CertExpired { .. } => Refusal::ConductorExpired { subject: subject.clone() },
                    webpki::Error::CertNotValidYet { .. } => Refusal::ConductorNotYetValid { subject: subject.clone() },
                    webpki::Error::RequiredEkuNotFoundContext(_) => Refusal::ConductorUntrusted {
                        subject: subject.clone(),
                        detail: "a certificate in the chain has an extended key usage that omits 1.3.6.1.4.1.34380.2.0"
                            .into(),
                    },
                    webpki::Error::CertRevoked => Refusal::ConductorRevoked { subject: subject.clone() },
                    webpki::Error::CaUsedAsEndEntity => Refusal::ConductorUntrusted {
                        subject: subject.clone(),
                        detail: "it is a CA certificate (basicConstraints CA:TRUE), not a conductor certificate".into(),
                    },
                    webpki::Error::UnknownIssuer => Refusal::ConductorUntrusted {
                        subject: subject.clone(),
                        detail: "its issuer is not a trusted root nor a listed intermediate".into(),
                    },
                    other => Refusal::ConductorUntrusted { subject: subject.clone(), detail: format!("{other:?}") },
                });
            }
        }
    }
    // The leaf itself must name EKU .2.0 (webpki's check passes a leaf without any EKU).
    let has_eku = matches!(cert.extended_key_usage(), Ok(Some(eku))
        if eku.value.other.iter().any(|o| o.iter().is_some_and(|arcs| arcs.eq(oids::EKU_CONDUCTOR.iter().copied()))));
    if !has_eku {
        problems.push(Refusal::ConductorEkuMissing { subject: subject.clone() });
    }
    let has_ds = matches!(cert.key_usage(), Ok(Some(ku)) if ku.value.digital_signature());
    if !has_ds {
        problems.push(Refusal::ConductorKeyUsageMissing { subject });
    }
    Ok((info, der, problems))
}

fn verify_signature(leaf_der: &[u8], subject: &str, sig_b64: &str, msg: &[u8]) -> Result<(), Refusal> {
    let sig = STANDARD.decode(sig_b64.as_bytes()).map_err(|e| Refusal::SignatureMalformed { detail: e.to_string() })?;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf_der)
        .map_err(|e| Refusal::ConductorMalformed { detail: e.to_string() })?;
    let kind = csr::spki_kind(cert.public_key().raw)
        .and_then(|k| csr::check_key_size(k).map(|()| k))
        .map_err(|e| Refusal::SignatureKeyUnsupported { detail: e.to_string() })?;
    let alg: &dyn rustls_pki_types::SignatureVerificationAlgorithm = match kind {
        KeyKind::Rsa { .. } => webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA256,
        KeyKind::P256 => webpki::aws_lc_rs::ECDSA_P256_SHA256,
        KeyKind::P384 => webpki::aws_lc_rs::ECDSA_P384_SHA384,
        KeyKind::Ed25519 => webpki::aws_lc_rs::ED25519,
    };
    let ee_der = CertificateDer::from(leaf_der);
    let ee = webpki::EndEntityCert::try_from(&ee_der)
        .map_err(|e| Refusal::ConductorMalformed { detail: format!("{e:?}") })?;
    ee.verify_signature(alg, msg, &sig).map_err(|_| Refusal::SignatureInvalid { subject: subject.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certnames() {
        assert_eq!(check_certname("web01.example.com"), Ok(()));
        assert_eq!(check_certname("web_01"), Ok(()));
        assert_eq!(check_certname("Web01"), Err(CertnameProblem::Uppercase));
        assert_eq!(check_certname("*.example.com"), Err(CertnameProblem::Wildcard));
        assert_eq!(check_certname("web01.example.com."), Err(CertnameProblem::TrailingDot));
        assert_eq!(check_certname("../etc/passwd"), Err(CertnameProblem::InvalidCharacter('/')));
        assert_eq!(check_certname("a..b"), Err(CertnameProblem::EmptyLabel));
        assert_eq!(check_certname("-a.b"), Err(CertnameProblem::LabelHyphen));
        assert_eq!(check_certname(""), Err(CertnameProblem::Empty));
        assert_eq!(check_certname("a b"), Err(CertnameProblem::InvalidCharacter(' ')));
    }
}
