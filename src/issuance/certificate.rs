//! Issuance: the node certificate profile. Knows no policy: it consumes an
//! [`Authorization`] that only the decision (a [`Grant`]) or a verified renewal
//! can produce, prepares the certificate, and signs it exactly once.

use crate::decision::Grant;
use crate::encoding::csr::KeyKind;
use crate::encoding::hex;
use crate::encoding::oids;
use rcgen::{
    CertificateParams, CustomExtension, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, SerialNumber, SubjectPublicKeyInfo,
};
use time::{Duration, OffsetDateTime};

/// Why issuance failed (never a policy reason: those are refusals).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IssueError {
    /// The master CA expires before the certificate could start.
    CaExpired { not_after: String },
    /// The public key or names could not be encoded.
    Encoding { detail: String },
}

impl std::fmt::Display for IssueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IssueError::CaExpired { not_after } => {
                write!(f, "the master CA expired at {not_after}")
            }
            IssueError::Encoding { detail } => write!(f, "cannot encode the certificate: {detail}"),
        }
    }
}

impl std::error::Error for IssueError {}

/// An issuance failure as a command error (a cryptographic one: policy reasons are refusals).
impl From<IssueError> for crate::error::Error {
    fn from(e: IssueError) -> Self {
        crate::error::Error::Crypto { detail: e.to_string() }
    }
}

/// The master CA that signs node certificates.
pub struct MasterCa {
    pub cert_der: Vec<u8>,
    pub not_after: OffsetDateTime,
    pub(crate) issuer: Issuer<'static, KeyPair>,
    /// PEM of the master CA then the root, sent after every certificate.
    pub chain_pem: String,
}

impl MasterCa {
    pub fn new(cert_der: Vec<u8>, key: KeyPair, chain_pem: String) -> Result<Self, IssueError> {
        let (_, cert) = x509_parser::parse_x509_certificate(&cert_der)
            .map_err(|e| IssueError::Encoding { detail: format!("master CA certificate: {e}") })?;
        let not_after = cert.validity().not_after.to_datetime();
        let issuer = Issuer::from_ca_cert_der(&rustls_pki_types::CertificateDer::from(cert_der.as_slice()), key)
            .map_err(|e| IssueError::Encoding { detail: format!("master CA certificate: {e}") })?;
        Ok(MasterCa { cert_der, not_after, issuer, chain_pem })
    }
}

/// Proof that a certificate renewal was checked: the existing certificate is
/// vouch's own, current, and unrevoked. Only the authority constructs it.
#[derive(Debug)]
pub struct RenewalProof {
    pub(crate) certname: String,
    pub(crate) spki: Vec<u8>,
    pub(crate) key_kind: KeyKind,
    pub(crate) classification_b64: String,
    /// Extensions of the current certificate that the policy allows (OID, DER value).
    pub(crate) extra: Vec<(Vec<u64>, Vec<u8>)>,
    /// The signed trusted facts of the classification it carries (`pp_role`, …).
    pub(crate) trusted: Vec<crate::decision::TrustedFact>,
    /// The agent renews itself (`POST certificate_renewal`): the policy's auto-renewal lifetime.
    pub(crate) auto_renew: bool,
    /// The current certificate's DNS names besides the certname, allowed again by the
    /// current policy's scope for its conductor.
    pub(crate) alt_names: Vec<String>,
}

/// The role of a certificate the CA issues for its own operators and services
/// (never for a node: nodes are vouched for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalRole {
    /// The HTTPS service's own certificate (`vouch serve`): serverAuth, DNS/IP SANs.
    Server,
    /// An administrator's client certificate: clientAuth and Puppet's `pp_cli_auth`.
    Admin,
}

/// Proof that the operator, on the CA's own machine, asked for a service or admin
/// certificate with a key vouch generated itself. Only the authority constructs it.
#[derive(Debug)]
pub struct LocalProof {
    pub(crate) certname: String,
    pub(crate) spki: Vec<u8>,
    pub(crate) key_kind: KeyKind,
    pub(crate) role: LocalRole,
    pub(crate) dns_names: Vec<String>,
    pub(crate) ip_addresses: Vec<std::net::IpAddr>,
}

