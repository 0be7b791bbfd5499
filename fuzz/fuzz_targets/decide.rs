#![no_main]
// The whole decision (CSR parsing, attribute decoding, chain, signature, classification,
// extension checks) on arbitrary input, with the fixture policy, as of the fixture time.
use std::sync::OnceLock;

static POLICY: OnceLock<vouch::Policy> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let policy = POLICY.get_or_init(|| {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/policy.toml");
        vouch::Policy::load(&p).expect("fixture policy")
    });
    let now = time::macros::datetime!(2030-06-01 12:00 UTC);
    let _ = vouch::decide(&vouch::Request { csr: data, certname: "web01.example.test" }, policy, now);
});
