//! Why a request is refused: every reason, with its stable code (`code()`), its message
//! (`Display`) and a hint for the operator, each stated beside the reason.

use super::CertnameProblem;
use crate::vouching::classification::ClassificationError;
use vouch_derive::{Code, Hint, Message};

/// One reason to refuse a CSR. Each has a stable [`code`](Refusal::code), a
/// message and a hint.
#[derive(Debug, Clone, PartialEq, Eq, Code, Message, Hint)]
#[non_exhaustive]
pub enum Refusal {
    /// The input holds no CSR.
    #[code = "csr-missing"]
    #[message("no certificate request: {detail}", detail = Capped(detail))]
    #[hint(with = SEND_CSR_AS_IS)]
    CsrMissing { detail: String },
    /// The CSR's structure is broken.
    #[code = "csr-malformed"]
    #[message("the certificate request is malformed: {detail}", detail = Capped(detail))]
    #[hint(with = SEND_CSR_AS_IS)]
    CsrMalformed { detail: String },
    /// The CSR's self-signature does not verify.
    #[code = "csr-signature-invalid"]
    #[message = "the certificate request's self-signature does not verify"]
    #[hint = "the request was altered after the agent signed it; make a new one"]
    CsrSignatureInvalid,
    /// The CSR is signed with an algorithm vouch does not verify.
    #[code = "csr-signature-algorithm-unsupported"]
    #[message("the certificate request is signed with unsupported algorithm {oid}", oid = Capped(oid))]
    #[hint(with = AGENT_KEY)]
    CsrSignatureAlgorithmUnsupported { oid: String },
    /// The CSR's key type is not accepted.
    #[code = "csr-key-unsupported"]
    #[message("the certificate request's key is unsupported: {detail}", detail = Capped(detail))]
    #[hint(with = AGENT_KEY)]
    CsrKeyUnsupported { detail: String },
    /// The certname asked about is not a valid certname.
    #[code = "certname-invalid"]
    #[message("certname {certname:?} is invalid: {problem}", certname = Capped(certname), problem = Capped(problem))]
    #[hint = "use a lowercase host name without wildcards, e.g. web01.example.com"]
    CertnameInvalid { certname: String, problem: CertnameProblem },
    /// The certname is one Puppet reserves (`ca`).
    #[code = "certname-reserved"]
    #[message = "certname {certname:?} is reserved by Puppet: 'GET certificate/{certname}' answers the CA's \
                 own certificate, so a node could never fetch one issued under it"]
    #[hint = "give the node another certname (puppet.conf certname = its host name); Puppet keeps 'ca' for the CA itself"]
    CertnameReserved { certname: String },
    /// The CSR has no commonName, or several.
    #[code = "common-name-count"]
    #[message("the CSR subject has {count} commonNames; exactly one is required", count = Capped(count))]
    #[hint(with = CN_IS_CERTNAME)]
    CommonNameCount { count: usize },
    /// The CSR's CN differs from the certname.
    #[code = "common-name-mismatch"]
    #[message("the CSR's CN {common_name:?} differs from the certname {certname:?}",
              common_name = Capped(common_name), certname = Capped(certname))]
    #[hint(with = CN_IS_CERTNAME)]
    CommonNameMismatch { common_name: String, certname: String },
    /// A required attribute is absent.
    #[code = "attribute-missing"]
    #[message("attribute {oid} is missing", oid = Capped(oid))]
    #[hint(with = ATTRIBUTES_UNCHANGED)]
    AttributeMissing { oid: String },
    /// An attribute appears more than once.
    #[code = "attribute-duplicated"]
    #[message("attribute {oid} appears {count} times", oid = Capped(oid), count = Capped(count))]
    #[hint(with = ATTRIBUTES_UNCHANGED)]
    AttributeDuplicated { oid: String, count: usize },
    /// An attribute's SET holds other than one value.
    #[code = "attribute-value-count"]
    #[message("attribute {oid} has {count} values; exactly one is required", oid = Capped(oid), count = Capped(count))]
    #[hint(with = ATTRIBUTES_UNCHANGED)]
    AttributeValueCount { oid: String, count: usize },
    /// An attribute value is not a string type, or not UTF-8.
    #[code = "attribute-not-text"]
    #[message("attribute {oid} is not a UTF-8 string", oid = Capped(oid))]
    #[hint(with = ATTRIBUTES_UNCHANGED)]
    AttributeNotText { oid: String },
    /// An attribute in the vouch arc that this version does not define.
    #[code = "attribute-unexpected"]
    #[message("attribute {oid} is not defined by the signature version", oid = Capped(oid))]
    #[hint(with = ATTRIBUTES_UNCHANGED)]
    AttributeUnexpected { oid: String },
    /// The version attribute is not a canonical decimal integer.
    #[code = "version-malformed"]
    #[message("signature version {value:?} is not a plain decimal integer", value = Capped(value))]
    #[hint(with = ACCEPTED_VERSION)]
    VersionMalformed { value: String },
    /// The version is not one the policy accepts.
    #[code = "version-unsupported"]
    #[message("signature version {version} is not accepted (policy accepts {accepted:?})",
              version = Capped(version), accepted = Capped(accepted))]
    #[hint = "sign with a version the policy accepts, or accept this one: add it to attributes.versions in \
              the CA's policy (version 3, templates for autoscaling groups, is off by default: \
              `versions = [1, 2, 3]`)"]
    VersionUnsupported { version: String, accepted: Vec<u32> },
    /// The expiry is not RFC 3339.
    #[code = "expiry-malformed"]
    #[message("expiry {value:?} is not an RFC 3339 date-time", value = Capped(value))]
    #[hint = "the expiry must be RFC 3339, e.g. 2030-01-01T00:00:00Z"]
    ExpiryMalformed { value: String },
    /// The attributes have expired.
    #[code = "attributes-expired"]
    #[message("the attributes expired at {expiry} (now {now})", expiry = Capped(expiry), now = Capped(now))]
    #[hint = "have the conductor sign fresh attributes for this node"]
    AttributesExpired { expiry: String, now: String },
    /// The expiry lies further ahead than the policy allows.
    #[code = "expiry-too-far"]
    #[message("expiry {expiry} is further ahead than the policy's maximum of {max_lifetime}",
              expiry = Capped(expiry), max_lifetime = Capped(max_lifetime))]
    #[hint = "sign with a shorter --expires-in, or raise attributes.max_lifetime (templates.max_lifetime for \
              a template)"]
    ExpiryTooFar { expiry: String, max_lifetime: String },
    /// The conductor certificate cannot be decoded or parsed.
    #[code = "conductor-malformed"]
    #[message("the conductor certificate is unreadable: {detail}", detail = Capped(detail))]
    #[hint = "attribute .2.4 must hold the conductor certificate (PEM or base64 DER)"]
    ConductorMalformed { detail: String },
    /// The conductor certificate is not yet valid.
    #[code = "conductor-not-yet-valid"]
    #[message("conductor certificate {subject} is not yet valid", subject = Capped(subject))]
    #[hint(with = RENEW_CONDUCTOR)]
    ConductorNotYetValid { subject: String },
    /// The conductor certificate has expired.
    #[code = "conductor-expired"]
    #[message("conductor certificate {subject} has expired", subject = Capped(subject))]
    #[hint(with = RENEW_CONDUCTOR)]
    ConductorExpired { subject: String },
    /// The conductor certificate does not chain to a trusted root.
    #[code = "conductor-untrusted"]
    #[message("conductor certificate {subject} does not chain to a trusted root: {detail}",
              subject = Capped(subject), detail = Capped(detail))]
    #[hint = "issue the conductor from a root in conductors.trusted_roots, listing any intermediate in conductors.intermediates"]
    ConductorUntrusted { subject: String, detail: String },
    /// The conductor's own certificate lacks EKU .2.0.
    #[code = "conductor-eku-missing"]
    #[message = "conductor certificate {subject} lacks the extended key usage 1.3.6.1.4.1.34380.2.0 (allowed to create new instances)"]
    #[hint = "the conductor certificate itself must carry EKU 1.3.6.1.4.1.34380.2.0 (vouch conductor new adds it)"]
    ConductorEkuMissing { subject: String },
    /// The conductor's own certificate lacks key usage digitalSignature.
    #[code = "conductor-key-usage-missing"]
    #[message("conductor certificate {subject} lacks the key usage digitalSignature", subject = Capped(subject))]
    #[hint = "the conductor certificate must carry key usage digitalSignature"]
    ConductorKeyUsageMissing { subject: String },
    /// The signature attribute is not base64.
    #[code = "signature-malformed"]
    #[message("the signature attribute is not base64: {detail}", detail = Capped(detail))]
    #[hint(with = SIGN_AGAIN)]
    SignatureMalformed { detail: String },
    /// The signature does not verify with the conductor's key.
    #[code = "signature-invalid"]
    #[message("the attribute signature does not verify with the key of conductor {subject}", subject = Capped(subject))]
    #[hint(with = SIGN_AGAIN)]
    SignatureInvalid { subject: String },
    /// The conductor's key type cannot sign attributes.
    #[code = "signature-key-unsupported"]
    #[message("the conductor's key cannot sign attributes: {detail}", detail = Capped(detail))]
    #[hint = "use an RSA, ECDSA P-256/P-384 or Ed25519 conductor key"]
    SignatureKeyUnsupported { detail: String },
    /// The classification is unusable.
    #[code = "classification-invalid"]
    #[message("{error}", error = Capped(error))]
    #[hint(with = classification_hint(error))]
    ClassificationInvalid { error: ClassificationError },
    /// The classification has no exact JSON form for the ENC to print (a key that is not
    /// a string, a `<<` key, a float that is not finite).
    #[code = "classification-unrepresentable"]
    #[message = "the classification cannot be handed to Puppet exactly as signed (the ENC prints JSON): {detail}"]
    #[hint = "use only string keys (quote them: '1': x), no '<<' key and finite numbers; the ENC prints JSON"]
    ClassificationUnrepresentable { detail: String },
    /// More than one extensionRequest attribute, or msExtReq.
    #[code = "extension-request-ambiguous"]
    #[message("ambiguous extension requests: {detail}", detail = Capped(detail))]
    #[hint(with = EXTENSION_ONCE)]
    ExtensionRequestAmbiguous { detail: String },
    /// The same extension requested twice.
    #[code = "extension-duplicated"]
    #[message("extension {oid} is requested more than once", oid = Capped(oid))]
    #[hint(with = EXTENSION_ONCE)]
    ExtensionDuplicated { oid: String },
    /// An extension request is marked critical (in hook mode Puppet Server would copy it so).
    #[code = "extension-critical"]
    #[message = "extension {oid} is requested as critical; no requested extension may be critical \
                 (Puppet Server would copy it into the certificate as critical)"]
    #[hint = "request extensions as non-critical, as Puppet agents do (csr_attributes.yaml extension_requests)"]
    ExtensionCritical { oid: String },
    /// A subjectAltName was requested.
    #[code = "subject-alt-name-requested"]
    #[message = "the CSR requests subjectAltNames, which the policy does not allow (no [[conductor]] scope lists dns_alt_names)"]
    #[hint = "remove dns_alt_names from the node's puppet.conf; for a server, give its conductor's \
              [[conductor]] scope servers and dns_alt_names"]
    SubjectAltNameRequested,
    /// A CSR asks for alt names though no scope marks its certname as a server.
    #[code = "alt-names-not-a-server"]
    #[message("{}", alt_names_not_server(certname, scope))]
    #[hint = "only servers get alt names: remove dns_alt_names from the node's puppet.conf, or add its \
              certname to the servers of its conductor's scope"]
    AltNamesNotServer { certname: String, scope: Option<String> },
    /// Alt names requested with version 1 attributes, which do not sign the certname: the
    /// `servers` pattern would be matched against a CN the node chose.
    #[code = "alt-names-certname-not-vouched"]
    #[message = "{certname} asks for alt names with version {version} attributes, which do not sign the certname: \
                 only a certname a conductor signed (version 2) can be a server"]
    #[hint = "a server's alt names need version 2 attributes, which sign its certname: sign the server's \
              attributes for its certname ('vouch conductor sign --certname NAME')"]
    AltNamesCertnameNotVouched { certname: String, version: u32 },
    /// A server asks for an alt name its scope's `dns_alt_names` does not list.
    #[code = "alt-name-out-of-scope"]
    #[message("scope '{scope}' does not allow the alt name {name:?} (its dns_alt_names)",
              scope = Capped(scope), name = Capped(name))]
    #[hint = "request only names the scope's dns_alt_names lists (puppet.conf dns_alt_names), or add the name there"]
    AltNameOutOfScope { scope: String, name: String },
    /// A requested alt name that is not a valid DNS name (an IP address, a wildcard, an
    /// e-mail address or URI, uppercase...), or a subjectAltName vouch cannot read.
    #[code = "alt-name-unsupported"]
    #[message("unsupported subjectAltName request: {detail}", detail = Capped(detail))]
    #[hint = "request lowercase DNS names only, without wildcards or IP addresses (puppet.conf dns_alt_names)"]
    AltNameUnsupported { detail: String },
    /// An extension in the ppAuthCertExt arc (pp_cli_auth, pp_auth_role…) was requested.
    #[code = "authorization-extension-requested"]
    #[message("the CSR requests the authorization extension {oid}", oid = Capped(oid))]
    #[hint = "authorization extensions grant API rights and are never autosigned; sign such a request by hand"]
    AuthorizationExtensionRequested { oid: String },
    /// A pp_* extension the policy does not allow.
    #[code = "puppet-extension-not-allowed"]
    #[message("the CSR requests the Puppet extension {oid}, which the policy does not allow", oid = Capped(oid))]
    #[hint(with = EXTENSION_NOT_ALLOWED)]
    PuppetExtensionNotAllowed { oid: String },
    /// Any other extension the policy does not allow.
    #[code = "extension-not-allowed"]
    #[message("the CSR requests extension {oid}, which the policy does not allow", oid = Capped(oid))]
    #[hint(with = EXTENSION_NOT_ALLOWED)]
    ExtensionNotAllowed { oid: String },
    /// The classification mirror request differs from the signed classification.
    #[code = "mirror-mismatch"]
    #[message("the classification mirror request {oid} differs from the signed classification", oid = Capped(oid))]
    #[hint(with = MIRROR_UNCHANGED)]
    MirrorMismatch { oid: String },
    /// The policy requires the mirror request and it is absent.
    #[code = "mirror-missing"]
    #[message("the policy requires the classification mirror request {oid}", oid = Capped(oid))]
    #[hint(with = MIRROR_UNCHANGED)]
    MirrorMissing { oid: String },
    /// The CSR requests a Puppet registered extension (`pp_role`, …) that the signed
    /// classification names, with another value (or one that is not a UTF8String).
    #[code = "trusted-fact-mismatch"]
    #[message("the CSR requests {name} = {requested:?}, but the conductor signed {name} = {signed:?}",
        name = Capped(name), requested = Capped(requested), signed = Capped(signed))]
    #[hint = "remove the extension request, or request exactly the value the conductor signed in the classification's extensions"]
    TrustedFactMismatch { name: String, requested: String, signed: String },
    /// Where the mirror is required (Puppet Server as the CA, which copies only what a CSR
    /// requests), a signed trusted fact the CSR does not request: the certificate would lack
    /// it, and `$trusted['extensions']` with it.
    #[code = "trusted-fact-missing"]
    #[message("the conductor signed {name}, and the CSR does not request it: Puppet Server, which copies only \
               what a CSR requests, would issue a certificate without it", name = Capped(name))]
    #[hint = "give the node the csr_attributes.yaml `vouch conductor sign` wrote, whole: its extension_requests \
              carry every signed trusted fact"]
    TrustedFactMissing { name: String },
    /// Version 2: the CSR asks for another certname than the conductor signed.
    #[code = "certname-not-vouched"]
    #[message("the conductor vouched for {signed:?}, not for the certname {certname:?}",
              signed = Capped(signed), certname = Capped(certname))]
    #[hint = "the conductor vouched for another name; sign attributes for this certname (--certname)"]
    CertnameNotVouched { signed: String, certname: String },
    /// Version 2: the nonce is not 32–128 lowercase hex digits.
    #[code = "nonce-malformed"]
    #[message("nonce {value:?} is not 32 to 128 lowercase hex digits", value = Capped(value))]
    #[hint = "use the attributes written by 'vouch conductor sign', unchanged"]
    NonceMalformed { value: String },
    /// Scopes are defined and this conductor matches none.
    #[code = "conductor-unscoped"]
    #[message("conductor {subject} matches no [[conductor]] scope", subject = Capped(subject))]
    #[hint = "add a [[conductor]] scope for it to the policy, or remove all scopes"]
    ConductorUnscoped { subject: String },
    /// The conductor's scope does not cover this certname.
    #[code = "certname-out-of-scope"]
    #[message("scope '{scope}' does not allow the certname {certname:?}",
              scope = Capped(scope), certname = Capped(certname))]
    #[hint(with = OUT_OF_SCOPE)]
    CertnameOutOfScope { scope: String, certname: String },
    /// The conductor's scope does not allow this class.
    #[code = "class-out-of-scope"]
    #[message("scope '{scope}' does not allow the class {class:?}", scope = Capped(scope), class = Capped(class))]
    #[hint(with = OUT_OF_SCOPE)]
    ClassOutOfScope { scope: String, class: String },
    /// The conductor's scope does not allow this environment (or none was set).
    #[code = "environment-out-of-scope"]
    #[message("scope '{scope}' does not allow the environment {environment}",
              scope = Capped(scope), environment = Capped(environment))]
    #[hint(with = OUT_OF_SCOPE)]
    EnvironmentOutOfScope { scope: String, environment: String },
    /// The conductor's scope does not allow this top-level parameter.
    #[code = "parameter-out-of-scope"]
    #[message("scope '{scope}' does not allow the parameter {parameter:?}",
              scope = Capped(scope), parameter = Capped(parameter))]
    #[hint(with = OUT_OF_SCOPE)]
    ParameterOutOfScope { scope: String, parameter: String },
    /// The attributes live longer than the conductor's scope allows.
    #[code = "lifetime-out-of-scope"]
    #[message("scope '{scope}' allows attributes to live at most {max_lifetime}",
              scope = Capped(scope), max_lifetime = Capped(max_lifetime))]
    #[hint(with = OUT_OF_SCOPE)]
    LifetimeOutOfScope { scope: String, max_lifetime: String },
    /// The conductor certificate is on its issuer's CRL.
    #[code = "conductor-revoked"]
    #[message("conductor certificate {subject} is revoked", subject = Capped(subject))]
    #[hint = "the conductor's certificate was revoked; issue it a new one"]
    ConductorRevoked { subject: String },
    /// The data directory's root CRL or recorded root revocations are there but cannot be
    /// read: whether this root's conductor is revoked is unknown (deny by default).
    #[code = "conductor-revocation-unknown"]
    #[message("whether conductor certificate {subject} is revoked is unknown: the data directory's root CRL or \
               root revocations cannot be read ({detail}), and until they can, no conductor of this root is accepted",
              subject = Capped(subject), detail = Capped(detail))]
    #[hint(with = revocation_unknown_hint(detail))]
    ConductorRevocationUnknown { subject: String, detail: String },
    /// These attributes were already used (one-time use).
    #[code = "attributes-replayed"]
    #[message = "these attributes were already used, for {first_certname} at {first_time}; attributes are good once"]
    #[hint = "attributes are good for one certificate; have the conductor sign fresh ones for this node"]
    AttributesReplayed { first_certname: String, first_time: String },
    /// A template (version 3) past its expiry.
    #[code = "template-expired"]
    #[message("the template expired at {expiry} (now {now})", expiry = Capped(expiry), now = Capped(now))]
    #[hint = "have the conductor sign a new template for the group and update its launch template's user-data"]
    TemplateExpired { expiry: String, now: String },
    /// Every use of a template is taken (outside the pure core: it needs the count).
    #[code = "template-exhausted"]
    #[message("the template is used up: its max uses ({max_uses}) are all taken", max_uses = Capped(max_uses))]
    #[hint = "sign a new template (a larger --max-uses, or one per scaling event) and update the group's user-data"]
    TemplateExhausted { max_uses: u64 },
    /// A template's certname pattern (.2.8) breaks the pattern rules.
    #[code = "template-pattern-malformed"]
    #[message("the template's certname pattern {pattern:?} is malformed: {problem}",
              pattern = Capped(pattern), problem = Capped(problem))]
    #[hint = "write PREFIX*.DOMAIN (e.g. web-*.asg.example.com): one '*', at the end of the first label"]
    TemplatePatternMalformed { pattern: String, problem: String },
    /// A template's max uses (.2.9) is not a number the policy accepts.
    #[code = "template-max-uses-invalid"]
    #[message("the template's max uses {value:?} {problem}", value = Capped(value), problem = Capped(problem))]
    #[hint = "sign with a --max-uses within templates.max_uses (1 to 1000000)"]
    TemplateMaxUsesInvalid { value: String, problem: String },
    /// A template signed for more uses than the policy's `templates.max_uses` allows now
    /// (the policy lowered after it was signed).
    #[code = "template-max-uses-above-policy"]
    #[message = "the template was signed for {max_uses} uses, and the policy's templates.max_uses now allows at \
                 most {policy_max}: every node of it is refused"]
    #[hint = "have the conductor sign a new template with --max-uses at most templates.max_uses and update the \
              group's user-data, or raise templates.max_uses in the CA's policy to the template's max uses"]
    TemplateMaxUsesAbovePolicy { max_uses: u64, policy_max: u64 },
    /// The certname does not match the template's pattern.
    #[code = "certname-not-in-template"]
    #[message("certname {certname:?} does not match the template's pattern {pattern:?}",
              certname = Capped(certname), pattern = Capped(pattern))]
    #[hint = "give the instance a certname the pattern matches (puppet.conf certname), or sign a template for it"]
    CertnameNotInTemplate { certname: String, pattern: String },
    /// The template's pattern matches names the conductor's scope does not allow.
    #[code = "template-pattern-out-of-scope"]
    #[message("scope '{scope}' does not cover every name of the template pattern {pattern:?}",
              scope = Capped(scope), pattern = Capped(pattern))]
    #[hint = "sign a pattern within one of the scope's certnames (e.g. scope web-*.example.com: web-eu-*.example.com)"]
    TemplatePatternOutOfScope { scope: String, pattern: String },
    /// An unbound template (.2.10 empty) and `templates.allow_unbound = false`.
    #[code = "template-unbound-forbidden"]
    #[message = "the template is not bound to an instance identity, and the policy forbids unbound templates"]
    #[hint = "sign the template with --identity-binding 'aws:{instance-id}.DOMAIN', or set templates.allow_unbound = true (anyone who reads the user-data can then enroll names of its pattern)"]
    TemplateUnbound,
    /// A template's identity binding (.2.10) is malformed.
    #[code = "identity-binding-malformed"]
    #[message("the template's identity binding {value:?} is malformed: {problem}",
              value = Capped(value), problem = Capped(problem))]
    #[hint = "use an empty binding or aws:{instance-id}.DOMAIN"]
    IdentityBindingMalformed { value: String, problem: String },
    /// A bound template, and the CSR carries no identity document (.2.11).
    #[code = "identity-document-missing"]
    #[message = "the template is bound to the instance's identity, and the request carries no identity document (1.3.6.1.4.1.34380.2.11)"]
    #[hint = "have the instance put its identity document into its CSR attributes before the agent's first run"]
    IdentityDocumentMissing,
    /// An unbound template, and the CSR carries an identity document (.2.11) anyway.
    #[code = "identity-document-unbound"]
    #[message = "the template is not bound to an instance identity, and the request carries an identity document (1.3.6.1.4.1.34380.2.11)"]
    #[hint = "sign the template with --identity-binding 'aws:{instance-id}.DOMAIN' to enroll by the instance's identity, or leave the document out of an unbound template's CSR attributes"]
    IdentityDocumentUnbound,
    /// A bound template, and this CA has no identity verifier configured.
    #[code = "identity-verifier-missing"]
    #[message("the template is bound to an instance identity ({binding}), and this CA has no verifier for it",
              binding = Capped(binding))]
    #[hint = "add an [[identity.aws]] entry to the policy (certificates, accounts, regions and certname_patterns: docs/operator-guide.md, \"Autoscaling groups\"), or sign an unbound template"]
    IdentityVerifierMissing { binding: String },
    /// The identity verifier refused the document: the reason's own code (`identity-unknown-signer`,
    /// `identity-account-not-allowed`, …), message and hint.
    #[code(with = reason.code())]
    #[message("the instance identity document was refused: {reason}", reason = Capped(reason))]
    #[hint(with = reason.hint())]
    IdentityRefused { reason: crate::identity::IdentityRefusal },
    /// The instance already holds a certificate from another template (bound templates:
    /// one certificate per instance id across the fleet, first use wins).
    #[code = "identity-instance-replayed"]
    #[message("instance {instance} already enrolled with another template; each instance id enrolls once",
              instance = Capped(instance))]
    #[hint = "a relaunched instance gets a new instance id; the same id under a second template is a copied or replayed document (find who sent it), or an instance whose claim was kept by a crash while its first template filled up: it may enroll again a day after that template expires"]
    IdentityInstanceReplayed { instance: String },
    /// The certname the identity derives differs from the one asked for.
    #[code = "identity-certname-mismatch"]
    #[message("the instance identity derives certname {derived:?}, not {certname:?}",
              derived = Capped(derived), certname = Capped(certname))]
    #[hint = "the agent's certname must be the one the binding derives from the instance id"]
    IdentityCertnameMismatch { derived: String, certname: String },
    /// The certname already has a valid certificate (issuance: on_existing = refuse).
    #[code = "certificate-exists"]
    #[message("{certname} already has a valid certificate (serial {serial})",
              certname = Capped(certname), serial = Capped(serial))]
    #[hint = "run 'vouch clean NAME' to retire the old certificate, or set issuance.on_existing = \"supersede\""]
    CertificateExists { certname: String, serial: String },
    /// Superseding requires a new key (issuance: on_existing = supersede).
    #[code = "supersede-same-key"]
    #[message("the request for {certname} uses the key of its current certificate; superseding needs a new key",
              certname = Capped(certname))]
    #[hint = "the same key is a renewal: use 'vouch renew NAME'"]
    SupersedeSameKey { certname: String },
    /// Superseding requires attributes that expire later than the old certificate's.
    #[code = "supersede-replay"]
    #[message = "the attributes for {certname} do not expire later than those that vouched for its current certificate (a replay?)"]
    #[hint = "have the conductor sign fresh attributes for the reinstalled host"]
    SupersedeReplay { certname: String },
    /// Renewal: the store does not hold the certificate of the conductor that vouched
    /// (issued before vouch recorded it), so it cannot be checked again.
    #[code = "conductor-not-recorded"]
    #[message = "the certificate of {certname} was issued before vouch recorded the vouching conductor's \
                 certificate; renewal cannot check that conductor against the current policy"]
    #[hint = "have a conductor vouch for the node again: 'vouch clean NAME', then sign a new vouched CSR"]
    ConductorNotRecorded { certname: String },
    /// The certname (or a subjectAltName asked for) is a name of this CA's own service or of
    /// an administrator: never a node's, and never superseded (issuance).
    #[code = "name-reserved"]
    #[message("{}", name_reserved(certname, name, holder))]
    #[hint = "set certname in the agent's puppet.conf to the name the conductor signed (--certname), \
              not this host's name nor a name of the CA service"]
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
}

