//! A compile server's side of `vouch serve`: a stock Puppet Server compiling catalogs
//! with its own CA disabled, vouch serve being the fleet's CA.
//!
//! - [`fetch_crl`] (`vouch crl --fetch`): the CA's CRL body (one CRL per CA: the master
//!   CAs' and the root's) into Puppet's `hostcrl`, each CRL checked against the bundle by
//!   signature (one no CA of the bundle signed is left out), replaced atomically, asked
//!   with If-Modified-Since from the last fetch for the same bundle (never from the file's
//!   mtime), the file's mtime set to Last-Modified.
//! - [`enc`] (`vouch enc --ca-url`): the classifier, from the node's certificate fetched
//!   over the public API, verified against the CA bundle and a cached, refreshed CRL,
//!   with a bounded cache keyed by serial that keeps catalogs compiling while the CA
//!   restarts.

pub mod enc;
pub mod log;

use crate::error::Error;
use crate::hook::ca_chain;
use crate::serve::client::{Client, Response};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use time::OffsetDateTime;

/// The CA's CRL body (the master CA's CRL, then the root's; a fleet's masters may send one
/// per master CA), as agents want it.
pub const CRL_PATH: &str = "/puppet-ca/v1/certificate_revocation_list/ca";

/// How long one request to the CA may take in all (connecting, TLS, the whole answer):
/// a CA that answers slowly must not hold a catalog compilation or a CRL fetch forever.
pub const REQUEST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// The CA service (`--ca-url https://HOST:PORT`), trusted through `--cacert`.
pub struct CaService {
    url: String,
    host: String,
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
}

fn remote(url: &str, detail: impl Into<String>) -> Error {
    Error::Remote { url: url.to_string(), detail: detail.into() }
}

impl CaService {
    /// `url` is `https://HOST:PORT` (a trailing `/` allowed; the port defaults to 8140);
    /// `cacert` the CA bundle (PEM); `identity` an optional client certificate and key (PEM).
    pub fn new(url: &str, cacert: &[u8], identity: Option<(&[u8], &[u8])>) -> Result<Self, Error> {
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| Error::Usage { detail: format!("--ca-url {url:?}: give https://HOST:PORT") })?;
        let hostport = rest.trim_end_matches('/');
        if hostport.is_empty() || hostport.contains('/') || hostport.contains('@') {
            return Err(Error::Usage { detail: format!("--ca-url {url:?}: give https://HOST:PORT, no path") });
        }
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => match p.parse::<u16>() {
                Ok(port) => (h.trim_start_matches('[').trim_end_matches(']').to_string(), port),
                Err(_) => return Err(Error::Usage { detail: format!("--ca-url {url:?}: the port is not a number") }),
            },
            _ => (hostport.to_string(), 8140),
        };
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| remote(url, format!("cannot resolve {host}: {e}")))?
            .next()
            .ok_or_else(|| remote(url, format!("{host} has no address")))?;
        let config = crate::serve::client::tls_config(cacert, identity)
            .map_err(|e| Error::Usage { detail: format!("--cacert or the client credentials: {e}") })?;
        Ok(CaService { url: url.trim_end_matches('/').to_string(), host, addr, config })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// One GET on a new connection (each command asks once or twice), within [`REQUEST_DEADLINE`].
    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> Result<Response, Error> {
        let mut c = Client::new(self.config.clone(), self.addr, &self.host)
            .map_err(|e| remote(&self.url, e.to_string()))?
            .with_deadline(REQUEST_DEADLINE);
        c.request_with_headers("GET", path, headers, b"").map_err(|e| remote(&self.url, e.to_string()))
    }
}

/// What `vouch crl --fetch` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// A new body was written (its Last-Modified), without the CRLs `ignored` names (one
    /// line each: signed by no CA of the bundle).
    Replaced { last_modified: Option<String>, ignored: Vec<String> },
    /// The CA answered 304: the file is current.
    Unchanged,
}

