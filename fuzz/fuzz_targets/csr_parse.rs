#![no_main]
// PKCS#10 reading (PEM or DER, lenient strings) must never panic, whatever the bytes.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(csr) = vouch::encoding::csr::parse(data) {
        for e in &csr.extensions {
            let _ = e.utf8_value();
        }
    }
});
