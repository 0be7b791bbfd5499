//! Whether a certificate is on a CRL this master serves (its own, the root's, the other
//! masters'): checked beside the store's record wherever a presented or renewed certificate
//! is accepted, so that whoever may write the store cannot make a revoked certificate valid
//! again by editing its record. The serials are read once per change of the CRLs.

use super::Authority;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// What identified the CRL document when it was read: its length and modification time.
type Seen = (usize, Option<time::OffsetDateTime>);

/// The serials' values.
type Serials = Arc<HashSet<Vec<u8>>>;

/// The serials (their value: no leading zero octet) of the CRL document as last read, with
/// what identified it.
#[derive(Debug, Default)]
pub struct CrlSerials {
    held: Mutex<Option<(Seen, Serials)>>,
}

fn value(raw: &[u8]) -> &[u8] {
    crate::policy::RootCrl::serial_value(raw)
}

impl Authority {
    /// Whether the serial `raw` (a certificate's raw serial octets) is on one of the CRLs
    /// this master serves. CRLs that cannot be read count as listing nothing here: the store's
    /// record still decides, as before.
    pub fn on_a_served_crl(&self, raw: &[u8]) -> bool {
        let Ok(doc) = self.crl_document.get() else { return false };
        let key = (doc.plain.len(), doc.modified);
        let mut held = self.crl_serials.held.lock().unwrap_or_else(|e| e.into_inner());
        let set = match held.as_ref() {
            Some((seen, set)) if *seen == key => set.clone(),
            _ => {
                let mut set = HashSet::new();
                for der in crate::encoding::pem::find_all(&doc.plain, "X509 CRL").unwrap_or_default() {
                    if let Ok((_, crl)) = x509_parser::parse_x509_crl(&der) {
                        set.extend(crl.iter_revoked_certificates().map(|r| value(r.raw_serial()).to_vec()));
                    }
                }
                let set = Arc::new(set);
                *held = Some((key, set.clone()));
                set
            }
        };
        set.contains(value(raw))
    }

    /// [`Authority::on_a_served_crl`] of a certificate (DER); one that does not parse is not.
    pub(super) fn der_on_a_served_crl(&self, der: &[u8]) -> bool {
        x509_parser::parse_x509_certificate(der).is_ok_and(|(_, c)| self.on_a_served_crl(c.raw_serial()))
    }
}
