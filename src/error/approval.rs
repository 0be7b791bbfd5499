//! Why an administrator's approval of a pending request no conductor vouched for is refused
//! ([`NotApprovable`]): each reason's code, words and hint, stated beside it.

use vouch_derive::{Code, Hint, Message};

/// Why `vouch approve NAME` (or `puppetserver ca sign --certname NAME` of a request no
/// conductor vouched for) issues nothing ([`super::Error::NotApproved`]).
#[derive(Debug, Clone, PartialEq, Eq, Code, Message, Hint)]
#[non_exhaustive]
pub enum NotApprovable {
    /// `issuance.admin_approval` is off (the default): only what a conductor vouched for is signed.
    #[code = "approval-off"]
    #[message = "the policy allows no administrator's approval (issuance.admin_approval is off), and no conductor \
                 vouched for this request"]
    #[hint = "to sign nodes no conductor launched, set `admin_approval = true` under [issuance] in the policy, \
              give the node its classification (`vouch override set NAME --classification FILE`) and approve \
              again; otherwise the node needs attributes a conductor signs"]
    PolicyOff,
    /// No administrator's classification is set for the name.
    #[code = "approval-without-override"]
    #[message = "no classification is set for it: an approval issues the classification an administrator set \
                 (`vouch override set`), and there is none"]
    #[hint = "set it first: `vouch override set NAME --classification FILE` (YAML with classes, parameters, \
              environment), then approve again"]
    NoOverride,
    /// No pending request under the name.
    #[code = "approval-nothing-pending"]
    #[message = "no certificate request is pending for it"]
    #[hint = "`vouch list` shows the pending requests; the node sends one when its agent runs (`puppet ssl \
              bootstrap`)"]
    NothingPending,
    /// The request carries a conductor's attributes (refused by the decision): approval is
    /// for nodes no conductor launched, never a way around a conductor's refused word.
    #[code = "approval-of-vouched-request"]
    #[message = "the request carries a conductor's attributes, which the policy refused: an administrator's \
                 approval is for nodes no conductor launched"]
    #[hint = "`vouch list` shows why the attributes were refused: fix the policy or have the conductor vouch \
              again; or `vouch clean NAME` and let the node request without attributes"]
    CarriesAttributes,
    /// The request asks for names besides its certname (Puppet's `sign` refuses these too
    /// without `--allow-dns-alt-names`).
    #[code = "approval-alt-names"]
    #[message = "the request asks for other names too ({names}); an approval issues the certname alone"]
    #[hint = "`vouch clean NAME` and have the node request without dns_alt_names; a server's alt names come \
              from a conductor's scope (`dns_alt_names`)"]
    AltNames { names: String },
    /// The request's common name is not the name it is pending under, or it cannot be read.
    #[code = "approval-unusable-request"]
    #[message = "the pending request cannot be approved: {detail}"]
    #[hint = "`vouch clean NAME` and let the node send its request again"]
    Unusable { detail: String },
    /// `--fingerprint` is not a SHA-256 fingerprint at all (a typo): nothing is compared.
    #[code = "approval-fingerprint-malformed"]
    #[message = "{given:?} is not a SHA-256 fingerprint (64 hex digits, colons allowed)"]
    #[hint = "copy the request's fingerprint from `vouch list` or `puppetserver ca list`, then approve again; \
              the pending request is untouched"]
    FingerprintMalformed { given: String },
    /// The request pending under the name is not the one whose fingerprint was given: another
    /// request came under the name after it was listed, or the fingerprint is another's.
    #[code = "approval-fingerprint-mismatch"]
    #[message = "the pending request's fingerprint is {have}, not the {given} given"]
    #[hint = "list the request again (`vouch list`) and compare it with the node's own (`puppet ssl verify` \
              prints it on the node): approve only the node's; if the pending one is not the node's, `vouch \
              clean NAME` removes it and the node sends its own again"]
    FingerprintMismatch { have: String, given: String },
    /// The name already has a valid certificate.
    #[code = "approval-certificate-exists"]
    #[message = "it already has a valid certificate (serial {serial})"]
    #[hint = "`vouch clean NAME` first if the node was rebuilt with a new key"]
    CertificateExists { serial: String },
    /// `cert_ttl` / `--ttl` asks for longer than the policy's certificate lifetime (or for none).
    #[code = "approval-ttl-too-long"]
    #[message = "a lifetime of {asked_secs}s is not one the policy allows (1s to {max_secs}s, issuance.validity)"]
    #[hint = "ask for at most issuance.validity (`--ttl` takes 30d, 1y, …), or leave --ttl out for the policy's \
              lifetime"]
    TtlTooLong { asked_secs: u64, max_secs: u64 },
}
