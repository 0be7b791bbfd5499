//! The audit log: one JSON line per decision.

mod verification;

pub use verification::{verify, verify_signature, Break, Verified};

use crate::decision::{Conductor, Grant, Refused};
use time::OffsetDateTime;

/// Renders a decision as one JSON line.
pub fn decision_line(now: OffsetDateTime, certname: &str, outcome: Result<&Grant, &Refused>, source: &str) -> String {
    decision_value(now, certname, outcome, source).to_string()
}

/// [`decision_line`] as JSON, for a caller that adds a field (the serial about to be issued).
pub fn decision_value(
    now: OffsetDateTime,
    certname: &str,
    outcome: Result<&Grant, &Refused>,
    source: &str,
) -> serde_json::Value {
    let time = crate::encoding::time::format_rfc3339(now);
    let (verdict, conductor, reasons): (&str, Option<&Conductor>, Vec<serde_json::Value>) = match outcome {
        Ok(g) => ("granted", Some(g.conductor()), Vec::new()),
        Err(r) => (
            "refused",
            r.conductor.as_ref(),
            r.reasons.iter().map(|x| serde_json::json!({"code": x.code(), "message": x.to_string()})).collect(),
        ),
    };
    let mut line = serde_json::json!({
        "time": time,
        "event": "decision",
        "source": source,
        "certname": certname,
        "verdict": verdict,
        "conductor": conductor,
        "reasons": reasons,
    });
    // A server's alt names are named: what a grant lets it answer for is on record.
    if let Ok(g) = outcome.ok().filter(|g| !g.alt_names().is_empty()).ok_or(()) {
        line["alt_names"] = serde_json::json!(g.alt_names());
    }
    line
}

// ---------------------------------------------------------------------------------------------
// The tamper-evident chain.
//
// Every line vouch appends ends with `"seq":N,"prev":"<SHA-256 hex of the previous line>"`
// (the previous line's bytes, without its newline; the first line of a new chain: 64 zeros).
// Every CHECKPOINT_LINES lines, or CHECKPOINT_EVERY after the last checkpoint, a checkpoint
// line follows, signed with the master CA's key over `vouch-audit-checkpoint:SEQ:PREV:TIME`:
// it commits to every line before it. A rotated log (logrotate moves `audit.log` to
// `audit.log.1`) goes on in the new file: its first line's prev is the hash of the old file's
// last line (read from `<log>.1` under the lock, never from memory).
// ---------------------------------------------------------------------------------------------

use std::fs::OpenOptions;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A checkpoint after this many lines of the chain...
pub const CHECKPOINT_LINES: u64 = 1000;
/// ... or this long after the last one (checked when a line is written).
pub const CHECKPOINT_EVERY: time::Duration = time::Duration::minutes(60);
/// The prev of a chain's first line.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// The longest line vouch writes (without its chain fields): a longer one has its strings
/// cut (see [`bounded`]). `audit verify` and `audit show` refuse a line longer than
/// [`MAX_READ_LINE`].
pub const MAX_LINE_BYTES: usize = 64 * 1024;
/// The longest line `audit verify`/`show` read (vouch writes none this long).
pub const MAX_READ_LINE: usize = 1024 * 1024;
/// How much of a log's end is read to find where the chain stands.
const TAIL_BYTES: u64 = 256 * 1024;

/// Signs a checkpoint's message with the master CA's key.
pub type Signer<'a> = &'a (dyn Fn(&[u8]) -> Result<Vec<u8>, String> + Sync);

/// What the writer knows of the chain: the last line's seq and hash, and the last checkpoint.
#[derive(Debug, Clone)]
struct Head {
    seq: u64,
    prev: String,
    checkpoint_seq: u64,
    checkpoint_time: Option<OffsetDateTime>,
    /// The log file as this writer left it (device, inode, length): if it is still so, the
    /// head is current; otherwise another process wrote (or the log was rotated).
    file: (u64, u64, u64),
    /// The file ends in a torn line (no newline): the next write starts a new line.
    torn: bool,
}

