//! A small blocking HTTPS/1.1 client for the Puppet CA API: what `vouch bench serve`
//! and the tests use to talk to `vouch serve` (and to Puppet Server) the way an
//! agent does — one kept-alive TLS connection, PUT then GET.
//!
//! Deliberately minimal: requests carry `Content-Length`; responses must carry
//! `Content-Length` or be chunked (both servers do). A connection the server
//! closed is reopened once, before any byte of the request was answered.

use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest header or chunk-size line read (the line and its end).
const MAX_LINE: usize = 16 * 1024;

/// Why a request failed (the server's HTTP status is not an error: see [`Response`]).
#[derive(Debug)]
pub enum ClientError {
    /// The CA or client credentials could not be read or used.
    Credentials(String),
    /// Connecting, the TLS handshake, or the exchange failed.
    Io(std::io::Error),
    /// The server's answer is not HTTP/1.1 as this client reads it.
    Protocol(String),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Credentials(d) => write!(f, "TLS credentials: {d}"),
            ClientError::Io(e) => write!(f, "connection: {e}"),
            ClientError::Protocol(d) => write!(f, "unreadable HTTP answer: {d}"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Io(e)
    }
}

/// An answer.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

type Stream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// One agent's connection to a CA service.
pub struct Client {
    config: Arc<rustls::ClientConfig>,
    addr: SocketAddr,
    host: String,
    server_name: ServerName<'static>,
    conn: Option<BufReader<Stream>>,
    /// Connections opened so far (1 for a client that kept its connection alive).
    pub connects: u64,
    /// How long one request may take in all (connecting, TLS, the whole answer), if limited.
    deadline: Option<Duration>,
}

fn pem_certs(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, ClientError> {
    let ders =
        crate::encoding::pem::find_all(pem, "CERTIFICATE").map_err(|e| ClientError::Credentials(e.to_string()))?;
    if ders.is_empty() {
        return Err(ClientError::Credentials("no CERTIFICATE block".into()));
    }
    Ok(ders.into_iter().map(CertificateDer::from).collect())
}

/// A TLS client configuration trusting `ca_pem` (every certificate in it), with an
/// optional client identity (certificate PEM, PKCS#8 key PEM). Shared by many clients.
pub fn tls_config(ca_pem: &[u8], identity: Option<(&[u8], &[u8])>) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in pem_certs(ca_pem)? {
        roots.add(c).map_err(|e| ClientError::Credentials(e.to_string()))?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError::Credentials(e.to_string()))?
        .with_root_certificates(roots);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert_pem, key_pem)) => {
            let (label, der) =
                crate::encoding::pem::find(key_pem, &["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"])
                    .map_err(|e| ClientError::Credentials(format!("client key: {e}")))?;
            let key = match label {
                "RSA PRIVATE KEY" => PrivateKeyDer::Pkcs1(der.into()),
                "EC PRIVATE KEY" => PrivateKeyDer::Sec1(der.into()),
                _ => PrivateKeyDer::Pkcs8(der.into()),
            };
            builder
                .with_client_auth_cert(pem_certs(cert_pem)?, key)
                .map_err(|e| ClientError::Credentials(e.to_string()))?
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

impl Client {
    /// A client for `addr`, checking the server's certificate for `host`.
    pub fn new(config: Arc<rustls::ClientConfig>, addr: SocketAddr, host: &str) -> Result<Self, ClientError> {
        let server_name = ServerName::try_from(host.to_string())
            .map_err(|e| ClientError::Credentials(format!("server name {host:?}: {e}")))?;
        Ok(Client { config, addr, host: host.to_string(), server_name, conn: None, connects: 0, deadline: None })
    }

    /// Limits each request to `limit` in all: a server that answers slowly (or forever, a
    /// byte at a time) fails the request with a timeout once it passes.
    pub fn with_deadline(mut self, limit: Duration) -> Self {
        self.deadline = Some(limit);
        self
    }

    fn connect(&mut self, until: Option<Instant>) -> Result<BufReader<Stream>, ClientError> {
        let connect_limit = match until {
            Some(u) => remaining(u)?.min(Duration::from_secs(10)),
            None => Duration::from_secs(10),
        };
        let tcp = TcpStream::connect_timeout(&self.addr, connect_limit)?;
        tcp.set_nodelay(true)?;
        tcp.set_read_timeout(Some(Duration::from_secs(60)))?;
        tcp.set_write_timeout(Some(Duration::from_secs(60)))?;
        let tls = rustls::ClientConnection::new(self.config.clone(), self.server_name.clone())
            .map_err(|e| ClientError::Credentials(e.to_string()))?;
        self.connects += 1;
        Ok(BufReader::with_capacity(16 * 1024, rustls::StreamOwned::new(tls, tcp)))
    }

    /// Sends one request on the kept-alive connection (opening one if needed).
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Result<Response, ClientError> {
        let headers: Vec<(&str, &str)> = content_type.map(|ct| ("Content-Type", ct)).into_iter().collect();
        self.request_with_headers(method, path, &headers, body)
    }

    /// [`Client::request`] with extra headers (`If-Modified-Since`, say).
    pub fn request_with_headers(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response, ClientError> {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}:{}\r\nAccept: text/plain\r\nX-Puppet-Version: 7.23.0\r\nContent-Length: {}\r\n",
            self.host,
            self.addr.port(),
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let mut wire = head.into_bytes();
        wire.extend_from_slice(body);
        // A kept-alive connection may have been closed by the server meanwhile: retry once
        // on a fresh connection if nothing of the answer arrived.
        let reused = self.conn.is_some();
        let until = self.deadline.map(|d| Instant::now() + d);
        match self.exchange(&wire, until) {
            Ok(r) => Ok(r),
            Err(ClientError::Io(_)) if reused => {
                self.conn = None;
                self.exchange(&wire, until)
            }
            Err(e) => Err(e),
        }
    }

    fn exchange(&mut self, wire: &[u8], until: Option<Instant>) -> Result<Response, ClientError> {
        let mut conn = match self.conn.take() {
            Some(c) => c,
            None => self.connect(until)?,
        };
        if let Some(u) = until {
            // The TLS handshake reads and writes within the first write.
            let left = remaining(u)?;
            conn.get_ref().sock.set_read_timeout(Some(left))?;
            conn.get_ref().sock.set_write_timeout(Some(left))?;
        }
        conn.get_mut().write_all(wire)?;
        conn.get_mut().flush()?;
        let resp = read_response(&mut Deadline { inner: &mut conn, until })?;
        let close = resp.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        if !close {
            self.conn = Some(conn);
        }
        Ok(resp)
    }
}

/// The time left until `until`, or a timeout error once it has passed.
fn remaining(until: Instant) -> Result<Duration, ClientError> {
    let left = until.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(ClientError::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the request's deadline passed before the whole answer arrived",
        )));
    }
    Ok(left)
}

