//! A TCP proxy in front of an LDAP server that can lose one answer: armed with a DN
//! fragment, it forwards the next modify request of an entry whose DN holds it, and swallows
//! every answer on that connection from then on (the server applied the write; the client
//! never hears it, times out, and sends it again on a fresh connection).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The proxy; it stops with the test process.
pub struct LdapProxy {
    pub port: u16,
    armed: Arc<Mutex<Option<String>>>,
    swallowed: Arc<AtomicUsize>,
}

/// One complete BER element at the start of `buf`: its total length, if all of it is there.
pub fn element_len(buf: &[u8]) -> Option<usize> {
    let first = *buf.get(1)?;
    if first < 0x80 {
        return Some(2 + first as usize).filter(|&n| n <= buf.len());
    }
    let n = (first & 0x7f) as usize;
    let len = buf.get(2..2 + n)?.iter().fold(0usize, |acc, b| (acc << 8) | *b as usize);
    Some(2 + n + len).filter(|&t| t <= buf.len())
}

/// The length bytes of a BER element starting at `at` (its tag): (header length, content length).
fn header(buf: &[u8], at: usize) -> Option<(usize, usize)> {
    let first = *buf.get(at + 1)?;
    if first < 0x80 {
        return Some((2, first as usize));
    }
    let n = (first & 0x7f) as usize;
    Some((2 + n, buf.get(at + 2..at + 2 + n)?.iter().fold(0usize, |acc, b| (acc << 8) | *b as usize)))
}

/// The DN of a request whose operation is tagged `op` (LDAPMessage { messageID,
/// [APPLICATION n] { dn, … } }: 0x66 a modify, 0x68 an add).
pub fn request_dn(msg: &[u8], op_tag: u8) -> Option<String> {
    let (h, _) = header(msg, 0)?;
    let (idh, idl) = header(msg, h)?;
    let op = h + idh + idl;
    if *msg.get(op)? != op_tag {
        return None;
    }
    let (oph, _) = header(msg, op)?;
    let dn = op + oph;
    let (dnh, dnl) = header(msg, dn)?;
    Some(String::from_utf8_lossy(msg.get(dn + dnh..dn + dnh + dnl)?).into_owned())
}

impl LdapProxy {
    /// A proxy on a free loopback port, forwarding to 127.0.0.1:`to`.
    pub fn start(to: u16) -> LdapProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let armed: Arc<Mutex<Option<String>>> = Arc::default();
        let swallowed: Arc<AtomicUsize> = Arc::default();
        let (a, s) = (armed.clone(), swallowed.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else { continue };
                Self::pair(client, server, a.clone(), s.clone());
            }
        });
        LdapProxy { port, armed, swallowed }
    }

    fn pair(client: TcpStream, server: TcpStream, armed: Arc<Mutex<Option<String>>>, swallowed: Arc<AtomicUsize>) {
        let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let l = lost.clone();
        std::thread::spawn(move || {
            let (mut buf, mut chunk) = (Vec::new(), [0u8; 16384]);
            while let Ok(n) = c_in.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                while let Some(len) = element_len(&buf) {
                    let msg: Vec<u8> = buf.drain(..len).collect();
                    let mut arm = armed.lock().unwrap();
                    if let (Some(want), Some(dn)) = (arm.as_ref(), request_dn(&msg, 0x66)) {
                        if dn.contains(want.as_str()) {
                            *arm = None;
                            l.store(true, Ordering::SeqCst);
                            swallowed.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    drop(arm);
                    if s_out.write_all(&msg).is_err() {
                        return;
                    }
                }
            }
            let _ = s_out.shutdown(Shutdown::Write);
        });
        let (mut s_in, mut c_out) = (server, client);
        std::thread::spawn(move || {
            let mut chunk = [0u8; 16384];
            while let Ok(n) = s_in.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                // The answers after the armed write are lost (the server has applied it).
                if lost.load(Ordering::SeqCst) {
                    continue;
                }
                if c_out.write_all(&chunk[..n]).is_err() {
                    return;
                }
            }
            let _ = c_out.shutdown(Shutdown::Write);
        });
    }

    /// Loses the answers from the next modify of an entry whose DN contains `dn_part` on.
    pub fn lose_answer_to_modify_of(&self, dn_part: &str) {
        *self.armed.lock().unwrap() = Some(dn_part.to_string());
    }

    /// How many writes had their answers lost.
    pub fn lost(&self) -> usize {
        self.swallowed.load(Ordering::SeqCst)
    }
}

/// A TCP proxy in front of port `to` that cuts the connection (both ways) at the first
/// request `cut` holds for (one whole BER message), never sending it; every request before it
/// and every answer go through. Its port; it stops with the test process.
pub fn cutting_proxy(to: u16, cut: impl Fn(&[u8]) -> bool + Send + Sync + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let cut = Arc::new(cut);
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else { continue };
            let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let (s_in, c_out) = (server, client);
            let (mut s_in2, mut c_out2) = (s_in.try_clone().unwrap(), c_out.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s_in2, &mut c_out2);
                let _ = c_out2.shutdown(Shutdown::Write);
            });
            let cut = cut.clone();
            std::thread::spawn(move || {
                let (mut buf, mut chunk) = (Vec::new(), [0u8; 16384]);
                while let Ok(n) = c_in.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(len) = element_len(&buf) {
                        let msg: Vec<u8> = buf.drain(..len).collect();
                        if cut(&msg) {
                            let _ = s_in.shutdown(Shutdown::Both);
                            let _ = c_out.shutdown(Shutdown::Both);
                            return;
                        }
                        if s_out.write_all(&msg).is_err() {
                            return;
                        }
                    }
                }
                let _ = s_out.shutdown(Shutdown::Write);
            });
        }
    });
    port
}