/// The audit log's writer: appends chained lines (see the module's notes), in one write and
/// one fdatasync per call, under an flock on the log (several processes share it).
pub struct AuditLog {
    pub path: PathBuf,
    head: Mutex<Option<Head>>,
}

/// The fields of a chained line the chain needs.
#[derive(Debug, serde::Deserialize)]
struct Chained {
    seq: Option<u64>,
    prev: Option<String>,
    #[serde(default)]
    event: Option<String>,
    #[serde(default)]
    time: Option<String>,
    #[serde(default)]
    signature: Option<String>,
}

fn parse_chained(line: &str) -> Option<Chained> {
    serde_json::from_str::<Chained>(line).ok().filter(|c| c.seq.is_some() && c.prev.is_some())
}

/// The SHA-256 of a line (without its newline), lowercase hex.
pub fn line_hash(line: &str) -> String {
    crate::encoding::sha256_hex(line.as_bytes())
}

/// `line` (a JSON object) with the chain's fields added at its end.
fn chain(line: &str, seq: u64, prev: &str) -> String {
    let t = line.trim_end();
    let body = t.strip_suffix('}').unwrap_or(t);
    let sep = if body.trim_end().ends_with('{') { "" } else { "," };
    format!("{body}{sep}\"seq\":{seq},\"prev\":\"{prev}\"}}")
}

/// `line` if it is at most [`MAX_LINE_BYTES`]; else its strings cut to 1,024 characters
/// (with their length), and if that is still too long, a line saying so (its event, time,
/// certname cut, size and SHA-256).
fn bounded(line: &str) -> String {
    if line.len() <= MAX_LINE_BYTES {
        return line.to_string();
    }
    fn cut(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) if s.len() > 1024 => {
                let head: String = s.chars().take(1024).collect();
                *s = format!("{head}…({} bytes)", s.len());
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(cut),
            serde_json::Value::Object(o) => o.values_mut().for_each(cut),
            _ => {}
        }
    }
    let mut v: serde_json::Value = serde_json::from_str(line).unwrap_or(serde_json::Value::Null);
    cut(&mut v);
    let shorter = v.to_string();
    if v.is_object() && shorter.len() <= MAX_LINE_BYTES {
        return shorter;
    }
    let field = |k: &str| {
        let s = v.get(k).and_then(|x| x.as_str()).unwrap_or_default();
        s.chars().take(256).collect::<String>()
    };
    serde_json::json!({
        "time": field("time"), "event": field("event"), "certname": field("certname"),
        "oversized": line.len(), "sha256": line_hash(line),
    })
    .to_string()
}

/// What a checkpoint's signature covers.
pub fn checkpoint_message(seq: u64, prev: &str, time: &str) -> Vec<u8> {
    format!("vouch-audit-checkpoint:{seq}:{prev}:{time}").into_bytes()
}

/// The last complete line of `text` (a file's tail), if any.
/// (A torn last line, written by a process that died mid-write, is not complete: the line
/// before it is the last.)
fn last_line(text: &str) -> Option<&str> {
    let complete = match text.strip_suffix('\n') {
        Some(t) => t,
        None => text.rsplit_once('\n')?.0,
    };
    complete.rsplit('\n').next().filter(|l| !l.is_empty())
}

/// Where the chain stands after the log's tail `tail`: (seq, hash of the last line, last
/// checkpoint's seq and time if the tail holds one).
type TailHead = (u64, String, Option<(u64, OffsetDateTime)>);

fn head_from_tail(tail: &str) -> Option<TailHead> {
    let last = last_line(tail)?;
    let seq = parse_chained(last).and_then(|c| c.seq).unwrap_or(0);
    let checkpoint = tail.lines().rev().filter_map(parse_chained).find(|c| c.event.as_deref() == Some("checkpoint"));
    let cp = checkpoint.and_then(|c| {
        let t = crate::encoding::time::parse_rfc3339(c.time.as_deref()?).ok()?;
        Some((c.seq?, t))
    });
    Some((seq, line_hash(last), cp))
}

