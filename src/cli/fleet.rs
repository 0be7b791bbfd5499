//! `vouch reconcile`, `vouch purge`, `vouch audit`: fleet operations (docs/fleet-operations.md).

use super::args::{AuditCommand, OutFormat, ReconcileArgs, ReportFormat};
use super::{dir, now, Cli, EXIT_OK, EXIT_REFUSED};
use crate::authority::fleet::{Expired, MaxChanges, Orphan, Plan, ReconcileOptions, Stale};
use crate::authority::inventory::Source;
use crate::authority::Authority;
use crate::error::Error;
use crate::store::Junk;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use super::output::stdout_error as out_err;

/// The report's lines go to stdout through this (a closed pipe is an error, never a panic).
struct Out<W: Write>(W);

impl<W: Write> Out<W> {
    fn line(&mut self, s: &str) -> Result<(), Error> {
        self.0.write_all(s.as_bytes()).and_then(|_| self.0.write_all(b"\n")).map_err(out_err)
    }
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

pub(super) fn reconcile(cli: &Cli, a: &ReconcileArgs) -> Result<i32, Error> {
    let source = Source::parse(&a.inventory)?;
    let pending_older_than =
        crate::policy::parse_duration(&a.pending_older_than).filter(|d| !d.is_zero()).ok_or_else(|| Error::Usage {
            detail: format!(
                "--pending-older-than: {}",
                crate::policy::duration_problem(&a.pending_older_than, "12h, 7d or 2w")
            ),
        })?;
    let inventory_timeout =
        crate::policy::parse_duration(&a.inventory_timeout).filter(|d| !d.is_zero()).ok_or_else(|| Error::Usage {
            detail: format!(
                "--inventory-timeout: {}",
                crate::policy::duration_problem(&a.inventory_timeout, "30s, 10m or 1h")
            ),
        })?;
    let max_changes =
        MaxChanges::parse(&a.max_changes).map_err(|d| Error::Usage { detail: format!("--max-changes {d}") })?;
    let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    let now = now(cli)?;
    // A dry run changes nothing: not even a CRL that is due (the next command writes it).
    if a.confirm {
        auth.maintain(now)?;
    }
    let opts = ReconcileOptions {
        source_text: a.inventory.clone(),
        source,
        ldap: cli.store_url(),
        confirm: a.confirm,
        prune: a.prune,
        pending_older_than,
        inventory_timeout,
        max_changes,
        force: a.force,
        progress: a.output == ReportFormat::Text && std::io::stderr().is_terminal(),
    };
    let mut plan = auth.reconcile(&opts, now)?;
    let stdout = std::io::stdout();
    let mut out = Out(std::io::BufWriter::new(stdout.lock()));
    match a.output {
        ReportFormat::Text => render_text(&mut out, &mut plan, a)?,
        ReportFormat::Json => render_structured(&mut out, &mut plan, false)?,
        ReportFormat::Yaml => render_structured(&mut out, &mut plan, true)?,
    }
    out.0.flush().map_err(out_err)?;
    Ok(EXIT_OK)
}

/// How to apply a dry run: the same command with --confirm.
fn apply_hint(a: &ReconcileArgs) -> String {
    let mut s = format!("vouch reconcile --inventory '{}' --confirm", a.inventory);
    if a.prune {
        s.push_str(" --prune");
    }
    if a.pending_older_than != "7d" {
        s.push_str(&format!(" --pending-older-than {}", a.pending_older_than));
    }
    if a.max_changes != "10%" {
        s.push_str(&format!(" --max-changes {}", a.max_changes));
    }
    s
}

/// `s` for a terminal: control characters escaped (an inventory name or a file name cannot
/// move the cursor, recolour or rewrite the report's lines).
fn shown(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

fn render_text(out: &mut Out<impl Write>, plan: &mut Plan, a: &ReconcileArgs) -> Result<(), Error> {
    out.line(&format!(
        "inventory {}: {} names; the store: {} certificates ({} valid), {} pending requests",
        shown(&plan.source),
        plan.inventory,
        plan.certificates,
        plan.valid,
        plan.pending
    ))?;
    out.line(&format!("orphans (a certificate whose name the inventory lacks): {}", plan.orphans.count))?;
    plan.orphans.each(|o: Orphan| {
        let mut flags = Vec::new();
        if o.revoked {
            flags.push("already revoked");
        }
        if o.expired {
            flags.push("expired");
        }
        let flags = if flags.is_empty() { String::new() } else { format!(" ({})", flags.join(", ")) };
        out.line(&format!("  {}  serial {}  not after {}{flags}", o.certname, o.serial, o.not_after))
    })?;
    out.line(&format!("expired certificates of inventory names: {}", plan.expired.count))?;
    plan.expired
        .each(|e: Expired| out.line(&format!("  {}  serial {}  not after {}", e.certname, e.serial, e.not_after)))?;
    out.line(&format!("pending requests older than {}: {}", a.pending_older_than, plan.stale.count))?;
    plan.stale.each(|s: Stale| out.line(&format!("  {}  requested {}", s.certname, s.time)))?;
    out.line(&format!("inventory names with no certificate: {}", plan.missing.count))?;
    plan.missing.each(|n: String| out.line(&format!("  {}", shown(&n))))?;
    out.line(&format!("junk (no usable name; remove with vouch purge NAME… --confirm): {}", plan.junk.count))?;
    plan.junk.each(|j: Junk| {
        out.line(&format!("  {}  {}: {} ({})", j.name, j.kind, shown(&j.detail), shown(&j.files.join(", "))))
    })?;
    match &plan.applied {
        Some(d) => {
            out.line(&format!(
                "applied: revoked {}, forgot {}, dropped {} pending requests; the CRL is updated",
                d.revoked, d.cleaned, d.requests_dropped
            ))?;
            if !d.skipped.is_empty() {
                out.line(&format!("left alone (changed since the plan): {}", d.skipped.join(", ")))?;
            }
        }
        None => {
            out.line(&format!(
                "dry run: nothing changed; {} change{} (limit {} by --max-changes {}).",
                plan.changes,
                if plan.changes == 1 { "" } else { "s" },
                plan.limit,
                plan.max_changes
            ))?;
            if let Some(r) = &plan.refusal {
                out.line(&format!("--confirm would be refused: {r}"))?;
            }
            if plan.changes > 0 {
                out.line(&format!("to apply: {}", apply_hint(a)))?;
            }
        }
    }
    Ok(())
}

/// JSON (one document) or YAML (JSON values are YAML too: each item a flow mapping), written
/// as the spools are read.
fn render_structured(out: &mut Out<impl Write>, plan: &mut Plan, yaml: bool) -> Result<(), Error> {
    let head = serde_json::json!({
        "mode": if plan.confirm { "confirm" } else { "dry-run" },
        "inventory": { "source": plan.source, "names": plan.inventory },
        "store": { "certificates": plan.certificates, "valid": plan.valid, "pending_requests": plan.pending },
        "pending_older_than_seconds": plan.pending_older_than.as_secs(),
        "changes": plan.changes,
        "max_changes": plan.max_changes.to_string(),
        "limit": plan.limit,
        "refused": plan.refusal,
        "prune": plan.prune,
        "applied": plan.applied,
    });
    let scalar_fields = [
        "mode",
        "inventory",
        "store",
        "pending_older_than_seconds",
        "changes",
        "max_changes",
        "limit",
        "refused",
        "prune",
        "applied",
    ];
    if !yaml {
        out.line("{")?;
    }
    for k in scalar_fields {
        let v = head.get(k).cloned().unwrap_or(serde_json::Value::Null);
        if yaml {
            out.line(&format!("{k}: {}", json(&v)))?;
        } else {
            out.line(&format!("  {}: {},", json(&k), json(&v)))?;
        }
    }
    fn section<T: serde::de::DeserializeOwned + serde::Serialize, W: Write>(
        out: &mut Out<W>,
        name: &str,
        spool: &mut crate::authority::fleet::Spool,
        yaml: bool,
        last: bool,
    ) -> Result<(), Error> {
        if yaml {
            if spool.count == 0 {
                return out.line(&format!("{name}: []"));
            }
            out.line(&format!("{name}:"))?;
            return spool.each(|x: T| out.line(&format!("  - {}", json(&x))));
        }
        let w = |out: &mut Out<W>, s: &str| out.0.write_all(s.as_bytes()).map_err(out_err);
        w(out, &format!("  {}: [", json(&name)))?;
        let mut first = true;
        spool.each(|x: T| {
            let sep = if first { "\n    " } else { ",\n    " };
            first = false;
            w(out, &format!("{sep}{}", json(&x)))
        })?;
        w(out, if first { "]" } else { "\n  ]" })?;
        w(out, if last { "\n" } else { ",\n" })
    }
    section::<Orphan, _>(out, "orphans", &mut plan.orphans, yaml, false)?;
    section::<Expired, _>(out, "expired", &mut plan.expired, yaml, false)?;
    section::<Stale, _>(out, "stale_requests", &mut plan.stale, yaml, false)?;
    section::<String, _>(out, "missing", &mut plan.missing, yaml, false)?;
    section::<Junk, _>(out, "junk", &mut plan.junk, yaml, true)?;
    if !yaml {
        out.line("}")?;
    }
    Ok(())
}

pub(super) fn purge(cli: &Cli, names: &[String], confirm: bool) -> Result<i32, Error> {
    let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    let found = auth.purge(names, confirm, now(cli)?)?;
    let stdout = std::io::stdout();
    let mut out = Out(std::io::BufWriter::new(stdout.lock()));
    for j in &found {
        out.line(&format!(
            "{} {}  {}: {} ({})",
            if confirm { "removed" } else { "would remove" },
            j.name,
            j.kind,
            j.detail,
            j.files.join(", ")
        ))?;
    }
    if !confirm {
        out.line(&format!("dry run: nothing removed; to remove: vouch purge {} --confirm", names.join(" ")))?;
    }
    out.0.flush().map_err(out_err)?;
    Ok(EXIT_OK)
}

/// `vouch purge --tombstones [--confirm]`: the shared store's tombstones whose certificate
/// expired a CRL period ago, listed (and removed).
pub(super) fn purge_tombstones(cli: &Cli, confirm: bool) -> Result<i32, Error> {
    let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    if cli.store_url().is_files() {
        // `vouch clean` forgets a certname outright there: nothing stays behind to purge.
        super::say(
            "the files store keeps no tombstones (`vouch clean` forgets a cleaned certname outright): nothing to \
             purge; tombstones are the shared LDAP store's (--store ldap://… or VOUCH_STORE)\n",
        )?;
        return Ok(EXIT_OK);
    }
    let found = auth.purge_tombstones(confirm, now(cli)?)?;
    let stdout = std::io::stdout();
    let mut out = Out(std::io::BufWriter::new(stdout.lock()));
    for t in &found {
        out.line(&format!(
            "{} the tombstone of {} (serial {}, expired {})",
            if confirm { "removed" } else { "would remove" },
            t.certname,
            t.serial,
            t.not_after
        ))?;
    }
    if found.is_empty() {
        out.line("no tombstone whose certificate expired a CRL period ago")?;
    } else if !confirm {
        out.line("dry run: nothing removed; to remove: vouch purge --tombstones --confirm")?;
    }
    out.0.flush().map_err(out_err)?;
    Ok(EXIT_OK)
}

/// The audit log the policy names (its data directory's), or an error saying there is none.
fn policy_log(cli: &Cli) -> Result<PathBuf, Error> {
    let d = dir(cli)?;
    let policy = crate::policy::Policy::load(&d.policy())?;
    policy.audit_log.ok_or(Error::NoAuditLog { policy: d.policy() })
}

pub(super) fn audit(cli: &Cli, c: &AuditCommand) -> Result<i32, Error> {
    match c {
        AuditCommand::Verify { files, checkpoint, from_checkpoint, ca_cert, output } => {
            let files = audit_files(cli, files)?;
            let ca_der = audit_ca_der(cli, ca_cert)?;
            let published = checkpoint_line(checkpoint)?;
            let from = checkpoint_line(from_checkpoint)?;
            let v = crate::store::audit::verify(&files, &ca_der, published.as_deref(), from.as_deref())
                .map_err(|source| Error::Io { path: files.first().cloned().unwrap_or_default(), op: "read", source })?;
            let text = match output {
                OutFormat::Json => serde_json::to_string_pretty(&v).unwrap_or_default(),
                OutFormat::Text => verified_text(&v),
            };
            super::say(&format!("{text}\n"))?;
            Ok(if v.broken.is_some() { EXIT_REFUSED } else { EXIT_OK })
        }
        AuditCommand::Show { certname, since, output, file } => {
            let path = match file {
                Some(f) => f.clone(),
                None => policy_log(cli)?,
            };
            let since = match since {
                None => None,
                Some(s) => Some(since_time(cli, s)?),
            };
            show(&path, certname.as_deref(), since, *output)
        }
        AuditCommand::Checkpoint => {
            let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
            match auth.audit_checkpoint()? {
                Some(line) => super::say(&format!("{line}\n"))?,
                None => {
                    let d = dir(cli)?;
                    return Err(Error::NoAuditLog { policy: d.policy() });
                }
            }
            Ok(EXIT_OK)
        }
    }
}

/// The files `vouch audit verify` reads: those given, or by default the policy's log with its
/// rotated files (`<log>.N … <log>.1`, oldest first, uncompressed): the chain starts in the oldest.
fn audit_files(cli: &Cli, files: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    if !files.is_empty() {
        return Ok(files.to_vec());
    }
    let log = policy_log(cli)?;
    let mut all = Vec::new();
    let mut n = 1u32;
    loop {
        let mut r = log.clone().into_os_string();
        r.push(format!(".{n}"));
        let r = PathBuf::from(r);
        if !r.exists() {
            break;
        }
        all.push(r);
        n = n.saturating_add(1);
    }
    all.reverse();
    all.push(log);
    Ok(all)
}

/// The CA certificate (DER) the checkpoints are verified against: `--ca-cert`, else the data
/// directory's if it has one; empty for none.
fn audit_ca_der(cli: &Cli, ca_cert: &Option<PathBuf>) -> Result<Vec<u8>, Error> {
    let ca_path = match ca_cert {
        Some(p) => Some(p.clone()),
        // The autosign hook's log (no CA here) has no checkpoints: the chain alone.
        None => Some(dir(cli)?.file(crate::issuance::bootstrap::CA_CERT)).filter(|p| p.exists()),
    };
    Ok(match &ca_path {
        Some(path) => {
            let pem = crate::error::read_input(path, crate::files::input::Kind::Cert)?;
            crate::encoding::pem::find(&pem, &["CERTIFICATE"])
                .map_err(|e| Error::Cert { path: path.clone(), detail: e.to_string() })?
                .1
        }
        None => Vec::new(),
    })
}

/// A checkpoint line given in a file (`--checkpoint`, `--from-checkpoint`), trimmed.
fn checkpoint_line(p: &Option<PathBuf>) -> Result<Option<String>, Error> {
    Ok(match p {
        Some(p) => Some(
            String::from_utf8_lossy(&crate::error::read_input(p, crate::files::input::Kind::Cert)?).trim().to_string(),
        ),
        None => None,
    })
}

/// `vouch audit verify`'s text: the first break, or what was verified.
fn verified_text(v: &crate::store::audit::Verified) -> String {
    match &v.broken {
        Some(b) => format!(
            "BROKEN: {}{}: {}: {}",
            b.file.display(),
            if b.line > 0 { format!(":{}", b.line) } else { String::new() },
            b.kind,
            b.detail
        ),
        None => format!(
            "ok: {} lines{}, chain intact{}; {} checkpoints{}",
            v.lines,
            if v.unchained > 0 {
                format!(" ({} before the chain began, unprotected)", v.unchained)
            } else {
                String::new()
            },
            match (v.first_seq, v.last_seq) {
                (Some(a), Some(b)) => format!(" from seq {a} to {b}"),
                _ => String::new(),
            },
            v.checkpoints,
            match &v.last_checkpoint {
                Some((s, t)) => format!(
                    ", the last at seq {s} ({t}): lines after it are protected only by the chain until the next"
                ),
                None => String::new(),
            }
        ),
    }
}

/// `--since`: an RFC 3339 time, or a duration back from now.
fn since_time(cli: &Cli, s: &str) -> Result<time::OffsetDateTime, Error> {
    Ok(match crate::encoding::time::parse_rfc3339(s) {
        Ok(t) => t,
        Err(_) => {
            let d = crate::policy::parse_duration(s).ok_or_else(|| Error::Usage {
                detail: format!("--since {s:?} is neither RFC 3339 nor a duration such as 24h or 7d"),
            })?;
            let back = time::Duration::try_from(d).unwrap_or(time::Duration::MAX);
            now(cli)?.checked_sub(back).unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
        }
    })
}

/// `vouch audit show`: the log's lines (streamed), filtered.
fn show(
    path: &std::path::Path,
    certname: Option<&str>,
    since: Option<time::OffsetDateTime>,
    output: OutFormat,
) -> Result<i32, Error> {
    let f = std::fs::File::open(path).map_err(|source| Error::Io { path: path.to_path_buf(), op: "read", source })?;
    let stdout = std::io::stdout();
    let mut out = Out(std::io::BufWriter::new(stdout.lock()));
    let mut r = std::io::BufReader::new(f);
    let mut number = 0u64;
    while let Some(line) = crate::files::input::read_line_bounded(&mut r, crate::store::audit::MAX_READ_LINE)
        .map_err(|source| Error::Io { path: path.to_path_buf(), op: "read", source })?
    {
        number = number.saturating_add(1);
        let line = match line {
            crate::files::input::Line::Text(b) => String::from_utf8_lossy(&b).into_owned(),
            crate::files::input::Line::TooLong => {
                // Never held whole; said where it is (vouch writes no such line).
                let limit = crate::store::audit::MAX_READ_LINE;
                eprintln!("vouch: {}: line {number} is longer than {limit} bytes: not shown", path.display());
                crate::files::input::skip_line(&mut r).map_err(|source| Error::Io {
                    path: path.to_path_buf(),
                    op: "read",
                    source,
                })?;
                continue;
            }
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or_default().to_string();
        if certname.is_some_and(|c| field("certname") != c) {
            continue;
        }
        if let Some(since) = since {
            match crate::encoding::time::parse_rfc3339(&field("time")) {
                Ok(t) if t >= since => {}
                _ => continue,
            }
        }
        match output {
            OutFormat::Json => out.line(&line)?,
            OutFormat::Text => {
                let mut parts = vec![field("time"), field("event")];
                for k in ["certname", "verdict", "serial", "reason", "name", "source", "by"] {
                    let x = field(k);
                    if !x.is_empty() {
                        parts.push(format!("{k}={x}"));
                    }
                }
                if let Some(r) = v.get("reasons").and_then(|r| r.as_array()).filter(|r| !r.is_empty()) {
                    let codes: Vec<&str> = r.iter().filter_map(|x| x.get("code").and_then(|c| c.as_str())).collect();
                    parts.push(format!("reasons={}", codes.join(",")));
                }
                if let Some(s) = v.get("seq").and_then(|s| s.as_u64()) {
                    parts.push(format!("#{s}"));
                }
                out.line(&parts.join("  "))?;
            }
        }
    }
    out.0.flush().map_err(out_err)?;
    Ok(EXIT_OK)
}