/// A buffered reader whose socket reads can be limited in time.
trait ReadTimeout {
    fn set_read_timeout(&self, limit: Duration) -> std::io::Result<()>;
    /// Whether its buffer is empty (the next read goes to the socket).
    fn buffer_empty(&self) -> bool;
}

impl ReadTimeout for BufReader<Stream> {
    fn set_read_timeout(&self, limit: Duration) -> std::io::Result<()> {
        self.get_ref().sock.set_read_timeout(Some(limit))
    }
    fn buffer_empty(&self) -> bool {
        self.buffer().is_empty()
    }
}

/// Reads from `inner`, failing with a timeout once `until` has passed; each read from the
/// socket waits at most the time left.
struct Deadline<'a, R> {
    inner: &'a mut R,
    until: Option<Instant>,
}

impl<R: BufRead + ReadTimeout> Deadline<'_, R> {
    fn before_read(&mut self) -> std::io::Result<()> {
        if let Some(u) = self.until {
            let left = remaining(u).map_err(|e| match e {
                ClientError::Io(io) => io,
                other => std::io::Error::other(other.to_string()),
            })?;
            if self.inner.buffer_empty() {
                self.inner.set_read_timeout(left)?;
            }
        }
        Ok(())
    }
}

impl<R: BufRead + ReadTimeout> std::io::Read for Deadline<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.before_read()?;
        self.inner.read(buf)
    }
}

impl<R: BufRead + ReadTimeout> BufRead for Deadline<'_, R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.before_read()?;
        self.inner.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        self.inner.consume(n)
    }
}

