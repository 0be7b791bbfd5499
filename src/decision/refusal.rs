//! Why a request is refused: every reason, with its stable code (`code()`), its message
//! (`Display`) and a hint for the operator.

use super::CertnameProblem;
use crate::vouching::classification::ClassificationError;

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
    /// A CSR asks for alt names though no scope marks its certname as a server.
    AltNamesNotServer { certname: String, scope: Option<String> },
    /// Alt names requested with version 1 attributes, which do not sign the certname: the
    /// `servers` pattern would be matched against a CN the node chose.
    AltNamesCertnameNotVouched { certname: String, version: u32 },
    /// A server asks for an alt name its scope's `dns_alt_names` does not list.
    AltNameOutOfScope { scope: String, name: String },
    /// A requested alt name that is not a valid DNS name (an IP address, a wildcard, an
    /// e-mail address or URI, uppercase...), or a subjectAltName vouch cannot read.
    AltNameUnsupported { detail: String },
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
    /// The data directory's root CRL or recorded root revocations are there but cannot be
    /// read: whether this root's conductor is revoked is unknown (deny by default).
    ConductorRevocationUnknown { subject: String, detail: String },
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
            Refusal::AltNamesNotServer { .. } => "alt-names-not-a-server",
            Refusal::AltNamesCertnameNotVouched { .. } => "alt-names-certname-not-vouched",
            Refusal::AltNameOutOfScope { .. } => "alt-name-out-of-scope",
            Refusal::AltNameUnsupported { .. } => "alt-name-unsupported",
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
            Refusal::ConductorRevocationUnknown { .. } => "conductor-revocation-unknown",
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
            Refusal::SubjectAltNameRequested => {
                "remove dns_alt_names from the node's puppet.conf; for a server, give its conductor's \
                 [[conductor]] scope servers and dns_alt_names"
            }
            Refusal::AltNamesNotServer { .. } => {
                "only servers get alt names: remove dns_alt_names from the node's puppet.conf, or add its \
                 certname to the servers of its conductor's scope"
            }
            Refusal::AltNamesCertnameNotVouched { .. } => {
                "a server's alt names need version 2 attributes, which sign its certname: sign the server's \
                 attributes for its certname ('vouch conductor sign --certname NAME')"
            }
            Refusal::AltNameOutOfScope { .. } => {
                "request only names the scope's dns_alt_names lists (puppet.conf dns_alt_names), or add the name there"
            }
            Refusal::AltNameUnsupported { .. } => {
                "request lowercase DNS names only, without wildcards or IP addresses (puppet.conf dns_alt_names)"
            }
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
            Refusal::ConductorRevocationUnknown { detail, .. }
                if detail.contains(crate::policy::own_crl::NOT_SIGNED_BY_ROOT) =>
            {
                "DIR/ca/root_crl.pem must be the root's CRL, signed by the root (a master CA's ca_crl.pem is not \
                 it): copy the root's own ROOT_DIR/ca/root_crl.pem over it; where the root key is, any command \
                 that touches the store (`vouch list`) writes the root CRL again"
            }
            Refusal::ConductorRevocationUnknown { .. } => {
                "make DIR/ca/root_crl.pem (and DIR/ca/root_revocations.txt, where the root key is) a readable \
                 regular file again: where the root key is, any command that touches the store (`vouch list`) \
                 writes the root CRL again; on a master without the root key, copy it again from there"
            }
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
            Refusal::CsrMissing { detail } => write!(f, "no certificate request: {detail}", detail = Capped(detail)),
            Refusal::CsrMalformed { detail } => write!(f, "the certificate request is malformed: {detail}", detail = Capped(detail)),
            Refusal::CsrSignatureInvalid => f.write_str("the certificate request's self-signature does not verify"),
            Refusal::CsrSignatureAlgorithmUnsupported { oid } => {
                write!(f, "the certificate request is signed with unsupported algorithm {oid}", oid = Capped(oid))
            }
            Refusal::CsrKeyUnsupported { detail } => write!(f, "the certificate request's key is unsupported: {detail}", detail = Capped(detail)),
            Refusal::CertnameInvalid { certname, problem } => write!(f, "certname {certname:?} is invalid: {problem}", certname = Capped(certname), problem = Capped(problem)),
            Refusal::CertnameReserved { certname } => write!(
                f,
                "certname {certname:?} is reserved by Puppet: 'GET certificate/{certname}' answers the CA's \
                 own certificate, so a node could never fetch one issued under it"
            ),
            Refusal::CommonNameCount { count } => write!(f, "the CSR subject has {count} commonNames; exactly one is required", count = Capped(count)),
            Refusal::CommonNameMismatch { common_name, certname } => {
                write!(f, "the CSR's CN {common_name:?} differs from the certname {certname:?}", common_name = Capped(common_name), certname = Capped(certname))
            }
            Refusal::AttributeMissing { oid } => write!(f, "attribute {oid} is missing", oid = Capped(oid)),
            Refusal::AttributeDuplicated { oid, count } => write!(f, "attribute {oid} appears {count} times", oid = Capped(oid), count = Capped(count)),
            Refusal::AttributeValueCount { oid, count } => {
                write!(f, "attribute {oid} has {count} values; exactly one is required", oid = Capped(oid), count = Capped(count))
            }
            Refusal::AttributeNotText { oid } => write!(f, "attribute {oid} is not a UTF-8 string", oid = Capped(oid)),
            Refusal::AttributeUnexpected { oid } => write!(f, "attribute {oid} is not defined by the signature version", oid = Capped(oid)),
            Refusal::VersionMalformed { value } => write!(f, "signature version {value:?} is not a plain decimal integer", value = Capped(value)),
            Refusal::VersionUnsupported { version, accepted } => {
                write!(f, "signature version {version} is not accepted (policy accepts {accepted:?})", version = Capped(version), accepted = Capped(accepted))
            }
            Refusal::ExpiryMalformed { value } => write!(f, "expiry {value:?} is not an RFC 3339 date-time", value = Capped(value)),
            Refusal::AttributesExpired { expiry, now } => write!(f, "the attributes expired at {expiry} (now {now})", expiry = Capped(expiry), now = Capped(now)),
            Refusal::ExpiryTooFar { expiry, max_lifetime } => {
                write!(f, "expiry {expiry} is further ahead than the policy's maximum of {max_lifetime}", expiry = Capped(expiry), max_lifetime = Capped(max_lifetime))
            }
            Refusal::ConductorMalformed { detail } => write!(f, "the conductor certificate is unreadable: {detail}", detail = Capped(detail)),
            Refusal::ConductorNotYetValid { subject } => write!(f, "conductor certificate {subject} is not yet valid", subject = Capped(subject)),
            Refusal::ConductorExpired { subject } => write!(f, "conductor certificate {subject} has expired", subject = Capped(subject)),
            Refusal::ConductorUntrusted { subject, detail } => {
                write!(f, "conductor certificate {subject} does not chain to a trusted root: {detail}", subject = Capped(subject), detail = Capped(detail))
            }
            Refusal::ConductorEkuMissing { subject } => write!(
                f,
                "conductor certificate {subject} lacks the extended key usage 1.3.6.1.4.1.34380.2.0 (allowed to create new instances)"
            ),
            Refusal::ConductorKeyUsageMissing { subject } => {
                write!(f, "conductor certificate {subject} lacks the key usage digitalSignature", subject = Capped(subject))
            }
            Refusal::SignatureMalformed { detail } => write!(f, "the signature attribute is not base64: {detail}", detail = Capped(detail)),
            Refusal::SignatureInvalid { subject } => {
                write!(f, "the attribute signature does not verify with the key of conductor {subject}", subject = Capped(subject))
            }
            Refusal::SignatureKeyUnsupported { detail } => write!(f, "the conductor's key cannot sign attributes: {detail}", detail = Capped(detail)),
            Refusal::ClassificationInvalid { error } => write!(f, "{error}", error = Capped(error)),
            Refusal::ClassificationUnrepresentable { detail } => write!(
                f,
                "the classification cannot be handed to Puppet exactly as signed (the ENC prints JSON): {detail}"
            ),
            Refusal::ExtensionRequestAmbiguous { detail } => write!(f, "ambiguous extension requests: {detail}", detail = Capped(detail)),
            Refusal::ExtensionDuplicated { oid } => write!(f, "extension {oid} is requested more than once", oid = Capped(oid)),
            Refusal::ExtensionCritical { oid } => write!(
                f,
                "extension {oid} is requested as critical; no requested extension may be critical \
                 (Puppet Server would copy it into the certificate as critical)"
            ),
            Refusal::SubjectAltNameRequested => f.write_str(
                "the CSR requests subjectAltNames, which the policy does not allow (no [[conductor]] scope lists dns_alt_names)",
            ),
            Refusal::AltNamesNotServer { certname, scope: Some(scope) } => write!(
                f,
                "{certname} asks for alt names, but scope '{scope}' does not list it among its servers: \
                 a node that is not a server gets no alt names"
            ),
            Refusal::AltNamesNotServer { certname, scope: None } => write!(
                f,
                "{certname} asks for alt names, but no [[conductor]] scope of its conductor marks it as a server: \
                 a node that is not a server gets no alt names"
            ),
            Refusal::AltNameOutOfScope { scope, name } => {
                write!(f, "scope '{scope}' does not allow the alt name {name:?} (its dns_alt_names)", scope = Capped(scope), name = Capped(name))
            }
            Refusal::AltNamesCertnameNotVouched { certname, version } => write!(
                f,
                "{certname} asks for alt names with version {version} attributes, which do not sign the certname: \
                 only a certname a conductor signed (version 2) can be a server"
            ),
            Refusal::AltNameUnsupported { detail } => write!(f, "unsupported subjectAltName request: {detail}", detail = Capped(detail)),
            Refusal::AuthorizationExtensionRequested { oid } => {
                write!(f, "the CSR requests the authorization extension {oid}", oid = Capped(oid))
            }
            Refusal::PuppetExtensionNotAllowed { oid } => {
                write!(f, "the CSR requests the Puppet extension {oid}, which the policy does not allow", oid = Capped(oid))
            }
            Refusal::ExtensionNotAllowed { oid } => write!(f, "the CSR requests extension {oid}, which the policy does not allow", oid = Capped(oid)),
            Refusal::MirrorMismatch { oid } => {
                write!(f, "the classification mirror request {oid} differs from the signed classification", oid = Capped(oid))
            }
            Refusal::MirrorMissing { oid } => write!(f, "the policy requires the classification mirror request {oid}", oid = Capped(oid)),
            Refusal::CertnameNotVouched { signed, certname } => {
                write!(f, "the conductor vouched for {signed:?}, not for the certname {certname:?}", signed = Capped(signed), certname = Capped(certname))
            }
            Refusal::NonceMalformed { value } => write!(f, "nonce {value:?} is not 32 to 128 lowercase hex digits", value = Capped(value)),
            Refusal::ConductorUnscoped { subject } => write!(f, "conductor {subject} matches no [[conductor]] scope", subject = Capped(subject)),
            Refusal::CertnameOutOfScope { scope, certname } => {
                write!(f, "scope '{scope}' does not allow the certname {certname:?}", scope = Capped(scope), certname = Capped(certname))
            }
            Refusal::ClassOutOfScope { scope, class } => write!(f, "scope '{scope}' does not allow the class {class:?}", scope = Capped(scope), class = Capped(class)),
            Refusal::EnvironmentOutOfScope { scope, environment } => {
                write!(f, "scope '{scope}' does not allow the environment {environment}", scope = Capped(scope), environment = Capped(environment))
            }
            Refusal::ParameterOutOfScope { scope, parameter } => {
                write!(f, "scope '{scope}' does not allow the parameter {parameter:?}", scope = Capped(scope), parameter = Capped(parameter))
            }
            Refusal::LifetimeOutOfScope { scope, max_lifetime } => {
                write!(f, "scope '{scope}' allows attributes to live at most {max_lifetime}", scope = Capped(scope), max_lifetime = Capped(max_lifetime))
            }
            Refusal::ConductorRevoked { subject } => write!(f, "conductor certificate {subject} is revoked", subject = Capped(subject)),
            Refusal::ConductorRevocationUnknown { subject, detail } => write!(
                f,
                "whether conductor certificate {subject} is revoked is unknown: the data directory's root CRL or \
                 root revocations cannot be read ({detail}), and until they can, no conductor of this root is accepted",
                subject = Capped(subject),
                detail = Capped(detail)
            ),
            Refusal::AttributesReplayed { first_certname, first_time } => write!(
                f,
                "these attributes were already used, for {first_certname} at {first_time}; attributes are good once"
            ),
            Refusal::CertificateExists { certname, serial } => {
                write!(f, "{certname} already has a valid certificate (serial {serial})", certname = Capped(certname), serial = Capped(serial))
            }
            Refusal::SupersedeSameKey { certname } => {
                write!(f, "the request for {certname} uses the key of its current certificate; superseding needs a new key", certname = Capped(certname))
            }
            Refusal::ConductorNotRecorded { certname } => write!(
                f,
                "the certificate of {certname} was issued before vouch recorded the vouching conductor's \
                 certificate; renewal cannot check that conductor against the current policy"
            ),
            Refusal::NameReserved { certname, name, holder } if certname == name => {
                write!(f, "{name} is a name on {holder}; no node may have it", name = Capped(name), holder = Capped(holder))
            }
            Refusal::NameReserved { certname, name, holder } => {
                write!(f, "the request for {certname} asks for {name}, a name on {holder}; no node may have it", certname = Capped(certname), name = Capped(name), holder = Capped(holder))
            }
            Refusal::SupersedeReplay { certname } => write!(
                f,
                "the attributes for {certname} do not expire later than those that vouched for its current certificate (a replay?)"
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// A value shown in a refusal's message, capped: its first characters and its length, so
/// a request cannot make a message (an audit line, a log line) as large as itself.
struct Capped<'a, T: ?Sized>(&'a T);

