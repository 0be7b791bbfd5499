//! What `vouch revoke` and `vouch clean` refuse without `--force` ([`Error::NeedsForce`]): a
//! master's service certname (that master would present a revoked certificate until its
//! `vouch serve` restarts), and the store's last valid administrator certificate (no client
//! could use `vouch serve`'s administrator API). An administrator's certificate is one
//! [`Authority::is_admin_certificate`] says is: Puppet's `pp_cli_auth` (`vouch admin new`,
//! `DIR/admin/` made by `vouch serve`), or a fingerprint this master's `[serve] admins` lists.
//! They are counted in the store the command opens: the fleet's on a shared store (any
//! master's administrator is one at every master), this CA's on the file store. A
//! revocation counts them under the store's lock and, for a valid administrator's
//! certificate, the fleet's lock on such revocations (`Store::hold_admin_revocations`),
//! which it keeps until its revocation is written.

use super::revocation_input::normal_serial;
use super::Authority;
use crate::error::{Error, NeedsForce};
use crate::issuance::bootstrap::SERVER_CERT;
use crate::store::{Current, State, WriteLock};
use std::ops::ControlFlow;
use time::OffsetDateTime;

/// The fleet's lock on revocations of administrator certificates, held
/// ([`crate::store::admin_lock`]): given back when dropped.
pub(super) type AdminHold<'a> = Box<dyn crate::store::admin_lock::Hold + 'a>;

