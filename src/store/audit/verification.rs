//! `vouch audit verify`: the chain checked line by line through the log's files (a rotated
//! file first), every checkpoint's signature against the master CA, and the log's reaching
//! a published checkpoint unchanged; the first break found, classified.

use super::{checkpoint_message, line_hash, parse_chained, Chained, CHECKPOINT_LINES, GENESIS, MAX_READ_LINE};
use std::io;
use std::path::{Path, PathBuf};

/// Verifies a checkpoint's signature against a CA certificate (DER).
pub fn verify_signature(ca_der: &[u8], msg: &[u8], sig: &[u8]) -> bool {
    let cd = rustls_pki_types::CertificateDer::from(ca_der);
    let Ok(cert) = webpki::EndEntityCert::try_from(&cd) else { return false };
    webpki::ALL_VERIFICATION_ALGS.iter().any(|alg| cert.verify_signature(*alg, msg, sig).is_ok())
}

/// The first break `verify` found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Break {
    /// `modified`, `inserted`, `deleted`, `reordered`, `truncated` or `bad-checkpoint`.
    pub kind: &'static str,
    pub file: PathBuf,
    /// 1-based line number in `file` (0: the file's end).
    pub line: usize,
    pub detail: String,
}

/// What `vouch audit verify` found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Verified {
    pub lines: u64,
    /// Lines before the chain starts (written before vouch chained its log): not protected.
    pub unchained: u64,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    pub checkpoints: u64,
    pub last_checkpoint: Option<(u64, String)>,
    pub broken: Option<Break>,
}

/// One line of a file being verified.
struct Line {
    seq: Option<u64>,
    prev: Option<String>,
    hash: String,
    checkpoint: Option<Chained>,
    /// Longer than [`MAX_READ_LINE`]: vouch writes none such (not read whole).
    too_long: bool,
}

fn read_lines(path: &Path) -> io::Result<Vec<Line>> {
    let f = std::fs::File::open(path)?;
    let mut out = Vec::new();
    let mut r = io::BufReader::with_capacity(1 << 20, f);
    while let Some(l) = crate::files::input::read_line_bounded(&mut r, MAX_READ_LINE)? {
        let text = match l {
            crate::files::input::Line::Text(b) => String::from_utf8_lossy(&b).into_owned(),
            crate::files::input::Line::TooLong => {
                // verify stops here: the rest is not read.
                out.push(Line { seq: None, prev: None, hash: String::new(), checkpoint: None, too_long: true });
                break;
            }
        };
        let c = parse_chained(&text);
        let hash = line_hash(&text);
        let (seq, prev, checkpoint) = match c {
            Some(c) if c.event.as_deref() == Some("checkpoint") => (c.seq, c.prev.clone(), Some(c)),
            Some(c) => (c.seq, c.prev, None),
            None => (None, None, None),
        };
        out.push(Line { seq, prev, hash, checkpoint, too_long: false });
    }
    Ok(out)
}

/// Verifies the chain through `files` (in order: a rotated file first), the checkpoints'
/// signatures against `ca_der`, and, if given, that the log reaches the published checkpoint
/// line `published` unchanged. Stops at the first break.
///
/// The files must start where the chain does (seq 1, prev all zeros: "earlier files
/// missing" otherwise), unless `from` (a checkpoint signed by this CA, `--from-checkpoint`)
/// says where they start: their first line is that checkpoint, or the line after it. With a
/// CA (`ca_der` not empty), a signed checkpoint must come at least every [`CHECKPOINT_LINES`]
/// lines (the writer puts one there), so a log rewritten without the CA's key fails.
pub fn verify(files: &[PathBuf], ca_der: &[u8], published: Option<&str>, from: Option<&str>) -> io::Result<Verified> {
    let mut v = Verified::default();
    let from = match start_checkpoint(from, ca_der) {
        Ok(f) => f,
        Err(b) => {
            v.broken = Some(b);
            return Ok(v);
        }
    };
    let published = match published_checkpoint(published, ca_der) {
        Ok(p) => p,
        Err(b) => {
            v.broken = Some(b);
            return Ok(v);
        }
    };
    let mut walk = Walk {
        v,
        ca_der,
        require_checkpoints: !ca_der.is_empty(),
        published_seen: false,
        // The chain's start, or the checkpoint the files start from.
        last_cp_seq: from.as_ref().map_or(0, |(fseq, _)| *fseq),
        from,
        published,
        last: None,
        chained_started: false,
    };
    for file in files {
        let lines = read_lines(file)?;
        for i in 0..lines.len() {
            if let Err(b) = walk.line(&lines, i, file) {
                walk.v.broken = Some(b);
                return Ok(walk.v);
            }
        }
    }
    walk.v.broken = walk.published_missing(files);
    Ok(walk.v)
}