/// One line, at most [`MAX_LINE`] bytes read: a longer one is refused before more of it is
/// read (a server sending one endless line costs 16 KiB, not all memory).
fn read_line(r: &mut impl BufRead) -> Result<String, ClientError> {
    let mut raw = Vec::new();
    let n = std::io::Read::take(&mut *r, MAX_LINE as u64 + 1).read_until(b'\n', &mut raw)?;
    if n == 0 {
        return Err(ClientError::Io(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed")));
    }
    if raw.len() > MAX_LINE {
        return Err(ClientError::Protocol("header line over 16 KiB".into()));
    }
    let line = String::from_utf8(raw).map_err(|_| ClientError::Protocol("a header line is not UTF-8".into()))?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

fn read_response(r: &mut impl BufRead) -> Result<Response, ClientError> {
    let status_line = read_line(r)?;
    let status = status_line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|s| s.get(..3))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| ClientError::Protocol(format!("status line {status_line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let line = read_line(r)?;
        if line.is_empty() {
            break;
        }
        let (k, v) = line.split_once(':').ok_or_else(|| ClientError::Protocol(format!("header {line:?}")))?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        if headers.len() > 100 {
            return Err(ClientError::Protocol("more than 100 headers".into()));
        }
    }
    let get = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    const MAX: usize = 64 * 1024 * 1024;
    let mut body = Vec::new();
    if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let size_line = read_line(r)?;
            let size = usize::from_str_radix(size_line.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| ClientError::Protocol(format!("chunk size {size_line:?}")))?;
            if size == 0 {
                while !read_line(r)?.is_empty() {}
                break;
            }
            // The size is the server's: ffffffffffffffff must not overflow.
            if body.len().checked_add(size).is_none_or(|n| n > MAX) {
                return Err(ClientError::Protocol("body over 64 MiB".into()));
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..])?;
            read_line(r)?;
        }
    } else if status != 204 && status != 304 {
        let len = match get("content-length") {
            Some(v) => v.parse::<usize>().map_err(|_| ClientError::Protocol(format!("content-length {v:?}")))?,
            None => 0,
        };
        if len > MAX {
            return Err(ClientError::Protocol("body over 64 MiB".into()));
        }
        body.resize(len, 0);
        r.read_exact(&mut body)?;
    }
    Ok(Response { status, headers, body })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Review of issue 17, finding 6: a chunk size of 2^64-1 overflowed `body.len() + size`.
    #[test]
    fn a_huge_chunk_size_is_refused_without_overflow() {
        let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\nffffffffffffffff\r\n";
        match read_response(&mut &wire[..]) {
            Err(ClientError::Protocol(d)) => assert!(d.contains("64 MiB"), "{d}"),
            other => panic!("{other:?}"),
        }
    }

    /// Bytes handed out, counted: an endless line.
    struct Endless {
        given: usize,
    }

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            buf.fill(b'a');
            self.given += buf.len();
            Ok(buf.len())
        }
    }

    /// A header line is refused once it passes 16 KiB, before more of it is read.
    #[test]
    fn an_endless_header_line_is_refused_after_16_kib() {
        let mut r = BufReader::with_capacity(4096, Endless { given: 0 });
        let e = read_line(&mut r).unwrap_err();
        assert!(matches!(e, ClientError::Protocol(_)), "{e}");
        assert!(r.get_ref().given <= MAX_LINE + 4096, "read {} bytes of one line", r.get_ref().given);
    }

    /// A server answering a small chunk at a time, forever.
    struct Drip;

    impl Read for Drip {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            std::thread::sleep(Duration::from_millis(5));
            let chunk = b"1\r\na\r\n";
            let n = chunk.len().min(buf.len());
            buf[..n].copy_from_slice(&chunk[..n]);
            Ok(n)
        }
    }

    impl ReadTimeout for BufReader<std::io::Chain<&[u8], Drip>> {
        fn set_read_timeout(&self, _limit: Duration) -> std::io::Result<()> {
            Ok(())
        }
        fn buffer_empty(&self) -> bool {
            self.buffer().is_empty()
        }
    }

    /// The whole answer must arrive before the deadline, however the server paces it.
    #[test]
    fn an_answer_dripping_forever_ends_at_the_deadline() {
        let head: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        let mut r = BufReader::new(head.chain(Drip));
        let start = Instant::now();
        let until = Some(start + Duration::from_millis(300));
        let e = read_response(&mut Deadline { inner: &mut r, until }).unwrap_err();
        assert!(matches!(&e, ClientError::Io(io) if io.kind() == std::io::ErrorKind::TimedOut), "{e}");
        assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    }
}