/// The state of the last fetch, beside the output file: the Last-Modified the CA sent, the
/// SHA-256 of the body written and of the bundle it was checked against. If-Modified-Since
/// is sent only while the file is still exactly that body and the bundle that one (a copied
/// or edited file, or another bundle — a CA rebuilt, restored, or a master joining — is
/// fetched again in full and checked against the bundle of this call).
#[derive(serde::Serialize, serde::Deserialize, Default)]
struct FetchState {
    last_modified: Option<String>,
    sha256: String,
    #[serde(default)]
    bundle_sha256: String,
}

pub(crate) fn state_path(out: &Path) -> PathBuf {
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    out.with_file_name(format!(".{name}.vouch-fetch"))
}

fn io<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::Io { path: path.to_path_buf(), op, source }
}

/// A CRL body checked against a bundle (see [`check_crl_body`]).
#[derive(Debug)]
pub struct CheckedCrls {
    /// The CRLs a CA of the bundle signed: the body itself when it holds no other.
    pub pem: Vec<u8>,
    /// One line per CRL of the body that no CA of the bundle signed, left out of `pem`.
    pub ignored: Vec<String>,
}

/// Checks a CRL body (`url` says where it came from): PEM `X509 CRL` blocks, at least one,
/// each readable. Each CRL counts for the CA of the bundle whose key signed it (matched by
/// signature, not only by name: the masters of a fleet are named alike); one no CA of the
/// bundle signed is left out (said in `ignored`), and a body with none a CA signed is
/// [`Error::CrlNotFromBundle`]. Given the file it would replace (`previous`: its bytes and
/// path), no CA's newest CRL may be older than that CA's there (a lower CRL number: a
/// rollback, which could undo revocations); a CRL there that no CA of the bundle signed
/// (another CA's, rebuilt or restored since) is no measure.
pub fn check_crl_body(
    body: &[u8],
    bundle: (&[u8], &Path),
    url: &str,
    previous: Option<(&[u8], &Path)>,
) -> Result<CheckedCrls, Error> {
    let ders = crate::encoding::pem::find_all(body, "X509 CRL").map_err(|e| remote(url, format!("the CRL: {e}")))?;
    if ders.is_empty() {
        return Err(remote(url, "the CRL answer holds no X509 CRL block"));
    }
    let (bundle_pem, bundle_path) = bundle;
    let bundle_ders = crate::encoding::pem::find_all(bundle_pem, "CERTIFICATE")
        .map_err(|e| Error::Cert { path: bundle_path.to_path_buf(), detail: e.to_string() })?;
    let cas = ca_chain::parse_bundle(&bundle_ders)
        .map_err(|detail| Error::Cert { path: bundle_path.to_path_buf(), detail })?;
    let sorted = ca_chain::sort_crls(&ders, &cas).map_err(|e| remote(url, e))?;
    if !sorted.verified.contains(&true) {
        return Err(Error::CrlNotFromBundle {
            source: format!("the CA's answer ({url}{CRL_PATH})"),
            ca: None,
            bundle: bundle_path.to_path_buf(),
            foreign: sorted.foreign,
        });
    }
    let carried = match previous {
        Some((previous, path)) => check_rollback(&sorted, previous, &cas, url, path)?,
        None => Vec::new(),
    };
    let mut ignored: Vec<String> = sorted
        .foreign
        .iter()
        .map(|issuer| format!("{url}: a CRL of {issuer} that no CA of {} signed is left out", bundle_path.display()))
        .collect();
    ignored.extend(carried.iter().map(|(issuer, _)| {
        format!("{url}: the answer holds no CRL of {issuer}: the one held before is kept (no older one replaces it)")
    }));
    let mut pem = if sorted.verified.iter().all(|v| *v) {
        body.to_vec()
    } else {
        ders.iter()
            .zip(&sorted.verified)
            .filter(|(_, v)| **v)
            .map(|(d, _)| crate::encoding::pem::encode("X509 CRL", d))
            .collect::<String>()
            .into_bytes()
    };
    for (_, der) in &carried {
        pem.extend_from_slice(crate::encoding::pem::encode("X509 CRL", der).as_bytes());
    }
    Ok(CheckedCrls { pem, ignored })
}