/// A break in `file` at line `line` (1-based; 0: the file's end).
fn brk(file: &Path, kind: &'static str, line: usize, detail: String) -> Break {
    Break { kind, file: file.to_path_buf(), line, detail }
}

/// `--from-checkpoint`: the checkpoint line the files start from (its seq and hash), which
/// must be one signed by this CA.
fn start_checkpoint(from: Option<&str>, ca_der: &[u8]) -> Result<Option<(u64, String)>, Break> {
    let Some(p) = from else { return Ok(None) };
    let line = p.trim();
    match parse_chained(line).filter(|c| c.event.as_deref() == Some("checkpoint")) {
        Some(c) if checkpoint_ok(&c, ca_der) => Ok(Some((c.seq.unwrap_or(0), line_hash(line)))),
        _ => Err(Break {
            kind: "bad-checkpoint",
            file: PathBuf::from("--from-checkpoint"),
            line: 0,
            detail: "the checkpoint to start from is not a checkpoint line signed by this CA".into(),
        }),
    }
}

/// A published checkpoint line (`--checkpoint`): its seq, hash, fields and text.
type PublishedCheckpoint = (u64, String, Chained, String);

/// `--checkpoint`: the published checkpoint line the log must reach unchanged, which must be
/// a checkpoint line signed by this CA.
fn published_checkpoint(published: Option<&str>, ca_der: &[u8]) -> Result<Option<PublishedCheckpoint>, Break> {
    let published = match published {
        Some(p) => {
            let line = p.trim();
            let c = parse_chained(line).filter(|c| c.event.as_deref() == Some("checkpoint"));
            match c {
                Some(c) => Some((c.seq.unwrap_or(0), line_hash(line), c, line.to_string())),
                None => {
                    return Err(Break {
                        kind: "bad-checkpoint",
                        file: PathBuf::from("--checkpoint"),
                        line: 0,
                        detail: "the published checkpoint is not a checkpoint line of vouch's audit log".into(),
                    });
                }
            }
        }
        None => None,
    };
    if let Some((seq, _, c, _)) = &published {
        if !checkpoint_ok(c, ca_der) {
            return Err(Break {
                kind: "bad-checkpoint",
                file: PathBuf::from("--checkpoint"),
                line: 0,
                detail: format!("the published checkpoint (seq {seq}) is not signed by this CA"),
            });
        }
    }
    Ok(published)
}

/// Where a verification stands: what it found so far, and what the next line must continue.
struct Walk<'a> {
    v: Verified,
    ca_der: &'a [u8],
    require_checkpoints: bool,
    /// `--from-checkpoint`'s seq and hash.
    from: Option<(u64, String)>,
    published: Option<PublishedCheckpoint>,
    // The published checkpoint was found in the files (or is the one they start from).
    published_seen: bool,
    // The seq of the last signed checkpoint (0: the chain's start).
    last_cp_seq: u64,
    // The previous line: (seq if chained, hash).
    last: Option<(Option<u64>, String)>,
    chained_started: bool,
}

