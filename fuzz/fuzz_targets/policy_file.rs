#![no_main]
// Policy files: every error must be a PolicyError, never a panic.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let root = include_bytes!("../../fixtures/pki/root_crt.pem");
        let _ = vouch::Policy::parse(std::path::Path::new("/fuzz/policy.toml"), text, |_| Ok(root.to_vec()));
    }
});
