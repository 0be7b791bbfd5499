//! `vouch reconcile --confirm`: the plan ([`super::fleet`]) applied under the store's lock.
//! Each orphan is revoked (with `--prune`: and forgotten) and each stale request dropped,
//! unless it changed since the plan; each change is audited; one CRL is written at the end,
//! even after a failure.

use super::fleet::{Applied, Orphan, Plan, ReconcileOptions, Stale, RECONCILE_REASON};
use super::Authority;
use crate::encoding::time::format_rfc3339;
use crate::error::Error;
use crate::store::{Revocation, State, StoreError, WriteLock};
use time::OffsetDateTime;

/// How many of the certificates `--confirm` revoked [`Error::ReconcileCrlNotWritten`] names.
const NAMED_REVOCATIONS: usize = 10;

/// What the apply step has done so far.
#[derive(Default)]
struct Applying {
    done: Applied,
    /// Whether a certificate was revoked (the CRL is then written).
    revoked_any: bool,
    /// The first certificates revoked, named in the error if the CRL cannot be written.
    named: Vec<(String, String)>,
}

/// The apply step's progress bar on stderr, when `on`.
fn bar(on: bool, len: u64, what: &str) -> Option<indicatif::ProgressBar> {
    if !on {
        return None;
    }
    let pb = indicatif::ProgressBar::new(len);
    pb.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({eta})") {
        pb.set_style(style);
    }
    pb.set_message(what.to_string());
    Some(pb)
}

impl Authority {
    /// Revokes (with `--prune`: and forgets) the plan's orphans and drops its stale requests,
    /// under the store's lock; one CRL at the end.
    pub(super) fn apply(
        &self,
        plan: &mut Plan,
        opts: &ReconcileOptions,
        now: OffsetDateTime,
        snapshot: OffsetDateTime,
    ) -> Result<Applied, Error> {
        let mut applying = Applying::default();
        let lock = self.store.lock()?;
        let pb = bar(opts.progress, plan.changes, "applying");
        let result = plan.orphans.each(|o: Orphan| {
            if o.revoked && !opts.prune {
                return Ok(());
            }
            if let Some(pb) = &pb {
                pb.inc(1);
            }
            self.revoke_orphan(&lock, o, opts, (now, snapshot), &mut applying)
        });
        let result = result.and_then(|()| {
            plan.stale.each(|s: Stale| {
                if let Some(pb) = &pb {
                    pb.inc(1);
                }
                self.drop_stale_request(s, now, &mut applying.done)
            })
        });
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        // What was done stays done: the CRL lists it, written even after a failure.
        let crl = if applying.revoked_any { self.write_crl_locked(&lock, now) } else { Ok(()) };
        applied_outcome(result, crl, applying)
    }

    /// One orphan, under the lock: revoked (with `--prune`: and forgotten) and audited; skipped
    /// if its certificate is gone, an administrator's, or changed since the plan.
    fn revoke_orphan(
        &self,
        lock: &WriteLock,
        o: Orphan,
        opts: &ReconcileOptions,
        (now, snapshot): (OffsetDateTime, OffsetDateTime),
        applying: &mut Applying,
    ) -> Result<(), Error> {
        let done = &mut applying.done;
        let Some(current) = self.store.current(&o.certname)? else {
            done.skipped.push(o.certname);
            return Ok(());
        };
        if self.is_admin_certificate(&current.pem) {
            done.skipped.push(o.certname);
            return Ok(());
        }
        let expected = current.expected();
        let rec = current.record;
        let unchanged = rec.serial == o.serial && (rec.state == State::Revoked) == o.revoked;
        if !unchanged || self.record_issued_after(&rec, snapshot) {
            done.skipped.push(o.certname);
            return Ok(());
        }
        let rev = Revocation {
            certname: o.certname.clone(),
            ..Revocation::of(
                &rec,
                if o.revoked {
                    rec.revoked_at.clone().unwrap_or_else(|| format_rfc3339(now))
                } else {
                    format_rfc3339(now)
                },
                if o.revoked {
                    rec.reason.clone().unwrap_or_else(|| RECONCILE_REASON.into())
                } else {
                    RECONCILE_REASON.into()
                },
                opts.prune,
            )
        };
        match self.store.revoke(lock, &rev, &rec, Some(&expected)) {
            Ok(()) => {}
            Err(StoreError::Conflict { .. }) => {
                done.skipped.push(o.certname);
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        }
        if !o.revoked {
            applying.revoked_any = true;
            done.revoked = done.revoked.saturating_add(1);
            if applying.named.len() < NAMED_REVOCATIONS {
                applying.named.push((rev.certname.clone(), rev.serial.clone()));
            }
        }
        if opts.prune {
            done.cleaned = done.cleaned.saturating_add(1);
        }
        self.audit(serde_json::json!({
            "time": rev.time, "event": if rev.cleaned { "cleaned" } else { "revoked" },
            "certname": rev.certname, "serial": rev.serial, "reason": rev.reason, "by": "reconcile",
        }))
    }

    /// One stale request, under the lock: dropped and audited; skipped if the agent sent
    /// another since the plan.
    fn drop_stale_request(&self, s: Stale, now: OffsetDateTime, done: &mut Applied) -> Result<(), Error> {
        // Under the lock: only the request listed (the agent may have sent a new one
        // since the plan: it is left alone).
        match self.store.request(&s.certname)? {
            Some((r, _)) if r.time != s.time => {
                done.skipped.push(s.certname);
                return Ok(());
            }
            _ => {}
        }
        self.store.remove_request(&s.certname)?;
        done.requests_dropped = done.requests_dropped.saturating_add(1);
        self.audit(serde_json::json!({
            "time": format_rfc3339(now), "event": "request-dropped", "certname": s.certname,
            "requested": s.time, "by": "reconcile",
        }))
    }
}

/// What `--confirm` returns once the CRL is written (or not): what it did, or why it stopped.
fn applied_outcome(result: Result<(), Error>, crl: Result<(), Error>, applying: Applying) -> Result<Applied, Error> {
    let Applying { done, named, .. } = applying;
    let stopped = |error: Error| Error::Unfinished {
        done: format!(
            "reconcile revoked {}, forgot {} and dropped {} requests before it stopped",
            done.revoked, done.cleaned, done.requests_dropped
        ),
        error: Box::new(error),
    };
    match (result, crl) {
        (Ok(()), Ok(())) => Ok(done),
        (Err(error), Ok(())) => Err(stopped(error)),
        // The revocations are stored and the CRL does not list them: as `vouch revoke`
        // says of one, exit 3 (an earlier failure is a warning, the CRL the error).
        (result, Err(error)) => {
            if let Err(e) = result {
                super::warn("reconcile", &stopped(e).to_string());
            }
            Err(Error::ReconcileCrlNotWritten {
                revoked: done.revoked,
                named,
                cleaned: done.cleaned,
                requests_dropped: done.requests_dropped,
                error: Box::new(error),
            })
        }
    }
}
