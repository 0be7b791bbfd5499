//! Regenerates `fixtures/`: a test PKI, a policy, one CSR per defect the
//! decision must catch, and the version 1 signature test vectors.
//!
//!     cargo run --example gen_fixtures -- fixtures
//!
//! Everything is dated around FIXTURE_NOW (2030-06-01T12:00:00Z); tests decide
//! "as of" that time (`vouch --now`), so the fixtures never go stale.
//! Keys are fresh on every run; the expectations live in tests/common/mod.rs.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use std::path::PathBuf;
use time::macros::datetime;
use time::OffsetDateTime;
use vouch::encoding::csr::{self, printable, CsrSpec};
use vouch::encoding::{der, oids};
use vouch::issuance::keys::KeyType;
use vouch::vouching::attrs::{canonical_v1, conductor_signature_v1};

/// Tests decide as of this time.
const NOW: &str = "2030-06-01T12:00:00Z";
const EXPIRY: &str = "2030-06-02T12:00:00Z";
const CERTNAME: &str = "web01.example.test";
const CLASSIFICATION: &str = "classes:\n  - profile::web\nparameters:\n  tier: frontend\nenvironment: production\n";

type R<T> = Result<T, Box<dyn std::error::Error>>;

struct Ca {
    cert_der: Vec<u8>,
    key: KeyPair,
    params: CertificateParams,
}

impl Ca {
    fn issuer(&self) -> Issuer<'_, &KeyPair> {
        Issuer::from_params(&self.params, &self.key)
    }
}

fn dn(cn: &str) -> rcgen::DistinguishedName {
    let mut d = rcgen::DistinguishedName::new();
    d.push(DnType::CommonName, cn);
    d
}

fn ca_params(cn: &str, eku: bool) -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name = dn(cn);
    p.not_before = datetime!(2029-01-01 00:00:00 UTC);
    p.not_after = datetime!(2040-01-01 00:00:00 UTC);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    if eku {
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::Other(oids::EKU_CONDUCTOR.to_vec())];
    }
    p
}

fn make_root(cn: &str) -> R<Ca> {
    let key = KeyType::P256.generate()?;
    let params = ca_params(cn, false);
    let cert = params.self_signed(&key)?;
    Ok(Ca { cert_der: cert.der().to_vec(), key, params })
}

fn intermediate(cn: &str, parent: &Ca, eku: bool) -> R<Ca> {
    let key = KeyType::P256.generate()?;
    let params = ca_params(cn, eku);
    let cert = params.signed_by(&key, &parent.issuer())?;
    Ok(Ca { cert_der: cert.der().to_vec(), key, params })
}

struct Conductor {
    cert_der: Vec<u8>,
    key: KeyPair,
}

#[derive(Clone, Copy)]
struct ConductorShape {
    eku: bool,
    digital_signature: bool,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
}

const GOOD: ConductorShape = ConductorShape {
    eku: true,
    digital_signature: true,
    not_before: datetime!(2030-01-01 00:00:00 UTC),
    not_after: datetime!(2031-01-01 00:00:00 UTC),
};

fn conductor(cn: &str, kt: KeyType, issuer: &Ca, shape: ConductorShape) -> R<Conductor> {
    conductor_named(dn(cn), kt, issuer, shape)
}

fn conductor_named(name: rcgen::DistinguishedName, kt: KeyType, issuer: &Ca, shape: ConductorShape) -> R<Conductor> {
    let key = kt.generate()?;
    let mut p = CertificateParams::default();
    p.distinguished_name = name;
    p.not_before = shape.not_before;
    p.not_after = shape.not_after;
    p.is_ca = IsCa::ExplicitNoCa;
    p.key_usages = if shape.digital_signature {
        vec![KeyUsagePurpose::DigitalSignature]
    } else {
        vec![KeyUsagePurpose::KeyEncipherment]
    };
    if shape.eku {
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::Other(oids::EKU_CONDUCTOR.to_vec())];
    } else {
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    }
    p.use_authority_key_identifier_extension = true;
    let cert = p.signed_by(&key, &issuer.issuer())?;
    Ok(Conductor { cert_der: cert.der().to_vec(), key })
}

/// The five values plus what goes around them, all editable for defects.
#[derive(Clone)]
struct Attrs {
    signature: Option<String>,
    version: String,
    expiry: String,
    conductor: String,
    classification: String,
    mirror: Option<String>,
    extra_attributes: Vec<(Vec<u64>, Vec<Vec<u8>>)>,
    extra_extensions: Vec<(Vec<u64>, String)>,
    /// Extension requests marked critical.
    critical: Vec<Vec<u64>>,
    /// Version 2: (certname, nonce).
    binding: Option<(String, String)>,
}