/// The hint of the refusals that name it.
const SEND_CSR_AS_IS: &str = "send the PEM certificate request exactly as the agent produced it";

/// The hint of the refusals that name it.
const AGENT_KEY: &str = "use an RSA (2048+ bits), ECDSA P-256/P-384 or Ed25519 agent key";

/// The hint of the refusals that name it.
const CN_IS_CERTNAME: &str = "the CSR subject must be CN=<certname>, exactly the name the agent asks for";

/// The hint of the refusals that name it.
const ATTRIBUTES_UNCHANGED: &str =
    "put the csr_attributes.yaml written by 'vouch conductor sign' on the node, unchanged";

/// The hint of the refusals that name it.
const ACCEPTED_VERSION: &str = "sign with a vouch version the policy accepts (attributes.versions)";

/// The hint of the refusals that name it.
const RENEW_CONDUCTOR: &str = "renew the conductor certificate (vouch conductor new) and check the clocks";

/// The hint of the refusals that name it.
const SIGN_AGAIN: &str =
    "a signed value was changed after signing, or another key signed it; sign again with the conductor's own key";

/// The hint of the refusals that name it.
const EXTENSION_ONCE: &str = "request each extension once, in one extensionRequest attribute";

/// The hint of the refusals that name it.
const EXTENSION_NOT_ALLOWED: &str = "remove the extension request, or list it in the policy's extensions.allow";