fn read_tail(f: &mut std::fs::File, len: u64) -> io::Result<String> {
    let start = len.saturating_sub(TAIL_BYTES);
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    Read::by_ref(f).take(TAIL_BYTES).read_to_end(&mut buf)?;
    // A tail that starts mid-line: drop the partial first line.
    let text = String::from_utf8_lossy(&buf).into_owned();
    Ok(if start > 0 { text.split_once('\n').map(|(_, r)| r.to_string()).unwrap_or_default() } else { text })
}

/// The rotated predecessor of a log: `<log>.1` (logrotate's name).
pub fn rotated(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(".1");
    PathBuf::from(s)
}

impl AuditLog {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        AuditLog { path: path.into(), head: Mutex::new(None) }
    }

    /// Appends `lines` (JSON objects), chained, and a checkpoint signed by `sign` when one is
    /// due (or `force_checkpoint`; never without `sign`: the autosign hook holds no CA key);
    /// returns the checkpoint line written, if any.
    pub fn append(
        &self,
        lines: &[String],
        sign: Option<Signer<'_>>,
        now: OffsetDateTime,
        force_checkpoint: bool,
    ) -> io::Result<Option<String>> {
        self.append_with(lines, sign, now, force_checkpoint, true)
    }

    /// [`AuditLog::append`] without `fdatasync`: for lines that may be lost with the last
    /// moments before a power loss (the next synced append, or the kernel's own writeback
    /// within seconds, makes them durable; the chain stays whole: only a tail is ever lost).
    pub fn append_unsynced(
        &self,
        lines: &[String],
        sign: Option<Signer<'_>>,
        now: OffsetDateTime,
    ) -> io::Result<Option<String>> {
        self.append_with(lines, sign, now, false, false)
    }

    fn append_with(
        &self,
        lines: &[String],
        sign: Option<Signer<'_>>,
        now: OffsetDateTime,
        force_checkpoint: bool,
        synced: bool,
    ) -> io::Result<Option<String>> {
        if lines.is_empty() && !force_checkpoint {
            return Ok(None);
        }
        let mut guard = self.head.lock().unwrap_or_else(|e| e.into_inner());
        let mut f = crate::files::durable::open_nofollow(
            OpenOptions::new().append(true).read(true).create(true).mode(0o640),
            &self.path,
        )?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)?;
        let meta = f.metadata()?;
        let id = (meta.dev(), meta.ino(), meta.len());
        // The head in memory only if the log is as this process left it (same file, same
        // length); otherwise another process wrote, or the log was rotated: read it.
        let mut head = match guard.as_ref() {
            Some(h) if h.file == id && id.2 > 0 => h.clone(),
            _ => self.find_head(&mut f, meta.len())?,
        };
        let mut buf = Vec::new();
        if head.torn {
            buf.push(b'\n');
            head.torn = false;
        }
        let mut cp_line = None;
        let checkpoint = |head: &mut Head, buf: &mut Vec<u8>, sign: Signer<'_>| -> io::Result<String> {
            let time = crate::encoding::time::format_rfc3339(now);
            head.seq = head.seq.saturating_add(1);
            let sig = sign(&checkpoint_message(head.seq, &head.prev, &time)).map_err(io::Error::other)?;
            use base64::Engine;
            let v = serde_json::json!({
                "time": time, "event": "checkpoint",
                "signature": base64::engine::general_purpose::STANDARD.encode(sig),
            });
            let c = chain(&v.to_string(), head.seq, &head.prev);
            head.prev = line_hash(&c);
            head.checkpoint_seq = head.seq;
            head.checkpoint_time = Some(now);
            buf.extend_from_slice(c.as_bytes());
            buf.push(b'\n');
            Ok(c)
        };
        for l in lines {
            head.seq = head.seq.saturating_add(1);
            let c = chain(&bounded(l), head.seq, &head.prev);
            head.prev = line_hash(&c);
            buf.extend_from_slice(c.as_bytes());
            buf.push(b'\n');
            // Never more than CHECKPOINT_LINES lines without a checkpoint (verify checks it),
            // even within one long batch.
            if let Some(sign) = sign.filter(|_| head.seq.saturating_sub(head.checkpoint_seq) >= CHECKPOINT_LINES - 1) {
                cp_line = Some(checkpoint(&mut head, &mut buf, sign)?);
            }
        }
        let due = head.seq.saturating_sub(head.checkpoint_seq) >= CHECKPOINT_LINES
            || head.checkpoint_time.is_none_or(|t| now - t >= CHECKPOINT_EVERY);
        if let Some(sign) = sign.filter(|_| force_checkpoint || due) {
            cp_line = Some(checkpoint(&mut head, &mut buf, sign)?);
        }
        f.write_all(&buf)?;
        if synced {
            f.sync_data()?;
        }
        head.file = (id.0, id.1, id.2.saturating_add(buf.len() as u64));
        *guard = Some(head);
        Ok(cp_line)
    }

    /// Where the chain stands, read under the lock from the log (once per process, or after
    /// another process wrote, or the log was rotated: never from memory then). A log that is
    /// empty, or holds only a torn line, continues the chain of the rotated `<log>.1`; only
    /// when neither holds a complete line does a chain start.
    fn find_head(&self, f: &mut std::fs::File, len: u64) -> io::Result<Head> {
        let meta = f.metadata()?;
        let id = (meta.dev(), meta.ino(), len);
        let torn = len > 0 && !ends_with_newline(f, len)?;
        if let Some(h) = head_of_file(f, len, id)? {
            return Ok(Head { torn, ..h });
        }
        let old = rotated(&self.path);
        if let Ok(mut o) = crate::files::durable::open_nofollow(OpenOptions::new().read(true), &old) {
            let olen = o.metadata()?.len();
            if let Some(h) = head_of_file(&mut o, olen, id)? {
                // The new log's first line will name the rotated one's last: that last line
                // (perhaps written unsynced: the "issued" lines) is made durable first.
                o.sync_data()?;
                return Ok(Head { torn, ..h });
            }
        }
        Ok(Head { seq: 0, prev: GENESIS.to_string(), checkpoint_seq: 0, checkpoint_time: None, file: id, torn })
    }
}

