//! Key types vouch generates and loads.
#![deny(clippy::arithmetic_side_effects)]

use rcgen::KeyPair;

/// A key type for CAs, conductors and nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyType {
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

impl KeyType {
    pub fn name(self) -> &'static str {
        match self {
            KeyType::P256 => "p256",
            KeyType::P384 => "p384",
            KeyType::Ed25519 => "ed25519",
            KeyType::Rsa2048 => "rsa2048",
            KeyType::Rsa3072 => "rsa3072",
            KeyType::Rsa4096 => "rsa4096",
        }
    }

    /// The article before [`KeyType::name`] in a sentence: "an ed25519", "an rsa2048" (R read
    /// as "ar"), "a p256".
    pub fn article(self) -> &'static str {
        match self {
            KeyType::P256 | KeyType::P384 => "a",
            KeyType::Ed25519 | KeyType::Rsa2048 | KeyType::Rsa3072 | KeyType::Rsa4096 => "an",
        }
    }

    /// Generates a fresh key of this type.
    pub fn generate(self) -> Result<KeyPair, rcgen::Error> {
        use rcgen::RsaKeySize;
        match self {
            KeyType::P256 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256),
            KeyType::P384 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384),
            KeyType::Ed25519 => KeyPair::generate_for(&rcgen::PKCS_ED25519),
            KeyType::Rsa2048 => KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_2048),
            KeyType::Rsa3072 => KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_3072),
            KeyType::Rsa4096 => KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_4096),
        }
    }
}

/// Loads a private key from PEM: PKCS#8 ("PRIVATE KEY"), PKCS#1 ("RSA PRIVATE
/// KEY") or SEC1 ("EC PRIVATE KEY"), as openssl and Puppet write them.
pub fn load_pem(pem: &str) -> Result<KeyPair, String> {
    KeyPair::from_pem(pem).map_err(|e| match e {
        rcgen::Error::PemError(p) => format!("not a PEM private key ({p})"),
        other => format!("unsupported or damaged private key ({other})"),
    })
}