impl Authority {
    /// Whose service certificate `name` is the certname of, if a master's: this master's
    /// (`own`: [`Authority::own_service_certname`], "this master"), or another master's of the
    /// shared store ("another master"). The other masters' names that cannot be read are an
    /// error (never taken as none).
    fn service_certname_of(&self, name: &str, own: Option<&str>) -> Result<Option<&'static str>, Error> {
        if own.is_some_and(|cn| cn.eq_ignore_ascii_case(name.strip_suffix('.').unwrap_or(name))) {
            return Ok(Some("this master"));
        }
        self.read_fleet_names()?;
        Ok(self.another_masters_certname(name).then_some("another master"))
    }

    /// This master's service certname: the first name on `DIR/server/server_crt.pem`, or why
    /// that file does not tell it (missing, unreadable, no certificate).
    fn own_service_certname(&self) -> Result<String, String> {
        let pem = std::fs::read(self.dir.dir.join(SERVER_CERT)).map_err(|e| e.to_string())?;
        let (_, der) = crate::encoding::pem::find(&pem, &["CERTIFICATE"]).map_err(|e| e.to_string())?;
        super::reserved::names_on_certificate(&der).into_iter().next().ok_or_else(|| "it names nothing".into())
    }

    /// Where `DIR/server/server_crt.pem` does not tell this master's service certname (`why`
    /// not), the certificates `vouch serve` would be presenting (deny by default): the
    /// certname it gives its certificate without `--server-name` (the host's name,
    /// `localhost`), and any certificate naming the loopback addresses every service
    /// certificate carries (whatever its `--server-name`; a node's never does).
    fn maybe_own_service(&self, certname: &str, pem: &str, why: String) -> Option<NeedsForce> {
        let file = self.dir.dir.join(SERVER_CERT);
        let names = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"])
            .map(|(_, der)| super::reserved::names_on_certificate(&der))
            .unwrap_or_default();
        let sign = if super::reserved::host_name().is_some_and(|h| h == certname) || certname == "localhost" {
            "the name vouch serve gives its certificate by default"
        } else if names.iter().any(|n| n == "127.0.0.1" || n == "::1") {
            "the loopback addresses every service certificate names"
        } else {
            return None;
        };
        Some(NeedsForce::MaybeService { sign, file, why })
    }

    /// Refuses (unless `force`) to revoke `certname`'s current certificate: a master's service
    /// certname, or the store's last valid administrator certificate. A check ahead of a
    /// revocation (the revocation judges again, [`Authority::refuse_unforced_held`]).
    pub fn refuse_unforced(&self, certname: &str, force: bool, now: OffsetDateTime) -> Result<(), Error> {
        self.judge_unforced(certname, force, None, now).map(drop)
    }

    /// [`Authority::refuse_unforced`] as a revocation under `lock` judges it: the count of a
    /// valid administrator certificate's revocation is made with the fleet's lock on such
    /// revocations held ([`crate::store::Store::hold_admin_revocations`]: on a shared store,
    /// two masters revoking the last two administrators at once cannot each count the other's
    /// as the one left), and the hold is returned, for the caller to keep until its
    /// revocation is written. No hold for any other revocation.
    pub(super) fn refuse_unforced_held(
        &self,
        lock: &WriteLock,
        certname: &str,
        force: bool,
        now: OffsetDateTime,
    ) -> Result<Option<AdminHold<'_>>, Error> {
        self.judge_unforced(certname, force, Some(lock), now)
    }

    /// [`Authority::refuse_unforced`], the fleet's lock taken under `lock` when given.
    fn judge_unforced(
        &self,
        certname: &str,
        force: bool,
        lock: Option<&WriteLock>,
        now: OffsetDateTime,
    ) -> Result<Option<AdminHold<'_>>, Error> {
        if force {
            return Ok(None);
        }
        let refused = |why| Err(Error::NeedsForce { certname: certname.to_string(), why });
        // `DIR/server/server_crt.pem` read once for both checks.
        let own = self.own_service_certname();
        if let Some(whose) = self.service_certname_of(certname, own.as_deref().ok())? {
            return refused(NeedsForce::Service { whose });
        }
        let Some((rec, pem)) = self.certificate(certname)? else { return Ok(None) };
        if let Some(why) = own.err().and_then(|why| self.maybe_own_service(certname, &pem, why)) {
            return refused(why);
        }
        if !valid_at(rec.state, &rec.not_after, now) || !self.is_admin_certificate(&pem) {
            return Ok(None);
        }
        let hold = match lock {
            Some(lock) => self.store.hold_admin_revocations(lock)?,
            None => None,
        };
        if self.another_valid_administrator(&rec.serial, now)? {
            // The tests' pause between the guard's count and the revocation.
            crate::store::pause_point("revoke:admin-counted");
            return Ok(hold);
        }
        refused(NeedsForce::LastAdministrator { serial: rec.serial })
    }

    /// [`Authority::refuse_unforced_held`] for `vouch revoke --serial`: the serial's certname,
    /// where the serial is that certname's current, unrevoked certificate (an older one of a
    /// service or an administrator is no longer presented). A serial not found is left to
    /// the revocation's own errors.
    pub(super) fn refuse_unforced_serial(
        &self,
        lock: &WriteLock,
        given: &str,
        force: bool,
        now: OffsetDateTime,
    ) -> Result<Option<AdminHold<'_>>, Error> {
        let Some(serial) = normal_serial(given).filter(|_| !force) else { return Ok(None) };
        for s in [serial.clone(), format!("00{serial}")] {
            // A record that does not read is left to the revocation (its inventory line);
            // any other error stops here.
            let rec = match self.store.record(&s) {
                Ok(Some(rec)) => rec,
                Ok(None) | Err(crate::store::StoreError::Corrupt { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            if rec.state == State::Issued
                && self.certificate(&rec.certname)?.is_some_and(|(cur, _)| cur.serial == rec.serial)
            {
                return self.refuse_unforced_held(lock, &rec.certname, force, now);
            }
        }
        Ok(None)
    }

    /// Whether the store holds a valid administrator certificate besides `serial`: a walk
    /// over the store's current certificates ([`crate::store::Store::for_each_current`]: the
    /// LDAP store's is one paged search), stopped at the first.
    fn another_valid_administrator(&self, serial: &str, now: OffsetDateTime) -> Result<bool, Error> {
        let mut found = false;
        let mut failed = None;
        self.store.for_each_current(&mut |l, read| {
            if l.revoked || l.serial == serial {
                return ControlFlow::Continue(());
            }
            let c: Current = match read() {
                Ok(Some(c)) => c,
                Ok(None) => return ControlFlow::Continue(()),
                // Not known: the walk stops, and the command with it (fails closed).
                Err(e) => {
                    failed = Some(e);
                    return ControlFlow::Break(());
                }
            };
            let other = c.record.serial != serial && valid_at(c.record.state, &c.record.not_after, now);
            if other && self.is_admin_certificate(&c.pem) {
                found = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        })?;
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(found),
        }
    }
}

/// Issued and not expired at `now`.
fn valid_at(state: State, not_after: &str, now: OffsetDateTime) -> bool {
    state == State::Issued && crate::encoding::time::parse_rfc3339(not_after).ok().is_some_and(|t| t > now)
}