/// A quoted value (a name, an attribute's text): the first 64 characters.
const CAP_QUOTED: usize = 64;
/// A description (a parser's error, a subject): longer, still bounded.
const CAP_TEXT: usize = 256;

fn cap(rendered: String, chars: usize) -> String {
    if rendered.chars().count() <= chars.saturating_add(16) {
        return rendered;
    }
    let head: String = rendered.chars().take(chars).collect();
    format!("{head}…({} bytes)", rendered.len())
}

impl<T: std::fmt::Display + ?Sized> std::fmt::Display for Capped<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&cap(self.0.to_string(), CAP_TEXT))
    }
}

impl<T: std::fmt::Debug + ?Sized> std::fmt::Debug for Capped<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&cap(format!("{:?}", self.0), CAP_QUOTED))
    }
}

#[cfg(test)]
mod capped_tests {
    use super::*;

    #[test]
    fn a_huge_value_is_capped_in_the_message() {
        let r = Refusal::VersionMalformed { value: "9".repeat(200_000) };
        let m = r.to_string();
        assert!(m.len() < 300, "{}", m.len());
        assert!(m.contains("(200002 bytes)"), "{m}");
        let short = Refusal::VersionMalformed { value: "x1".into() };
        assert_eq!(short.to_string(), "signature version \"x1\" is not a plain decimal integer");
    }
}