fn ends_with_newline(f: &mut std::fs::File, len: u64) -> io::Result<bool> {
    if len == 0 {
        return Ok(false);
    }
    f.seek(SeekFrom::Start(len.saturating_sub(1)))?;
    let mut b = [0u8; 1];
    f.read_exact(&mut b)?;
    Ok(b[0] == b'\n')
}

/// The head of the chain in `f` (`len` bytes): its last complete line, found by reading back
/// as far as needed (a line longer than the tail read, or a long torn line, never makes a
/// writer start a new chain on a log that has one); `None` if the file has no complete line.
fn head_of_file(f: &mut std::fs::File, len: u64, id: (u64, u64, u64)) -> io::Result<Option<Head>> {
    let tail = read_tail(f, len)?;
    let (seq, prev) = match head_from_tail(&tail) {
        Some((seq, prev, _)) => (seq, prev),
        None => match last_line_far(f, len)? {
            Some(x) => x,
            None => return Ok(None),
        },
    };
    // The last checkpoint, if the tail holds one (else one is due at once: never too few).
    let cp =
        tail.lines().rev().filter_map(parse_chained).find(|c| c.event.as_deref() == Some("checkpoint")).and_then(|c| {
            let t = crate::encoding::time::parse_rfc3339(c.time.as_deref()?).ok()?;
            Some((c.seq?, t))
        });
    Ok(Some(Head {
        seq,
        prev,
        checkpoint_seq: cp.map(|c| c.0).unwrap_or(0),
        checkpoint_time: cp.map(|c| c.1),
        file: id,
        torn: false,
    }))
}

