//! A test cloud that plays AWS, offline: its own RSA-2048 signing certificate (made with
//! `openssl req` at test time, as AWS publishes one per region), identity documents signed
//! as AWS signs them (`openssl cms -sign -nodetach -binary -stream -nocerts -md sha256`: a
//! BER SignedData with the document attached), and a metadata server per instance on
//! loopback that speaks IMDSv2: `PUT /latest/api/token` with a TTL header, then GETs that
//! carry the token (`/latest/dynamic/instance-identity/{rsa2048,document}`); a GET without
//! a valid token is answered 401, as an instance requiring IMDSv2 answers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A signing identity of the cloud: a self-signed RSA-2048 certificate and its key.
pub struct Signer {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Signer {
    /// Makes one in `dir` under `name`.
    pub fn new(dir: &Path, name: &str) -> Signer {
        let cert = dir.join(format!("{name}.pem"));
        let key = dir.join(format!("{name}.key"));
        let subj = format!("/C=US/ST=Test State/L=Loopback/O=Test Cloud {name}");
        let out = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "3650", "-subj", &subj])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("openssl");
        assert!(out.status.success(), "openssl req: {}", String::from_utf8_lossy(&out.stderr));
        Signer { cert, key }
    }

    /// The instance identity document for `instance`, signed: the PKCS#7 (BER) bytes.
    pub fn sign(&self, dir: &Path, document: &str) -> Vec<u8> {
        let n = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let json = dir.join(format!("doc-{n}.json"));
        let out_file = dir.join(format!("doc-{n}.p7"));
        std::fs::write(&json, document).unwrap();
        let out = Command::new("openssl")
            .args(["cms", "-sign", "-nodetach", "-binary", "-stream", "-nocerts", "-outform", "DER", "-md", "sha256"])
            .arg("-signer")
            .arg(&self.cert)
            .arg("-inkey")
            .arg(&self.key)
            .arg("-in")
            .arg(&json)
            .arg("-out")
            .arg(&out_file)
            .output()
            .expect("openssl");
        assert!(out.status.success(), "openssl cms: {}", String::from_utf8_lossy(&out.stderr));
        std::fs::read(&out_file).unwrap()
    }
}

/// The JSON document AWS writes, with the fields vouch reads and a few it does not: an
/// instance launched a minute ago.
pub fn document(instance: &str, account: &str, region: &str) -> String {
    let launched = time::OffsetDateTime::now_utc() - time::Duration::minutes(1);
    document_launched(instance, account, region, launched)
}

/// [`document`] for an instance launched at `launched` (its `pendingTime`).
pub fn document_launched(instance: &str, account: &str, region: &str, launched: time::OffsetDateTime) -> String {
    let pending =
        launched.replace_nanosecond(0).unwrap().format(&time::format_description::well_known::Rfc3339).unwrap();
    format!(
        "{{\n  \"accountId\" : \"{account}\",\n  \"architecture\" : \"x86_64\",\n  \"availabilityZone\" : \"{region}a\",\n  \
         \"imageId\" : \"ami-0abcdef1234567890\",\n  \"instanceId\" : \"{instance}\",\n  \"instanceType\" : \"t3.micro\",\n  \
         \"pendingTime\" : \"{pending}\",\n  \"privateIp\" : \"10.0.0.12\",\n  \"region\" : \"{region}\",\n  \
         \"version\" : \"2017-09-30\"\n}}"
    )
}

/// The base64 of `der` in 64-character lines, as the metadata service serves rsa2048.
pub fn served_base64(der: &[u8]) -> String {
    use base64::Engine;
    let b = base64::engine::general_purpose::STANDARD.encode(der);
    b.as_bytes().chunks(64).map(|c| String::from_utf8_lossy(c).into_owned()).collect::<Vec<_>>().join("\n")
}

/// One instance's metadata service, on 127.0.0.1: it serves until dropped.
pub struct Metadata {
    pub endpoint: String,
    stop: Arc<AtomicBool>,
    port: u16,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Metadata {
    /// Serves `json` and its signature `pkcs7`.
    pub fn start(json: String, pkcs7: &[u8]) -> Metadata {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, rsa2048) = (stop.clone(), served_base64(pkcs7));
        let token = format!("token-{port}-{}", std::process::id());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let _ = answer(conn, &token, &json, &rsa2048);
            }
        });
        Metadata { endpoint: format!("http://127.0.0.1:{port}"), stop, port, thread: Some(thread) }
    }
}

impl Drop for Metadata {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One request, one answer (HTTP/1.1, `Connection: close`), bounded in size and time.
fn answer(conn: TcpStream, token: &str, json: &str, rsa2048: &str) -> std::io::Result<()> {
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?.take(64 * 1024));
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
    let (mut ttl, mut presented) = (None, None);
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        let (name, value) = h.split_once(':').unwrap_or((&h, ""));
        match name.trim().to_ascii_lowercase().as_str() {
            "x-aws-ec2-metadata-token-ttl-seconds" => ttl = Some(value.trim().to_string()),
            "x-aws-ec2-metadata-token" => presented = Some(value.trim().to_string()),
            _ => {}
        }
    }
    let authorised = presented.as_deref() == Some(token);
    let (status, body) = match (method.as_str(), path.as_str()) {
        ("PUT", "/latest/api/token") if ttl.is_some() => ("200 OK", token.to_string()),
        ("PUT", "/latest/api/token") => ("400 Bad Request", String::new()),
        ("GET", _) if !authorised => ("401 Unauthorized", String::new()),
        ("GET", "/latest/dynamic/instance-identity/rsa2048") => ("200 OK", rsa2048.to_string()),
        ("GET", "/latest/dynamic/instance-identity/document") => ("200 OK", json.to_string()),
        _ => ("404 Not Found", String::new()),
    };
    let mut conn = conn;
    write!(conn, "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())?;
    conn.flush()
}