fn b64(s: &str) -> String {
    STANDARD.encode(s.as_bytes())
}

impl Attrs {
    fn new(c: &Conductor) -> Self {
        let classification = b64(CLASSIFICATION);
        Attrs {
            signature: None,
            version: "1".into(),
            expiry: EXPIRY.into(),
            conductor: STANDARD.encode(&c.cert_der),
            mirror: Some(classification.clone()),
            classification,
            extra_attributes: vec![],
            extra_extensions: vec![],
            critical: vec![],
            binding: None,
        }
    }

    /// Version 2, bound to `certname` with `nonce`.
    fn v2(mut self, certname: &str, nonce: &str) -> Self {
        self.version = "2".into();
        self.binding = Some((certname.into(), nonce.into()));
        self
    }

    /// Signs the current values with `key` (sets .2.1).
    fn signed_by(mut self, key: &KeyPair) -> R<Self> {
        self.signature = Some(match &self.binding {
            None => conductor_signature_v1(key, &self.version, &self.expiry, &self.conductor, &self.classification)?,
            Some((c, n)) => vouch::vouching::attrs::conductor_signature(
                key,
                &vouch::vouching::attrs::canonical_v2(
                    &self.version,
                    &self.expiry,
                    &self.conductor,
                    &self.classification,
                    c,
                    n,
                ),
            )?,
        });
        Ok(self)
    }

    /// Sets the classification (and its mirror) to base64 of `yaml`.
    fn classification_raw(mut self, value: String) -> Self {
        self.mirror = Some(value.clone());
        self.classification = value;
        self
    }

    fn spec(&self, cn: &str) -> CsrSpec {
        let mut attributes = vec![];
        if let Some(s) = &self.signature {
            attributes.push((oids::ATTR_SIGNATURE.to_vec(), vec![printable(s)]));
        }
        attributes.push((oids::ATTR_VERSION.to_vec(), vec![printable(&self.version)]));
        attributes.push((oids::ATTR_EXPIRY.to_vec(), vec![printable(&self.expiry)]));
        attributes.push((oids::ATTR_CONDUCTOR.to_vec(), vec![printable(&self.conductor)]));
        attributes.push((oids::ATTR_CLASSIFICATION.to_vec(), vec![printable(&self.classification)]));
        if let Some((c, n)) = &self.binding {
            attributes.push((oids::ATTR_CERTNAME.to_vec(), vec![printable(c)]));
            attributes.push((oids::ATTR_NONCE.to_vec(), vec![printable(n)]));
        }
        attributes.extend(self.extra_attributes.iter().cloned());
        let mut extension_requests = vec![];
        if let Some(m) = &self.mirror {
            extension_requests.push((vouch::policy::DEFAULT_MIRROR_OID.to_vec(), m.clone()));
        }
        extension_requests.extend(self.extra_extensions.iter().cloned());
        CsrSpec { common_name: cn.to_string(), attributes, extension_requests, critical: self.critical.clone() }
    }
}

struct Out {
    dir: PathBuf,
    written: Vec<String>,
}

impl Out {
    fn write(&mut self, rel: &str, bytes: &[u8]) -> R<()> {
        let p = self.dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, bytes)?;
        self.written.push(rel.to_string());
        Ok(())
    }

    fn cert(&mut self, rel: &str, der: &[u8]) -> R<()> {
        self.write(rel, vouch::encoding::pem::encode("CERTIFICATE", der).as_bytes())
    }

    /// Writes a CSR fixture made from `spec` and then altered by `edit`, signed by a fresh P-256 key.
    fn csr_edited(&mut self, name: &str, spec: &CsrSpec, edit: impl Fn(&mut csr::RequestParts)) -> R<()> {
        let key = KeyType::P256.generate()?;
        let mut parts = csr::parts(spec, &key);
        edit(&mut parts);
        let der = csr::assemble(&parts, &key)?;
        self.write(&format!("csr/{name}.csr.pem"), vouch::encoding::pem::encode("CERTIFICATE REQUEST", &der).as_bytes())
    }

    /// Writes a CSR fixture made from `spec`, signed by a fresh node key of `kt`.
    fn csr(&mut self, name: &str, spec: &CsrSpec, kt: KeyType) -> R<()> {
        let key = kt.generate()?;
        let der = csr::build(spec, &key)?;
        self.write(&format!("csr/{name}.csr.pem"), vouch::encoding::pem::encode("CERTIFICATE REQUEST", &der).as_bytes())
    }
}

