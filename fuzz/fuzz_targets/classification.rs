#![no_main]
// Classification YAML (the conductor side) and its base64 form (the CA side).
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(c) = vouch::vouching::classification::Classification::from_yaml(text, 65536) {
            let _ = c.to_enc_json();
        }
        let _ = vouch::vouching::classification::Classification::from_base64(text, 65536);
    }
});
