#![no_main]
// csr_attributes files (txt, Puppet YAML, cloud-config, JSON) as `vouch csr` reads them.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = vouch::vouching::attrs::parse_file(text);
    }
});