/// Refuses a fetched CRL older than the same CA's CRL in the file it would replace. A CA of
/// this bundle whose CRL that file holds and the answer does not (a master that answers only
/// its own, or an answer cut short): that CRL is carried into the new file, returned with its
/// issuer (dropped once, an older CRL of that CA would have nothing to be measured against
/// at the next fetch: a rollback in two steps).
fn check_rollback(
    fetched: &ca_chain::SortedCrls<'_>,
    previous: &[u8],
    cas: &[ca_chain::Ca<'_>],
    url: &str,
    path: &Path,
) -> Result<Vec<(String, Vec<u8>)>, Error> {
    let previous_ders = crate::encoding::pem::find_all(previous, "X509 CRL").unwrap_or_default();
    // An unreadable previous file is no measure (it is replaced).
    let Ok(kept) = ca_chain::sort_crls(&previous_ders, cas) else { return Ok(Vec::new()) };
    let mut carried = Vec::new();
    for i in 0..cas.len() {
        let (crl, Some(current)) = (fetched.of(i), kept.of(i)) else { continue };
        let Some(crl) = crl else {
            carried.push((current.issuer(), current.der.to_vec()));
            continue;
        };
        if crl.numbered_below(current) {
            return Err(Error::CrlRollback {
                url: url.to_string(),
                path: path.to_path_buf(),
                issuer: crl.issuer(),
                fetched: crl.number().unwrap_or_else(|| "none".into()),
                current: current.number().unwrap_or_else(|| "none".into()),
            });
        }
    }
    Ok(carried)
}

/// `vouch crl --fetch`: fetches the CA's CRLs into `out` (see [`Fetched`]), checked against
/// `bundle` (its bytes and path) by [`check_crl_body`]: what the file held before counts
/// only where a CA of this bundle signed it.
pub fn fetch_crl(ca: &CaService, bundle: (&[u8], &Path), out: &Path) -> Result<Fetched, Error> {
    let state_file = state_path(out);
    let state: FetchState =
        std::fs::read(&state_file).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    let current = std::fs::read(out).ok();
    let bundle_sha256 = crate::encoding::sha256_hex(bundle.0);
    let unchanged_since_fetch = current.as_deref().is_some_and(|c| crate::encoding::sha256_hex(c) == state.sha256)
        && state.bundle_sha256 == bundle_sha256;
    let ims = state.last_modified.clone().filter(|_| unchanged_since_fetch);
    let headers: Vec<(&str, &str)> = ims.as_deref().map(|v| ("If-Modified-Since", v)).into_iter().collect();
    let resp = ca.get(CRL_PATH, &headers)?;
    match resp.status {
        304 if ims.is_some() => return Ok(Fetched::Unchanged),
        200 => {}
        other => {
            return Err(remote(
                ca.url(),
                format!("GET {CRL_PATH} answered {other}: {}", resp.text().chars().take(200).collect::<String>()),
            ))
        }
    }
    let checked = check_crl_body(&resp.body, bundle, ca.url(), current.as_deref().map(|c| (c, out)))?;
    crate::files::durable::write_replace(out, &checked.pem, 0o644).map_err(io(out, "write"))?;
    let last_modified = resp.header("last-modified").map(str::to_string);
    if let Some(t) = last_modified.as_deref().and_then(crate::encoding::time::parse_http_date) {
        // The file's time is the CRL's, not the fetch's (Puppet's own refresh reads it).
        let f = std::fs::File::options().write(true).open(out).map_err(io(out, "open"))?;
        f.set_modified(std::time::SystemTime::from(t)).map_err(io(out, "set the modification time of"))?;
    }
    // Last-Modified has one-second resolution, and vouch serve answers 304 when the CRLs are
    // not newer than If-Modified-Since: CRLs made again within the second of this one would
    // look unchanged. Such a fresh Last-Modified is not kept, so the next fetch is whole.
    let settled = last_modified
        .as_deref()
        .and_then(crate::encoding::time::parse_http_date)
        .is_some_and(|t| t.checked_add(time::Duration::seconds(2)).is_some_and(|t| t <= OffsetDateTime::now_utc()));
    let new_state = FetchState {
        last_modified: last_modified.clone().filter(|_| settled),
        sha256: crate::encoding::sha256_hex(&checked.pem),
        bundle_sha256,
    };
    let bytes = serde_json::to_vec(&new_state).map_err(|e| Error::Usage { detail: e.to_string() })?;
    crate::files::durable::write_replace(&state_file, &bytes, 0o644).map_err(io(&state_file, "write"))?;
    Ok(Fetched::Replaced { last_modified, ignored: checked.ignored })
}

/// Seconds since the epoch (cache ages).
pub(crate) fn unix(t: OffsetDateTime) -> i64 {
    t.unix_timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> Vec<u8> {
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(rel)).unwrap()
    }

    fn check(crl: &[u8], bundle: &[u8]) -> Result<CheckedCrls, Error> {
        check_crl_body(crl, (bundle, Path::new("bundle.pem")), "https://ca", None)
    }

    /// Review of issue 17, finding 7: a CRL is checked against its issuer's key, not only its
    /// name: a certificate of the same name with another key (a rogue CA) does not vouch for it.
    #[test]
    fn a_crl_must_be_signed_by_its_issuers_key_in_the_bundle() {
        let crl = fixture("pki/conductors_crl.pem");
        let root = fixture("pki/root_crt.pem");
        let checked = check(&crl, &root).unwrap();
        assert_eq!(checked.pem, crl, "a body all of whose CRLs verify is kept as it is");
        assert!(checked.ignored.is_empty());
        // The same name, another key.
        let (_, root_der) = crate::encoding::pem::find(&root, &["CERTIFICATE"]).unwrap();
        let (_, real) = x509_parser::parse_x509_certificate(&root_der).unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for cn in real.subject().iter_common_name() {
            params.distinguished_name.push(rcgen::DnType::CommonName, cn.as_str().unwrap());
        }
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let rogue = params.self_signed(&key).unwrap().pem();
        let e = check(&crl, rogue.as_bytes()).unwrap_err();
        assert!(matches!(e, Error::CrlNotFromBundle { ca: None, .. }), "{e}");
        assert!(e.to_string().contains("signed by no CA of bundle.pem"), "{e}");
        // A byte of the signature changed.
        let (_, mut der) = crate::encoding::pem::find(&crl, &["X509 CRL"]).unwrap();
        let last = der.len() - 1;
        der[last] ^= 1;
        let tampered = crate::encoding::pem::encode("X509 CRL", &der);
        assert!(check(tampered.as_bytes(), &root).is_err());
    }

    /// Issue 36: a body with one CRL per CA of a bundle of several masters named alike, and
    /// one of a master the bundle does not hold: that one is left out (said), the others
    /// kept; a rollback is measured per CA, by signature, never against a CRL of another CA.
    #[test]
    fn a_body_of_several_crls_is_sorted_by_the_ca_that_signed_each() {
        use crate::hook::ca_chain::tests::{crl, pki};
        let p = pki(3, 2);
        let body =
            [crl(&p, Some(0), 5, &[]), crl(&p, Some(1), 3, &[]), crl(&p, Some(2), 9, &[]), crl(&p, None, 2, &[])]
                .concat();
        let bundle = (p.bundle.as_bytes(), Path::new("bundle.pem"));
        let checked = check_crl_body(body.as_bytes(), bundle, "https://ca", None).unwrap();
        assert_eq!(checked.ignored.len(), 1, "{:?}", checked.ignored);
        assert_eq!(crate::encoding::pem::find_all(&checked.pem, "X509 CRL").unwrap().len(), 3);
        // Master 1's previous CRL is numbered 4: fetched 3 is a rollback, of that CA only.
        let previous = [crl(&p, Some(0), 4, &[]), crl(&p, Some(1), 4, &[])].concat();
        let e = check_crl_body(body.as_bytes(), bundle, "https://ca", Some((previous.as_bytes(), Path::new("f"))))
            .unwrap_err();
        assert!(matches!(&e, Error::CrlRollback { fetched, current, .. } if fetched == "3" && current == "4"), "{e}");
        // A CRL of a master outside the bundle (named alike, numbered 90) is no measure.
        let previous = [crl(&p, Some(2), 90, &[]), crl(&p, Some(1), 3, &[])].concat();
        check_crl_body(body.as_bytes(), bundle, "https://ca", Some((previous.as_bytes(), Path::new("f")))).unwrap();
    }

    /// Review of issue 36: a CA server that leaves a CA's CRL out of one answer, then answers
    /// its older CRL, rolled that CA's CRL back in two steps (a node it revoked valid again).
    #[test]
    fn review_a_crl_left_out_of_an_answer_is_kept_so_no_rollback_takes_two_steps() {
        use crate::hook::ca_chain::tests::{crl, pki};
        let p = pki(2, 2);
        let bundle = (p.bundle.as_bytes(), Path::new("bundle.pem"));
        let (m0, root) = (crl(&p, Some(0), 5, &[]), crl(&p, None, 2, &[]));
        let (old, new) = (crl(&p, Some(1), 3, &[]), crl(&p, Some(1), 4, &[b"\x42"]));
        let file0 = [m0.clone(), new, root.clone()].concat();
        let step1 = [m0.clone(), root.clone()].concat();
        // Left out of an answer: the CRL held is carried into the new file, and said.
        let file1 = check_crl_body(step1.as_bytes(), bundle, "u", Some((file0.as_bytes(), Path::new("f0")))).unwrap();
        assert_eq!(file1.ignored.len(), 1, "{:?}", file1.ignored);
        assert_eq!(crate::encoding::pem::find_all(&file1.pem, "X509 CRL").unwrap().len(), 3);
        // So its older CRL next is a rollback still.
        let step2 = [m0, old, root].concat();
        let e = check_crl_body(step2.as_bytes(), bundle, "u", Some((&file1.pem, Path::new("f1")))).unwrap_err();
        assert!(matches!(e, Error::CrlRollback { .. }), "{e}");
    }

    /// Review of issue 36: a CRL with bytes after it was taken by the header's reading and
    /// refused by webpki later (every node refused): now the answer is refused where it is
    /// read, and the file left as it was.
    #[test]
    fn review_a_crl_with_trailing_bytes_is_no_crl() {
        use crate::hook::ca_chain::tests::{crl, pki};
        let p = pki(1, 1);
        let bundle = (p.bundle.as_bytes(), Path::new("bundle.pem"));
        let (m, root) = (crl(&p, Some(0), 5, &[]), crl(&p, None, 2, &[]));
        let mut der = crate::encoding::pem::find_all(m.as_bytes(), "X509 CRL").unwrap().remove(0);
        der.extend_from_slice(b"\x00\x00junk");
        assert!(crate::hook::ca_chain::Crl::from_der(&der).is_err());
        let body = crate::encoding::pem::encode("X509 CRL", &der) + &root;
        let e = check_crl_body(body.as_bytes(), bundle, "u", None).unwrap_err().to_string();
        assert!(e.contains("trailing"), "refused where it is read, not written: {e}");
    }
}