/// "Billion laughs": nine levels of nine aliases each.
fn alias_bomb() -> String {
    let mut y = String::from("parameters:\n  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let p = format!("*l{}", i - 1);
        let list = [p.as_str(); 9].join(", ");
        y.push_str(&format!("  l{i}: &l{i} [{list}]\n"));
    }
    y
}

fn without(mut spec: CsrSpec, oid: &[u64]) -> CsrSpec {
    spec.attributes.retain(|(o, _)| o != oid);
    spec
}

fn main() -> R<()> {
    let dir = std::env::args().nth(1).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("fixtures"));
    for sub in ["csr", "pki", "vectors"] {
        let _ = std::fs::remove_dir_all(dir.join(sub));
    }
    let mut out = Out { dir: dir.clone(), written: vec![] };

    // The test PKI.
    let root = make_root("vouch fixture root")?;
    let inter = intermediate("vouch fixture conductor intermediate", &root, false)?;
    let eku_inter = intermediate("vouch fixture EKU-only intermediate", &root, true)?;
    let unlisted = intermediate("vouch fixture unlisted intermediate", &root, false)?;
    let rogue = make_root("rogue root")?;
    out.cert("pki/root_crt.pem", &root.cert_der)?;
    out.write(
        "pki/intermediates.pem",
        format!(
            "{}{}",
            vouch::encoding::pem::encode("CERTIFICATE", &inter.cert_der),
            vouch::encoding::pem::encode("CERTIFICATE", &eku_inter.cert_der)
        )
        .as_bytes(),
    )?;
    out.cert("pki/rogue_root_crt.pem", &rogue.cert_der)?;

    let c_p256 = conductor("conductor-p256", KeyType::P256, &root, GOOD)?;
    let c_p384 = conductor("conductor-p384", KeyType::P384, &root, GOOD)?;
    let c_rsa = conductor("conductor-rsa2048", KeyType::Rsa2048, &root, GOOD)?;
    let c_ed = conductor("conductor-ed25519", KeyType::Ed25519, &root, GOOD)?;
    let c_other = conductor("conductor-other", KeyType::P256, &root, GOOD)?;
    let c_via_inter = conductor("conductor-via-intermediate", KeyType::P256, &inter, GOOD)?;
    let c_via_unlisted = conductor("conductor-via-unlisted", KeyType::P256, &unlisted, GOOD)?;
    let c_eku_only_inter = conductor(
        "conductor-eku-only-on-intermediate",
        KeyType::P256,
        &eku_inter,
        ConductorShape { eku: false, ..GOOD },
    )?;
    let c_rogue = conductor("conductor-rogue", KeyType::P256, &rogue, GOOD)?;
    let c_no_eku = conductor("conductor-no-eku", KeyType::P256, &root, ConductorShape { eku: false, ..GOOD })?;
    let c_no_ds = conductor(
        "conductor-no-digital-signature",
        KeyType::P256,
        &root,
        ConductorShape { digital_signature: false, ..GOOD },
    )?;
    let c_expired = conductor(
        "conductor-expired",
        KeyType::P256,
        &root,
        ConductorShape {
            not_before: datetime!(2029-01-01 00:00:00 UTC),
            not_after: datetime!(2030-01-01 00:00:00 UTC),
            ..GOOD
        },
    )?;
    let c_future = conductor(
        "conductor-not-yet-valid",
        KeyType::P256,
        &root,
        ConductorShape {
            not_before: datetime!(2030-07-01 00:00:00 UTC),
            not_after: datetime!(2031-07-01 00:00:00 UTC),
            ..GOOD
        },
    )?;

    // A revoked conductor, and the root's CRL listing it.
    let c_revoked = conductor("conductor-revoked", KeyType::P256, &root, GOOD)?;
    {
        let (_, parsed) = x509_parser::parse_x509_certificate(&c_revoked.cert_der)?;
        let crl = rcgen::CertificateRevocationListParams {
            this_update: datetime!(2030-05-01 00:00:00 UTC),
            next_update: datetime!(2030-05-08 00:00:00 UTC),
            crl_number: rcgen::SerialNumber::from_slice(&[1]),
            issuing_distribution_point: None,
            revoked_certs: vec![rcgen::RevokedCertParams {
                serial_number: rcgen::SerialNumber::from_slice(parsed.raw_serial()),
                revocation_time: datetime!(2030-05-01 00:00:00 UTC),
                reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                invalidity_date: None,
            }],
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        }
        .signed_by(&root.issuer())?;
        out.write("pki/conductors_crl.pem", crl.pem()?.as_bytes())?;
    }

    // Conductor credentials for the CLI tests (test keys, never for real use).
    for (name, c) in [("p256", &c_p256), ("rsa2048", &c_rsa), ("ed25519", &c_ed), ("p384", &c_p384)] {
        out.cert(&format!("pki/conductor-{name}.pem"), &c.cert_der)?;
        out.write(&format!("pki/conductor-{name}.key"), c.key.serialize_pem().as_bytes())?;
    }
    out.write("classification.yaml", CLASSIFICATION.as_bytes())?;

    // Valid requests.
    for (name, c, kt) in [
        ("valid-p256-conductor", &c_p256, KeyType::P256),
        ("valid-p384-conductor", &c_p384, KeyType::P256),
        ("valid-rsa2048-conductor", &c_rsa, KeyType::Rsa2048),
        ("valid-ed25519-conductor", &c_ed, KeyType::Ed25519),
        ("valid-via-listed-intermediate", &c_via_inter, KeyType::P256),
    ] {
        out.csr(name, &Attrs::new(c).signed_by(&c.key)?.spec(CERTNAME), kt)?;
    }
    let mut pem_conductor = Attrs::new(&c_p256);
    pem_conductor.conductor = vouch::encoding::pem::encode("CERTIFICATE", &c_p256.cert_der);
    out.csr("valid-pem-conductor-cert", &pem_conductor.signed_by(&c_p256.key)?.spec(CERTNAME), KeyType::P256)?;
    let mut no_mirror = Attrs::new(&c_p256);
    no_mirror.mirror = None;
    out.csr("mirror-missing", &no_mirror.signed_by(&c_p256.key)?.spec(CERTNAME), KeyType::P256)?;
    {
        let key = KeyType::P256.generate()?;
        let der = csr::build(&Attrs::new(&c_p256).signed_by(&c_p256.key)?.spec(CERTNAME), &key)?;
        out.write("csr/valid-der-encoded.csr.der", &der)?;
        let pem = vouch::encoding::pem::encode("CERTIFICATE REQUEST", &der).replace('\n', "\r\n");
        out.write("csr/valid-crlf-and-junk.csr.txt", format!("leading junk\r\n{pem}trailing junk\r\n").as_bytes())?;
    }

    let good = || Attrs::new(&c_p256);
    let k = &c_p256.key;

    // The CSR itself.
    {
        let key = KeyType::P256.generate()?;
        let mut der = csr::build(&good().signed_by(k)?.spec(CERTNAME), &key)?;
        let last = der.len() - 1;
        der[last] ^= 0x01;
        out.write(
            "csr/csr-bad-self-signature.csr.pem",
            vouch::encoding::pem::encode("CERTIFICATE REQUEST", &der).as_bytes(),
        )?;
        out.write(
            "csr/csr-not-a-request.csr.pem",
            b"-----BEGIN CERTIFICATE REQUEST-----\nMAA=\n-----END CERTIFICATE REQUEST-----\n",
        )?;
    }

    // Names.
    out.csr("cn-differs-from-certname", &good().signed_by(k)?.spec("db01.example.test"), KeyType::P256)?;
    for (name, cn) in [
        ("certname-uppercase", "WEB01.example.test"),
        ("certname-wildcard", "*.example.test"),
        ("certname-trailing-dot", "web01.example.test."),
        ("certname-path-like", "../../etc/passwd"),
    ] {
        out.csr(name, &good().signed_by(k)?.spec(cn), KeyType::P256)?;
    }

    // Attributes present once, one text value each.
    for (name, oid) in [
        ("missing-signature", oids::ATTR_SIGNATURE),
        ("missing-version", oids::ATTR_VERSION),
        ("missing-expiry", oids::ATTR_EXPIRY),
        ("missing-conductor-cert", oids::ATTR_CONDUCTOR),
        ("missing-classification", oids::ATTR_CLASSIFICATION),
    ] {
        out.csr(name, &without(good().signed_by(k)?.spec(CERTNAME), oid), KeyType::P256)?;
    }
    let mut dup = good().signed_by(k)?;
    dup.extra_attributes.push((oids::ATTR_EXPIRY.to_vec(), vec![printable("2030-06-01T13:00:00Z")]));
    out.csr("duplicated-expiry-attribute", &dup.spec(CERTNAME), KeyType::P256)?;
    let mut two = good().signed_by(k)?.spec(CERTNAME);
    for (oid, vals) in two.attributes.iter_mut() {
        if oid == oids::ATTR_CLASSIFICATION {
            vals.push(printable(&b64("classes: [profile::db]\n")));
        }
    }
    out.csr("classification-with-two-values", &two, KeyType::P256)?;
    let mut not_text = good().signed_by(k)?.spec(CERTNAME);
    for (oid, vals) in not_text.attributes.iter_mut() {
        if oid == oids::ATTR_VERSION {
            *vals = vec![der::tlv(der::tag::OCTET_STRING, b"1")];
        }
    }
    out.csr("version-as-octet-string", &not_text, KeyType::P256)?;
    let mut extra = good().signed_by(k)?;
    extra.extra_attributes.push((oids::VOUCH_ARC.iter().copied().chain([9]).collect(), vec![printable("x")]));
    out.csr("unexpected-vouch-attribute", &extra.spec(CERTNAME), KeyType::P256)?;

    // Version and expiry (all correctly signed: the defect is the value itself).
    for (name, version, expiry) in [
        ("version-3-unsupported", "3", EXPIRY),
        ("version-leading-zero", "01", EXPIRY),
        ("expiry-not-rfc3339", "1", "tomorrow"),
        ("attributes-expired", "1", "2030-06-01T11:00:00Z"),
        ("expiry-too-far-ahead", "1", "2030-07-01T12:00:00Z"),
    ] {
        let mut a = good();
        a.version = version.into();
        a.expiry = expiry.into();
        out.csr(name, &a.signed_by(k)?.spec(CERTNAME), KeyType::P256)?;
    }

    // Version 2: bound to the certname, with a nonce.
    const NONCE: &str = "0123456789abcdef0123456789abcdef";
    out.csr("valid-v2", &good().v2(CERTNAME, NONCE).signed_by(k)?.spec(CERTNAME), KeyType::P256)?;
    out.csr(
        "v2-signed-for-another-certname",
        &good().v2("db01.example.test", NONCE).signed_by(k)?.spec(CERTNAME),
        KeyType::P256,
    )?;
    out.csr("v2-nonce-malformed", &good().v2(CERTNAME, "not-hex").signed_by(k)?.spec(CERTNAME), KeyType::P256)?;
    out.csr(
        "v2-missing-nonce",
        &without(good().v2(CERTNAME, NONCE).signed_by(k)?.spec(CERTNAME), oids::ATTR_NONCE),
        KeyType::P256,
    )?;
    let mut v2_tampered = good().v2(CERTNAME, NONCE).signed_by(k)?;
    v2_tampered.binding = Some((CERTNAME.into(), "fedcba9876543210fedcba9876543210".into()));
    out.csr("v2-tampered-nonce", &v2_tampered.spec(CERTNAME), KeyType::P256)?;
    let mut v2_renamed = good().v2("db01.example.test", NONCE).signed_by(k)?;
    v2_renamed.binding = Some((CERTNAME.into(), NONCE.into()));
    out.csr("v2-tampered-certname", &v2_renamed.spec(CERTNAME), KeyType::P256)?;
    let mut downgraded = good().v2(CERTNAME, NONCE).signed_by(k)?;
    downgraded.version = "1".into();
    out.csr("v2-downgraded-to-v1", &downgraded.spec(CERTNAME), KeyType::P256)?;

    // The conductor certificate.
    for (name, c) in [
        ("conductor-untrusted-root", &c_rogue),
        ("conductor-via-unlisted-intermediate", &c_via_unlisted),
        ("conductor-without-eku", &c_no_eku),
        ("conductor-eku-only-on-intermediate", &c_eku_only_inter),
        ("conductor-without-digital-signature", &c_no_ds),
        ("conductor-expired", &c_expired),
        ("conductor-not-yet-valid", &c_future),
    ] {
        out.csr(name, &Attrs::new(c).signed_by(&c.key)?.spec(CERTNAME), KeyType::P256)?;
    }
    out.csr("conductor-revoked", &Attrs::new(&c_revoked).signed_by(&c_revoked.key)?.spec(CERTNAME), KeyType::P256)?;
    let mut root_as_conductor = good();
    root_as_conductor.conductor = STANDARD.encode(&root.cert_der);
    out.csr("conductor-is-the-root-ca", &root_as_conductor.signed_by(&root.key)?.spec(CERTNAME), KeyType::P256)?;
    let mut junk = good();
    junk.conductor =
        format!("{}1.3.6.1.4.1.34380.2.5=x", vouch::encoding::pem::encode("CERTIFICATE", &c_p256.cert_der));
    out.csr("conductor-pem-with-trailing-junk", &junk.signed_by(k)?.spec(CERTNAME), KeyType::P256)?;
    let mut garbage = good();
    garbage.conductor = "bm90IGEgY2VydGlmaWNhdGU=".into();
    out.csr("conductor-cert-garbage", &garbage.signed_by(k)?.spec(CERTNAME), KeyType::P256)?;

    // The signature.
    let mut forged = good();
    forged.signature = Some(STANDARD.encode([0x30u8, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01]));
    out.csr("signature-forged", &forged.spec(CERTNAME), KeyType::P256)?;
    out.csr("signature-by-another-conductor", &good().signed_by(&c_other.key)?.spec(CERTNAME), KeyType::P256)?;
    let mut notb64 = good();
    notb64.signature = Some("not base64 at all!".into());
    out.csr("signature-not-base64", &notb64.spec(CERTNAME), KeyType::P256)?;
    let mut swapped = good().signed_by(k)?;
    swapped.conductor = STANDARD.encode(&c_other.cert_der);
    out.csr("tampered-conductor-cert-swapped", &swapped.spec(CERTNAME), KeyType::P256)?;
    let tampered_class = good().signed_by(k)?.classification_raw(b64("classes:\n  - profile::db\n"));
    out.csr("tampered-classification", &tampered_class.spec(CERTNAME), KeyType::P256)?;
    let mut tampered_expiry = good().signed_by(k)?;
    tampered_expiry.expiry = "2030-06-03T12:00:00Z".into();
    out.csr("tampered-expiry", &tampered_expiry.spec(CERTNAME), KeyType::P256)?;
    let mut tampered_version = good().signed_by(k)?;
    tampered_version.version = "01".into();
    out.csr("tampered-version-1-to-01", &tampered_version.spec(CERTNAME), KeyType::P256)?;

    // The classification (correctly signed: the defect is the value).
    for (name, value) in [
        ("classification-not-base64", "this is not base64!".to_string()),
        ("classification-not-yaml", b64("classes: [unclosed\n")),
        ("classification-not-a-mapping", b64("- profile::web\n")),
        ("classification-unknown-key", b64("classes: [ntp]\nnodes: [x]\n")),
        ("classification-yaml-tag", b64("classes: !ruby/object:Gem::Installer {}\n")),
        // Core-schema (`!!`) tags: libyaml resolves them to tag:yaml.org,2002:... URIs, which
        // serde_yaml_ng dropped, so this one was signed, granted and issued as plain data.
        ("classification-core-yaml-tag", b64("parameters: {a: !!python/object/apply:os.system [\"echo PWNED\"]}\n")),
        // A tag through a %TAG directive's named handle (and the directive itself).
        ("classification-tag-directive", b64("%TAG !e! tag:example.com,2000:\n---\nparameters:\n  a: !e!x b\n")),
        ("classification-too-large", b64(&format!("parameters:\n  blob: '{}'\n", "x".repeat(70_000)))),
        ("classification-deeply-nested", b64(&format!("parameters:\n  x: {}{}\n", "[".repeat(300), "]".repeat(300)))),
        ("classification-alias-bomb", b64(&alias_bomb())),
        // A null key has no JSON form: the ENC could not print it as judged (issue 13).
        ("classification-key-not-json", b64("classes: [profile::web]\nparameters:\n  pad: {~: x}\n  flag: 'off'\n")),
    ] {
        out.csr(name, &good().classification_raw(value).signed_by(k)?.spec(CERTNAME), KeyType::P256)?;
    }

    // Per-conductor scopes (fixtures/policy-scoped.toml lets conductor-p256 vouch for web* nodes with
    // class profile::web, environment production, parameter tier, attributes living at most 2 days).
    out.csr(
        "scope-class-not-allowed",
        &good()
            .classification_raw(b64("classes: [profile::db]\nenvironment: production\n"))
            .signed_by(k)?
            .spec(CERTNAME),
        KeyType::P256,
    )?;
    out.csr(
        "scope-environment-not-allowed",
        &good().classification_raw(b64("classes: [profile::web]\nenvironment: staging\n")).signed_by(k)?.spec(CERTNAME),
        KeyType::P256,
    )?;
    out.csr(
        "scope-environment-missing",
        &good().classification_raw(b64("classes: [profile::web]\n")).signed_by(k)?.spec(CERTNAME),
        KeyType::P256,
    )?;
    out.csr(
        "scope-parameter-not-allowed",
        &good()
            .classification_raw(b64("classes: [profile::web]\nenvironment: production\nparameters:\n  role: db\n"))
            .signed_by(k)?
            .spec(CERTNAME),
        KeyType::P256,
    )?;
    // Puppet reserves the certname "ca" (GET certificate/ca is the CA's own certificate).
    out.csr("certname-reserved", &good().signed_by(k)?.spec("ca"), KeyType::P256)?;
    out.csr("scope-certname-not-allowed", &good().signed_by(k)?.spec("db01.example.test"), KeyType::P256)?;
    let mut long = good();
    long.expiry = "2030-06-04T12:00:00Z".into();
    out.csr("scope-lifetime-too-long", &long.signed_by(k)?.spec(CERTNAME), KeyType::P256)?;
    out.csr("scope-unscoped-conductor", &Attrs::new(&c_other).signed_by(&c_other.key)?.spec(CERTNAME), KeyType::P256)?;
    // policy-scoped.toml's "db-launcher" scope names the subject "CN=db-launcher, O=Example Fleet"
    // (two RDNs). The real one matches; a conductor whose single CN is "db-launcher, O=Example
    // Fleet" prints the same string and must not.
    let mut two_rdns = dn("db-launcher");
    two_rdns.push(DnType::OrganizationName, "Example Fleet");
    let c_db = conductor_named(two_rdns, KeyType::P256, &root, GOOD)?;
    let c_lookalike = conductor("db-launcher, O=Example Fleet", KeyType::P256, &root, GOOD)?;
    let db = |c: &Conductor| -> R<CsrSpec> {
        Ok(Attrs::new(c)
            .classification_raw(b64("classes: [profile::db]\nenvironment: production\n"))
            .signed_by(&c.key)?
            .spec("db01.example.test"))
    };
    out.csr("scope-subject-two-rdns", &db(&c_db)?, KeyType::P256)?;
    out.csr("scope-subject-lookalike-single-cn", &db(&c_lookalike)?, KeyType::P256)?;

    // Extension requests: the node controls these.
    let pp = |arc: &[u64], n: u64| -> Vec<u64> { arc.iter().copied().chain([n]).collect() };
    for (name, oid, value) in [
        ("san-requested", oids::SUBJECT_ALT_NAME.to_vec(), "DNS:puppet".to_string()),
        ("pp-cli-auth-requested", pp(oids::PP_AUTH, 39), "true".into()),
        ("pp-auth-role-requested", pp(oids::PP_AUTH, 13), "admin".into()),
        ("pp-role-requested", pp(oids::PP_REG, 13), "database".into()),
        ("unknown-extension-requested", vec![1, 2, 3, 4], "x".into()),
    ] {
        let mut a = good().signed_by(k)?;
        a.extra_extensions.push((oid, value));
        out.csr(name, &a.spec(CERTNAME), KeyType::P256)?;
    }
    let mut mm = good().signed_by(k)?;
    mm.mirror = Some(b64("classes:\n  - profile::db\n"));
    out.csr("mirror-differs-from-signed-classification", &mm.spec(CERTNAME), KeyType::P256)?;
    let mut dup_ext = good().signed_by(k)?;
    dup_ext.extra_extensions.push((vouch::policy::DEFAULT_MIRROR_OID.to_vec(), dup_ext.classification.clone()));
    out.csr("mirror-requested-twice", &dup_ext.spec(CERTNAME), KeyType::P256)?;
    // The otherwise valid mirror request marked critical: Puppet Server (hook mode) would
    // copy it into the certificate as critical.
    let mut critical = good().signed_by(k)?;
    critical.critical.push(vouch::policy::DEFAULT_MIRROR_OID.to_vec());
    out.csr("extension-requested-critical", &critical.spec(CERTNAME), KeyType::P256)?;

    // Strict DER: encodings another reader could take differently from vouch.
    let valid = good().signed_by(k)?.spec(CERTNAME);
    out.csr_edited("extension-request-with-two-values", &valid, |p| p.extension_request.push(der::sequence(&[])))?;
    out.csr_edited("cn-with-trailing-bytes", &valid, |p| {
        p.subject = der::sequence(&[&der::set_of(vec![der::sequence(&[
            &der::oid(oids::COMMON_NAME),
            &der::utf8_string(CERTNAME),
            &der::utf8_string("db01.example.test"),
        ])])]);
    })?;
    out.csr_edited("key-params-with-trailing-data", &valid, |p| {
        // The same P-256 key, with a NULL after the curve OID.
        let mut r = der::Reader::new(&p.spki);
        let Ok(outer) = r.any() else { return };
        let mut f = der::Reader::new(outer.content);
        let (Ok(alg), Ok(bits)) = (f.any(), f.any()) else { return };
        let alg = der::sequence(&[alg.content, &der::tlv(der::tag::NULL, &[])]);
        p.spki = der::sequence(&[&alg, bits.raw]);
    })?;
    out.csr_edited("critical-flag-not-der-boolean", &valid, |p| {
        let value = der::octet_string(&der::utf8_string(&b64(CLASSIFICATION)));
        let flag = der::tlv(der::tag::BOOLEAN, &[0x00, 0xff]);
        let ext = der::sequence(&[&der::oid(vouch::policy::DEFAULT_MIRROR_OID), &flag, &value]);
        p.extension_request = vec![der::sequence(&[&ext])];
    })?;

    // Not a CSR at all.
    out.write("csr/input-garbage.csr.txt", b"\x00\xffthis is not a certificate request\x01\x02")?;
    out.write("csr/input-empty.csr.txt", b"")?;
    {
        let key = KeyType::P256.generate()?;
        let der = csr::build(&good().signed_by(k)?.spec(CERTNAME), &key)?;
        let half = &der[..der.len() / 2];
        out.write("csr/input-truncated.csr.pem", vouch::encoding::pem::encode("CERTIFICATE REQUEST", half).as_bytes())?;
    }

    // Test vectors for other implementations: version 1 and version 2 for each key type.
    for (name, c) in [("p256", &c_p256), ("p384", &c_p384), ("rsa2048", &c_rsa), ("ed25519", &c_ed)] {
        for version in [1, 2] {
            let base = Attrs::new(c);
            let a = if version == 2 { base.v2(CERTNAME, NONCE) } else { base }.signed_by(&c.key)?;
            let canonical = match &a.binding {
                None => canonical_v1(&a.version, &a.expiry, &a.conductor, &a.classification),
                Some((cn, n)) => {
                    vouch::vouching::attrs::canonical_v2(&a.version, &a.expiry, &a.conductor, &a.classification, cn, n)
                }
            };
            let mut attributes = serde_json::json!({
                "1.3.6.1.4.1.34380.2.1": a.signature,
                "1.3.6.1.4.1.34380.2.2": a.version,
                "1.3.6.1.4.1.34380.2.3": a.expiry,
                "1.3.6.1.4.1.34380.2.4": a.conductor,
                "1.3.6.1.4.1.34380.2.5": a.classification,
            });
            if let Some((cn, n)) = &a.binding {
                attributes["1.3.6.1.4.1.34380.2.6"] = serde_json::json!(cn);
                attributes["1.3.6.1.4.1.34380.2.7"] = serde_json::json!(n);
            }
            let v = serde_json::json!({
                "description": format!("vouch signature version {version} with a {name} conductor key"),
                "algorithm": match name {
                    "p256" => "ECDSA P-256 with SHA-256, DER signature",
                    "p384" => "ECDSA P-384 with SHA-384, DER signature",
                    "rsa2048" => "RSA PKCS#1 v1.5 with SHA-256",
                    _ => "Ed25519",
                },
                "attributes": attributes,
                "canonical_string": String::from_utf8(canonical)?,
                "conductor_private_key_pem": c.key.serialize_pem(),
            });
            out.write(
                &format!("vectors/v{version}-{name}.json"),
                (serde_json::to_string_pretty(&v)? + "\n").as_bytes(),
            )?;
        }
    }

    out.write("NOW", format!("{NOW}\n").as_bytes())?;
    out.written.sort();
    let listing = out.written.join("\n") + "\n";
    std::fs::write(dir.join("MANIFEST"), listing)?;
    eprintln!("wrote {} files under {}", out.written.len(), dir.display());
    Ok(())
}