impl Walk<'_> {
    /// Checks line `i` of `file` (`lines`): its place in the chain, its checkpoint, and the
    /// published checkpoint; the first break found.
    fn line(&mut self, lines: &[Line], i: usize, file: &Path) -> Result<(), Break> {
        let Some(l) = lines.get(i) else { return Ok(()) };
        let n = i.saturating_add(1);
        self.v.lines = self.v.lines.saturating_add(1);
        if l.too_long {
            return Err(brk(
                file,
                "modified",
                n,
                format!("a line longer than {MAX_READ_LINE} bytes: vouch writes none (not read whole)"),
            ));
        }
        let Some(seq) = l.seq else { return self.unchained(lines, i, file) };
        self.link(lines, i, seq, file)?;
        if !self.chained_started {
            self.v.first_seq = Some(seq);
            self.chained_started = true;
        }
        self.checkpoint(l, seq, n, file)?;
        self.published_at(l, seq, n, file)?;
        self.v.last_seq = Some(seq);
        self.last = Some((Some(seq), l.hash.clone()));
        Ok(())
    }

    /// A line without seq and prev: before the chain began, counted (unprotected); after,
    /// inserted or modified.
    fn unchained(&mut self, lines: &[Line], i: usize, file: &Path) -> Result<(), Break> {
        let n = i.saturating_add(1);
        if self.chained_started {
            let skipped = lines.get(i.saturating_add(1)).and_then(|x| x.prev.as_deref())
                == self.last.as_ref().map(|x| x.1.as_str());
            return Err(if skipped {
                brk(file, "inserted", n, "a line that is not part of the chain was inserted here".into())
            } else {
                brk(file, "modified", n, "not a chained audit line (no seq and prev): modified".into())
            });
        }
        self.v.unchained = self.v.unchained.saturating_add(1);
        if let Some(l) = lines.get(i) {
            self.last = Some((None, l.hash.clone()));
        }
        Ok(())
    }

    /// Whether chained line `i` (seq `seq`) follows what came before it: the checkpoint the
    /// files start from, the chain's start, an unchained line, or the previous chained line.
    fn link(&self, lines: &[Line], i: usize, seq: u64, file: &Path) -> Result<(), Break> {
        let n = i.saturating_add(1);
        let (prev, hash) = lines.get(i).map_or(("", ""), |l| (l.prev.as_deref().unwrap_or_default(), l.hash.as_str()));
        match &self.last {
            _ if !self.chained_started && self.from.is_some() => {
                // The files start at the checkpoint given, or right after it.
                let (fseq, fhash) = self.from.as_ref().map(|(a, b)| (*a, b.as_str())).unwrap_or((0, ""));
                let at = hash == fhash;
                let after = seq == fseq.saturating_add(1) && prev == fhash;
                if !(at || after) {
                    return Err(brk(
                        file,
                        "deleted",
                        n,
                        format!(
                            "the files given do not start at the --from-checkpoint checkpoint (seq {fseq}) or the line after it (this line is seq {seq})"
                        ),
                    ));
                }
            }
            None => {
                // The first line of what is verified: the chain's first line.
                if seq == 1 && prev != GENESIS {
                    return Err(brk(file, "modified", n, "the chain's first line has a wrong prev".into()));
                }
                if seq != 1 {
                    return Err(brk(
                        file,
                        "deleted",
                        n,
                        format!(
                            "earlier files missing: the files given start at seq {seq}, not at the chain's first line (give every rotated file, oldest first, or --from-checkpoint FILE with a published checkpoint they continue)"
                        ),
                    ));
                }
            }
            Some((None, h)) => {
                if prev != h {
                    return Err(brk(
                        file,
                        "modified",
                        n.saturating_sub(1),
                        "the line before the chain's first line is not the one it recorded".into(),
                    ));
                }
                if seq != 1 {
                    return Err(brk(
                        file,
                        "modified",
                        n,
                        format!("the chain's first line is seq {seq}, not 1: lines of it were deleted or rewritten"),
                    ));
                }
            }
            Some((Some(pseq), h)) => {
                let expected = pseq.saturating_add(1);
                if seq != expected {
                    return Err(classify(lines, i, seq, expected, file));
                }
                if prev != h {
                    return Err(brk(
                        file,
                        "modified",
                        n.saturating_sub(1).max(1),
                        format!(
                            "seq {pseq} is not the line that seq {seq} recorded (its hash differs): modified{}",
                            if i == 0 { " (the last line of the previous file)" } else { "" }
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// A checkpoint line must be signed by this CA over its place in the chain; with a CA,
    /// one must come at least every [`CHECKPOINT_LINES`] lines.
    fn checkpoint(&mut self, l: &Line, seq: u64, n: usize, file: &Path) -> Result<(), Break> {
        if let Some(c) = &l.checkpoint {
            if !checkpoint_ok(c, self.ca_der) {
                return Err(brk(
                    file,
                    "bad-checkpoint",
                    n,
                    format!("the checkpoint at seq {seq} is not signed by this CA over its place in the chain"),
                ));
            }
            self.v.checkpoints = self.v.checkpoints.saturating_add(1);
            self.v.last_checkpoint = Some((seq, c.time.clone().unwrap_or_default()));
            self.last_cp_seq = seq;
        } else if self.require_checkpoints && seq.saturating_sub(self.last_cp_seq) >= CHECKPOINT_LINES {
            return Err(brk(
                file,
                "bad-checkpoint",
                n,
                format!(
                    "no checkpoint signed by this CA in the {CHECKPOINT_LINES} lines up to seq {seq} (vouch writes one at least that often): the log was rewritten without the CA's key"
                ),
            ));
        }
        Ok(())
    }

    /// The line at the published checkpoint's seq must be that very line.
    fn published_at(&mut self, l: &Line, seq: u64, n: usize, file: &Path) -> Result<(), Break> {
        if let Some((pseq, phash, _, _)) = &self.published {
            if *pseq == seq {
                if *phash != l.hash {
                    return Err(brk(
                        file,
                        "modified",
                        n,
                        format!("seq {seq} differs from the published checkpoint (the log was rewritten)"),
                    ));
                }
                self.published_seen = true;
            }
        }
        Ok(())
    }

    /// After the last file: a published checkpoint the files never reached is deleted
    /// (they go past its seq) or truncated (they end before it).
    fn published_missing(&mut self, files: &[PathBuf]) -> Option<Break> {
        let v = &self.v;
        if let (Some((_, phash, _, _)), Some((_, fhash))) = (&self.published, &self.from) {
            self.published_seen |= phash == fhash;
        }
        let (pseq, _, _, _) = self.published.as_ref().filter(|_| !self.published_seen)?;
        if v.last_seq.is_some_and(|s| s >= *pseq) {
            Some(Break {
                kind: "deleted",
                file: files.first().cloned().unwrap_or_default(),
                line: 0,
                detail: format!(
                    "the published checkpoint (seq {pseq}) is not in the files given (they cover seq {} to {})",
                    v.first_seq.map(|s| s.to_string()).unwrap_or_else(|| "none".into()),
                    v.last_seq.map(|s| s.to_string()).unwrap_or_else(|| "none".into())
                ),
            })
        } else {
            Some(Break {
                kind: "truncated",
                file: files.last().cloned().unwrap_or_default(),
                line: 0,
                detail: format!(
                    "the log ends at seq {} but a published checkpoint is at seq {pseq}: its tail was cut off",
                    v.last_seq.map(|s| s.to_string()).unwrap_or_else(|| "none".into())
                ),
            })
        }
    }
}

fn checkpoint_ok(c: &Chained, ca_der: &[u8]) -> bool {
    use base64::Engine;
    let (Some(seq), Some(prev), Some(time), Some(sig)) = (c.seq, &c.prev, &c.time, &c.signature) else {
        return false;
    };
    let Ok(sig) = base64::engine::general_purpose::STANDARD.decode(sig) else { return false };
    verify_signature(ca_der, &checkpoint_message(seq, prev, time), &sig)
}

/// The kind of a break where line `i` (seq `seq`) follows a line that expects `expected`.
fn classify(lines: &[Line], i: usize, seq: u64, expected: u64, file: &Path) -> Break {
    let n = i.saturating_add(1);
    let later = lines.iter().enumerate().skip(i.saturating_add(1)).find(|(_, l)| l.seq == Some(expected));
    if seq > expected {
        if let Some((j, _)) = later {
            return Break {
                kind: "reordered",
                file: file.to_path_buf(),
                line: n,
                detail: format!("seq {seq} comes before seq {expected} (line {})", j.saturating_add(1)),
            };
        }
        let missing = seq.saturating_sub(expected);
        return Break {
            kind: "deleted",
            file: file.to_path_buf(),
            line: n,
            detail: format!(
                "{missing} line{} (seq {expected}{}) deleted before this line",
                if missing == 1 { "" } else { "s" },
                if missing == 1 { String::new() } else { format!(" to {}", seq.saturating_sub(1)) }
            ),
        };
    }
    // seq < expected: the line before is one too many, or this one repeats an earlier seq.
    let inserted_before =
        i >= 2 && lines.get(i.saturating_sub(2)).map(|l| &l.hash) == lines.get(i).and_then(|l| l.prev.as_ref());
    if inserted_before {
        return Break {
            kind: "inserted",
            file: file.to_path_buf(),
            line: i,
            detail: format!("a line was inserted here (seq {} is taken by the next line)", seq),
        };
    }
    let earlier = lines.iter().take(i).rposition(|l| l.seq == Some(seq));
    match earlier {
        Some(j) if lines.get(j).map(|l| &l.hash) != lines.get(i).map(|l| &l.hash) => Break {
            kind: "reordered",
            file: file.to_path_buf(),
            line: n,
            detail: format!("seq {seq} appears again after seq {}", expected.saturating_sub(1)),
        },
        Some(j) => Break {
            kind: "inserted",
            file: file.to_path_buf(),
            line: n,
            detail: format!("a copy of line {} (seq {seq}) was inserted", j.saturating_add(1)),
        },
        None => Break {
            kind: "reordered",
            file: file.to_path_buf(),
            line: n,
            detail: format!("seq {seq} after seq {}", expected.saturating_sub(1)),
        },
    }
}