/// The hint of the refusals that name it.
const MIRROR_UNCHANGED: &str = "use the extension_requests written by 'vouch conductor sign', unchanged";

/// The hint of the refusals that name it.
const OUT_OF_SCOPE: &str =
    "this conductor may not vouch for that; use the conductor in charge of it, or widen its [[conductor]] scope";

/// [`Refusal::ClassificationInvalid`]'s hint: the classification error's own, where it has one.
fn classification_hint(error: &ClassificationError) -> &'static str {
    error
        .hint()
        .unwrap_or("the classification must be base64 of a YAML mapping with classes, parameters and/or environment")
}

/// [`Refusal::ConductorRevocationUnknown`]'s hint: a root CRL the root did not sign, or one that
/// cannot be read.
fn revocation_unknown_hint(detail: &str) -> &'static str {
    if detail.contains(crate::policy::own_crl::NOT_SIGNED_BY_ROOT) {
        "DIR/ca/root_crl.pem must be the root's CRL, signed by the root (a master CA's ca_crl.pem is not \
         it): copy the root's own ROOT_DIR/ca/root_crl.pem over it; where the root key is, any command \
         that touches the store (`vouch list`) writes the root CRL again"
    } else {
        "make DIR/ca/root_crl.pem (and DIR/ca/root_revocations.txt, where the root key is) a readable \
         regular file again: where the root key is, any command that touches the store (`vouch list`) \
         writes the root CRL again; on a master without the root key, copy it again from there"
    }
}

/// [`Refusal::AltNamesNotServer`]'s message: the scope that does not list the certname, or none.
fn alt_names_not_server(certname: &str, scope: &Option<String>) -> String {
    match scope {
        Some(scope) => format!(
            "{certname} asks for alt names, but scope '{scope}' does not list it among its servers: \
             a node that is not a server gets no alt names"
        ),
        None => format!(
            "{certname} asks for alt names, but no [[conductor]] scope of its conductor marks it as a server: \
             a node that is not a server gets no alt names"
        ),
    }
}

/// [`Refusal::NameReserved`]'s message: the name asked for is the certname, or an alt name.
fn name_reserved(certname: &str, name: &str, holder: &str) -> String {
    if certname == name {
        format!("{name} is a name on {holder}; no node may have it", name = Capped(name), holder = Capped(holder))
    } else {
        format!(
            "the request for {certname} asks for {name}, a name on {holder}; no node may have it",
            certname = Capped(certname),
            name = Capped(name),
            holder = Capped(holder)
        )
    }
}

impl std::error::Error for Refusal {}

mod capped;
use capped::Capped;