/// Proof that an administrator approved a pending request no conductor vouched for, under a
/// policy that allows it (`issuance.admin_approval`): the certificate carries the
/// classification the administrators set for its name, nothing the request asked for but
/// its key and name. Only the authority constructs it (`vouch approve`).
#[derive(Debug)]
pub struct ApprovalProof {
    pub(crate) certname: String,
    pub(crate) spki: Vec<u8>,
    pub(crate) key_kind: KeyKind,
    /// The administrators' classification (their override of the name), base64.
    pub(crate) classification_b64: String,
    /// A lifetime shorter than the policy's (`puppetserver ca sign --ttl`), if asked for.
    pub(crate) ttl: Option<std::time::Duration>,
    /// The trusted facts (`pp_role`, …) the override's classification names, written as
    /// Puppet's own extensions, as a conductor's would be.
    pub(crate) trusted: Vec<crate::decision::TrustedFact>,
}

/// What entitles a certificate to be issued.
#[derive(Debug)]
pub enum Authorization {
    /// A granted decision on a vouched CSR.
    Vouched(Box<Grant>),
    /// A renewal of a checked existing certificate.
    Renewal(RenewalProof),
    /// A service or admin certificate made on the CA's machine.
    Local(LocalProof),
    /// An administrator's approval of a node no conductor launched.
    Approved(ApprovalProof),
}

impl Authorization {
    pub fn certname(&self) -> &str {
        match self {
            Authorization::Vouched(g) => g.certname(),
            Authorization::Renewal(r) => &r.certname,
            Authorization::Local(l) => &l.certname,
            Authorization::Approved(a) => &a.certname,
        }
    }
    pub fn spki(&self) -> &[u8] {
        match self {
            Authorization::Vouched(g) => &g.csr().spki,
            Authorization::Renewal(r) => &r.spki,
            Authorization::Local(l) => &l.spki,
            Authorization::Approved(a) => &a.spki,
        }
    }
    /// The classification the certificate carries; none for service and admin certificates.
    pub fn classification_base64(&self) -> Option<&str> {
        match self {
            Authorization::Vouched(g) => Some(g.classification_base64()),
            Authorization::Renewal(r) => Some(&r.classification_b64),
            Authorization::Local(_) => None,
            Authorization::Approved(a) => Some(&a.classification_b64),
        }
    }
    /// Whether the certificate is for an agent that renews itself (Puppet 8's
    /// `pp_auth_auto_renew`, or a renewal it asked for).
    pub fn auto_renew(&self) -> bool {
        match self {
            Authorization::Vouched(g) => g.auto_renew(),
            Authorization::Renewal(r) => r.auto_renew,
            // An approved node does not renew (no conductor to check again).
            Authorization::Local(_) | Authorization::Approved(_) => false,
        }
    }
    /// The signed trusted facts (`pp_role`, …), each written as Puppet's own extension.
    fn trusted_facts(&self) -> &[crate::decision::TrustedFact] {
        match self {
            Authorization::Vouched(g) => g.trusted_facts(),
            Authorization::Renewal(r) => &r.trusted,
            Authorization::Approved(a) => &a.trusted,
            Authorization::Local(_) => &[],
        }
    }
    /// Requested extensions the policy allows, to copy into the certificate (OID, DER value).
    fn allowed_extensions(&self, allowed: &[Vec<u64>]) -> Vec<(Vec<u64>, Vec<u8>)> {
        match self {
            Authorization::Vouched(g) => g
                .csr()
                .extensions
                .iter()
                .filter(|e| allowed.contains(&e.oid))
                .map(|e| (e.oid.clone(), e.value.clone()))
                .collect(),
            Authorization::Renewal(r) => r.extra.clone(),
            // An approval copies nothing the request asked for (its pp_* requests included).
            Authorization::Local(_) | Authorization::Approved(_) => Vec::new(),
        }
    }
    fn key_kind(&self) -> KeyKind {
        match self {
            Authorization::Vouched(g) => g.csr().key_kind,
            Authorization::Renewal(r) => r.key_kind,
            Authorization::Local(l) => l.key_kind,
            Authorization::Approved(a) => a.key_kind,
        }
    }
}

/// A certificate ready to sign. [`Prepared::issue`] consumes it: one preparation, one signature.
pub struct Prepared {
    params: CertificateParams,
    spki: SubjectPublicKeyInfo,
    pub certname: String,
    pub serial_hex: String,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
    pub classification_b64: String,
}

/// A signed certificate.
#[derive(Debug, Clone)]
pub struct Issued {
    pub certname: String,
    pub serial_hex: String,
    pub der: Vec<u8>,
    pub pem: String,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
}

