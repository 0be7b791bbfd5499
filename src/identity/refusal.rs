//! Why an instance identity document is refused: one variant per reason, each with its
//! stable code, message and hint beside it. Values shown come from the document only after
//! its size is bounded, and are cut short here ([`short`]).

use vouch_derive::{Code, Hint, Message};

const CLOUD_SIDE: &str = "the node sends the document its cloud's metadata service gave it, unchanged: \
                          re-run the template's cloud-init snippet on the instance";
const POLICY_PINS: &str = "a template bound to the instance is honoured only for the accounts and regions \
                           its [[identity.aws]] policy entry lists: add it there if this instance is yours";

/// One reason to refuse an instance identity document.
#[derive(Debug, Clone, PartialEq, Eq, Code, Message, Hint)]
#[non_exhaustive]
pub enum IdentityRefusal {
    /// The template is bound to the instance and the CSR carries no identity document.
    #[code = "identity-document-missing"]
    #[message = "the template is bound to the instance and the request carries no identity document \
                 (attribute 1.3.6.1.4.1.34380.2.11)"]
    #[hint = "the bound template's user-data has a cloud-init part that adds the document to \
              csr_attributes.yaml before the agent runs: check it ran (cloud-init status --long)"]
    DocumentMissing,
    /// The document (or its base64 text) is larger than any a cloud issues.
    #[code = "identity-document-too-large"]
    #[message("the identity document is {size} bytes; at most {max} are read")]
    #[hint(with = CLOUD_SIDE)]
    DocumentTooLarge { size: usize, max: usize },
    /// The attribute is not base64.
    #[code = "identity-document-not-base64"]
    #[message = "the identity document attribute is not base64 text"]
    #[hint(with = CLOUD_SIDE)]
    NotBase64,
    /// Not a PKCS#7 SignedData, or a broken one.
    #[code = "identity-not-pkcs7"]
    #[message("the identity document is not a PKCS#7 signed document: {detail}")]
    #[hint = "send the RSA-2048 signature from /latest/dynamic/instance-identity/rsa2048, base64 as served"]
    NotPkcs7 { detail: String },
    /// A SignedData without the document inside.
    #[code = "identity-document-detached"]
    #[message = "the PKCS#7 signature does not carry the document it signs"]
    #[hint = "send the rsa2048 signature (it holds the document), not the detached 'signature' endpoint"]
    Detached,
    /// Other than one signer.
    #[code = "identity-signer-count"]
    #[message("the identity signature has {count} signers; exactly one is required")]
    #[hint(with = CLOUD_SIDE)]
    SignerCount { count: usize },
    /// A digest or signature algorithm other than SHA-256 with RSA.
    #[code = "identity-algorithm-unsupported"]
    #[message("the identity signature uses {algorithm}; only SHA-256 with RSA is verified")]
    #[hint = "use the rsa2048 endpoint (SHA-256, RSA-2048), not the DSA pkcs7 one"]
    AlgorithmUnsupported { algorithm: String },
    /// The signer is none of the provider certificates the policy names.
    #[code = "identity-unknown-signer"]
    #[message = "the identity document is signed by a certificate the policy does not name for this template"]
    #[hint = "put the cloud's published RSA-2048 certificate for the instance's region in the \
              [[identity.aws]] entry's certificates (docs/operator-guide.md)"]
    UnknownSigner,
    /// The signed attributes' messageDigest is not the document's digest.
    #[code = "identity-digest-mismatch"]
    #[message = "the identity signature was made over other bytes than the document it carries"]
    #[hint(with = CLOUD_SIDE)]
    DigestMismatch,
    /// The signature does not verify with the signer's certificate.
    #[code = "identity-bad-signature"]
    #[message = "the identity document's signature does not verify with the provider certificate"]
    #[hint(with = CLOUD_SIDE)]
    BadSignature,
    /// The provider certificate is outside its validity.
    #[code = "identity-provider-certificate-expired"]
    #[message = "the provider certificate that signed the identity document is not valid now"]
    #[hint = "fetch the cloud's current certificate for the region and name it in the policy"]
    ProviderCertificateExpired,
    /// The signed document is not the JSON a cloud writes.
    #[code = "identity-document-invalid"]
    #[message("the signed identity document is not valid: {detail}")]
    #[hint(with = CLOUD_SIDE)]
    DocumentInvalid { detail: String },
    /// The binding in the signed attributes cannot be read.
    #[code = "identity-binding-invalid"]
    #[message(
        "the template's identity binding {binding:?} is not provider:certname-template with one {{instance-id}}"
    )]
    #[hint = "sign the template with e.g. aws:{instance-id}.web.example.com"]
    BindingInvalid { binding: String },
    /// A provider this vouch does not verify yet.
    #[code = "identity-provider-unsupported"]
    #[message("identity provider {provider:?} is not supported; only aws is")]
    #[hint = "bind the template to aws, or leave it unbound"]
    ProviderUnsupported { provider: String },
    /// No policy entry covers the certname the template makes.
    #[code = "identity-not-configured"]
    #[message("no [[identity.aws]] entry of the policy covers certname {certname:?}")]
    #[hint = "add an [[identity.aws]] entry whose certname_patterns match the template's certnames"]
    NotConfigured { certname: String },
    /// The account is not one the template's policy entry allows.
    #[code = "identity-account-not-allowed"]
    #[message("the instance runs in account {account:?}, which policy entry {entry:?} does not allow")]
    #[hint(with = POLICY_PINS)]
    AccountNotAllowed { account: String, entry: String },
    /// The region is not one the template's policy entry allows.
    #[code = "identity-region-not-allowed"]
    #[message("the instance runs in region {region:?}, which policy entry {entry:?} does not allow")]
    #[hint(with = POLICY_PINS)]
    RegionNotAllowed { region: String, entry: String },
    /// The certname is not the one the template derives from the instance id.
    #[code = "identity-certname-not-derived"]
    #[message("certname {certname:?} is not {derived:?}, the one the template derives from instance {instance_id}")]
    #[hint = "set the agent's certname from the instance id as the template says (the cloud-init part does)"]
    CertnameNotDerived { certname: String, derived: String, instance_id: String },
    /// The document's instance was launched longer ago than the policy entry allows.
    #[code = "identity-document-stale"]
    #[message(
        "instance {instance_id} was launched at {pending}, more than {max_age} ago: policy entry {entry:?} \
               honours a document only that long after launch"
    )]
    #[hint = "instances enroll at boot; if this one's agent first runs later, raise the [[identity.aws]] \
              entry's max_document_age (docs/operator-guide.md); a document kept or copied for later is refused here"]
    DocumentStale { instance_id: String, pending: String, max_age: String, entry: String },
    /// The document's launch time is later than now, beyond the clock skew allowed.
    #[code = "identity-document-from-the-future"]
    #[message("instance {instance_id} says it was launched at {pending}, later than this CA's clock allows")]
    #[hint = "check the CA host's clock (NTP); the cloud's clock is the reference"]
    DocumentFromTheFuture { instance_id: String, pending: String },
}

impl std::error::Error for IdentityRefusal {}

/// A value from a document shown in a message: at most 64 characters.
pub fn short(s: &str) -> String {
    if s.chars().count() <= 64 {
        return s.to_string();
    }
    let head: String = s.chars().take(64).collect();
    format!("{head}…({} bytes)", s.len())
}