/// The last complete line of `f` when it is not in the tail: found by scanning back for
/// newlines in chunks, hashed as a stream (never held whole), its seq read from its end
/// (the chain's fields are the line's last: `"seq":N,"prev":"<hex>"}`).
fn last_line_far(f: &mut std::fs::File, len: u64) -> io::Result<Option<(u64, String)>> {
    const CHUNK: u64 = 64 * 1024;
    // Newline positions, scanning back: the end of the last complete line and the one before it.
    let mut end: Option<u64> = None;
    let mut start: u64 = 0;
    let mut pos = len;
    'scan: while pos > 0 {
        let from = pos.saturating_sub(CHUNK);
        f.seek(SeekFrom::Start(from))?;
        let mut buf = vec![0u8; usize::try_from(pos.saturating_sub(from)).unwrap_or(0)];
        f.read_exact(&mut buf)?;
        for (i, b) in buf.iter().enumerate().rev() {
            if *b != b'\n' {
                continue;
            }
            let at = from.saturating_add(i as u64);
            match end {
                None => end = Some(at),
                Some(e) if at.saturating_add(1) < e => {
                    start = at.saturating_add(1);
                    break 'scan;
                }
                // An empty line: the line before it is the last complete one.
                Some(_) => end = Some(at),
            }
        }
        pos = from;
    }
    let Some(end) = end.filter(|e| *e > start) else { return Ok(None) };
    let mut h = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    f.seek(SeekFrom::Start(start))?;
    let mut left = end.saturating_sub(start);
    let mut buf = vec![0u8; CHUNK as usize];
    let mut last = Vec::new();
    while left > 0 {
        let n = usize::try_from(left.min(CHUNK)).unwrap_or(0);
        let chunk = buf.get_mut(..n).unwrap_or_default();
        f.read_exact(chunk)?;
        h.update(&*chunk);
        last.extend_from_slice(chunk);
        if last.len() > 256 {
            last.drain(..last.len().saturating_sub(256));
        }
        left = left.saturating_sub(n as u64);
    }
    let hash = crate::encoding::hex(h.finish().as_ref());
    let tail = String::from_utf8_lossy(&last);
    let seq = tail
        .rsplit_once("\"seq\":")
        .and_then(|(_, r)| r.split(',').next())
        .and_then(|n| n.parse::<u64>().ok())
        .filter(|_| tail.ends_with("\"}"))
        .unwrap_or(0);
    Ok(Some((seq, hash)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chained_lines_stay_json_objects_with_seq_and_prev_last() {
        for line in ["{}", "{ }", "{\"a\":1}", "{\"a\":{\"b\":[1,2]}}"] {
            let c = chain(line, 7, GENESIS);
            let v: serde_json::Value = serde_json::from_str(&c).unwrap_or_else(|e| panic!("{c}: {e}"));
            assert_eq!(v["seq"], 7, "{c}");
            assert_eq!(v["prev"], GENESIS, "{c}");
            assert!(c.ends_with(&format!("\"seq\":7,\"prev\":\"{GENESIS}\"}}")), "{c}");
        }
    }

    #[test]
    fn the_head_is_found_in_a_tail_that_starts_mid_line() {
        let a = chain("{\"event\":\"decision\"}", 41, GENESIS);
        let cp = chain(
            "{\"time\":\"2026-01-01T00:00:00Z\",\"event\":\"checkpoint\",\"signature\":\"x\"}",
            42,
            &line_hash(&a),
        );
        let b = chain("{\"event\":\"revoked\"}", 43, &line_hash(&cp));
        let tail = format!("{a}\n{cp}\n{b}\n");
        let (seq, prev, checkpoint) = head_from_tail(&tail).unwrap();
        assert_eq!((seq, prev), (43, line_hash(&b)));
        assert_eq!(checkpoint.map(|c| c.0), Some(42));
        assert!(head_from_tail("").is_none());
        assert!(head_from_tail("torn line without newline").is_none());
        let (seq, _, _) = head_from_tail(&format!("{a}\n{cp}\n{b}\n{{\"torn")).unwrap();
        assert_eq!(seq, 43, "a torn last line is not the head");
    }
}