fn utf8_ext(oid: &[u64], value: &str) -> (Vec<u64>, Vec<u8>) {
    (oid.to_vec(), crate::encoding::der::utf8_string(value))
}

/// Builds the node certificate for `auth` (consumed).
pub fn prepare(
    auth: Authorization,
    profile: &crate::policy::Profile,
    mirror_oid: &[u64],
    allowed: &[Vec<u64>],
    serial: &[u8],
    ca: &MasterCa,
    now: OffsetDateTime,
) -> Result<Prepared, IssueError> {
    let certname = auth.certname().to_string();
    let Validity { not_before, not_after } = validity(profile, ca, now)?;
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, certname.as_str());
    p.distinguished_name = dn;
    p.subject_alt_names = subject_alt_names(&auth, &certname)?;
    p.serial_number = Some(SerialNumber::from_slice(serial));
    p.not_before = not_before;
    p.not_after = not_after;
    p.is_ca = IsCa::ExplicitNoCa;
    p.key_usages = key_usages(auth.key_kind());
    p.extended_key_usages = extended_key_usages(&auth);
    p.use_authority_key_identifier_extension = true;
    let classification_b64 = auth.classification_base64().unwrap_or_default().to_string();
    p.custom_extensions = custom_extensions(&auth, mirror_oid, allowed);
    let spki =
        SubjectPublicKeyInfo::from_der(auth.spki()).map_err(|e| IssueError::Encoding { detail: e.to_string() })?;
    Ok(Prepared {
        params: p,
        spki,
        certname,
        serial_hex: crate::encoding::hex(serial),
        not_before,
        not_after,
        classification_b64,
    })
}

/// A certificate's validity period.
struct Validity {
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
}

/// notBefore (backdated) and notAfter (capped by the master CA and the profile's cap).
fn validity(profile: &crate::policy::Profile, ca: &MasterCa, now: OffsetDateTime) -> Result<Validity, IssueError> {
    // Checked: `now` (--now) and the policy's durations are user input. A validity reaching
    // past the year 9999 is past the master CA's notAfter too, which caps it anyway; a
    // backdate before the year 1 starts at `now` (the CA's own notBefore bounds both).
    let backdate = Duration::try_from(profile.backdate).unwrap_or(Duration::DAY);
    let not_before = now.checked_sub(backdate).unwrap_or(now);
    let validity = Duration::try_from(profile.validity).unwrap_or(Duration::days(5 * 365));
    let mut not_after = now.checked_add(validity).unwrap_or(ca.not_after);
    if not_after > ca.not_after {
        not_after = ca.not_after;
    }
    if let Some(cap) = profile.cap {
        if not_after > cap {
            not_after = cap;
        }
    }
    if not_after <= now {
        return Err(IssueError::CaExpired { not_after: crate::encoding::time::format_rfc3339(ca.not_after) });
    }
    Ok(Validity { not_before, not_after })
}

/// The certname as a DNS name, then a server's alt names; for a local certificate, its other
/// DNS names and IP addresses too.
fn subject_alt_names(auth: &Authorization, certname: &str) -> Result<Vec<SanType>, IssueError> {
    let dns_name = |n: &str| {
        n.to_string()
            .try_into()
            .map(SanType::DnsName)
            .map_err(|e| IssueError::Encoding { detail: format!("{n:?} as DNS name: {e}") })
    };
    let mut names = vec![dns_name(certname)?];
    // A server's alt names, as its scope allowed them (the decision's step 11, or a renewal
    // that checked them again).
    let alt: &[String] = match auth {
        Authorization::Vouched(g) => g.alt_names(),
        Authorization::Renewal(r) => &r.alt_names,
        Authorization::Local(_) | Authorization::Approved(_) => &[],
    };
    for n in alt.iter().filter(|n| **n != certname) {
        names.push(dns_name(n)?);
    }
    if let Authorization::Local(l) = auth {
        for n in l.dns_names.iter().filter(|n| **n != certname) {
            names.push(dns_name(n)?);
        }
        names.extend(l.ip_addresses.iter().map(|ip| SanType::IpAddress(*ip)));
    }
    Ok(names)
}

fn key_usages(kind: KeyKind) -> Vec<KeyUsagePurpose> {
    match kind {
        KeyKind::Rsa { .. } => vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment],
        _ => vec![KeyUsagePurpose::DigitalSignature],
    }
}

/// clientAuth for an administrator; serverAuth and clientAuth for everyone else.
fn extended_key_usages(auth: &Authorization) -> Vec<ExtendedKeyUsagePurpose> {
    match auth {
        Authorization::Local(LocalProof { role: LocalRole::Admin, .. }) => vec![ExtendedKeyUsagePurpose::ClientAuth],
        _ => vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth],
    }
}

/// The classification (under its own OID and the mirror OID), `pp_cli_auth` for an
/// administrator, the signed trusted facts, then the requested extensions the policy allows;
/// each OID once (the first wins: a signed value over a requested one).
fn custom_extensions(auth: &Authorization, mirror_oid: &[u64], allowed: &[Vec<u64>]) -> Vec<CustomExtension> {
    let mut extensions: Vec<(Vec<u64>, Vec<u8>)> = match auth.classification_base64() {
        Some(c) => vec![utf8_ext(oids::ATTR_CLASSIFICATION, c), utf8_ext(mirror_oid, c)],
        None => Vec::new(),
    };
    if let Authorization::Local(LocalProof { role: LocalRole::Admin, .. }) = auth {
        // Puppet's pp_cli_auth ("true"): what Puppet Server's own admin certificates carry.
        extensions.push(utf8_ext(oids::PP_CLI_AUTH, "true"));
    }
    // Signed trusted facts as Puppet itself writes an extension request: a DER UTF8String,
    // which Puppet decodes into $trusted['extensions'] under the short name.
    for fact in auth.trusted_facts() {
        extensions.push(utf8_ext(&fact.oid, &fact.value));
    }
    // Extension requests the policy allows are copied as requested (as Puppet Server does);
    // nothing else a node asked for reaches the certificate.
    extensions.extend(auth.allowed_extensions(allowed));
    let mut seen = std::collections::HashSet::new();
    extensions
        .into_iter()
        .filter(|(oid, _)| seen.insert(oid.clone()))
        .map(|(oid, value)| CustomExtension::from_oid_content(&oid, value))
        .collect()
}

impl Prepared {
    /// A digest of what will be signed (for the intent record).
    pub fn digest(&self) -> String {
        let mut h = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
        for part in [
            self.certname.as_bytes(),
            self.serial_hex.as_bytes(),
            self.classification_b64.as_bytes(),
            crate::encoding::time::format_rfc3339(self.not_before).as_bytes(),
            crate::encoding::time::format_rfc3339(self.not_after).as_bytes(),
        ] {
            h.update(part);
            h.update(b"\n");
        }
        hex(h.finish().as_ref())
    }

    /// Replaces the serial (when the drawn one was already used).
    pub fn reserial(&mut self, serial: &[u8]) {
        self.params.serial_number = Some(SerialNumber::from_slice(serial));
        self.serial_hex = hex(serial);
    }

    /// Signs. Consumes the preparation.
    pub fn issue(self, ca: &MasterCa) -> Result<Issued, IssueError> {
        let cert = self
            .params
            .signed_by(&self.spki, &ca.issuer)
            .map_err(|e| IssueError::Encoding { detail: e.to_string() })?;
        Ok(Issued {
            certname: self.certname,
            serial_hex: self.serial_hex,
            der: cert.der().to_vec(),
            pem: cert.pem(),
            not_before: self.not_before,
            not_after: self.not_after,
        })
    }
}

/// Reads the classification a vouch-issued (or Puppet Server-issued, via the
/// mirror) certificate carries: the .2.5 extension, else `mirror_oid`.
pub fn classification_of(cert_der: &[u8], mirror_oid: &[u64]) -> Result<Option<String>, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der).map_err(|e| e.to_string())?;
    let mut mirror = None;
    for ext in cert.extensions() {
        let arcs: Option<Vec<u64>> = ext.oid.iter().map(|i| i.collect());
        let Some(arcs) = arcs else { continue };
        let is_main = arcs == oids::ATTR_CLASSIFICATION;
        if !is_main && arcs != mirror_oid {
            continue;
        }
        let mut r = crate::encoding::der::Reader::new(ext.value);
        let t = r.any().map_err(|e| e.to_string())?;
        let s = std::str::from_utf8(t.content).map_err(|_| "classification extension is not UTF-8".to_string())?;
        if is_main {
            return Ok(Some(s.to_string()));
        }
        mirror = Some(s.to_string());
    }
    Ok(mirror)
}
