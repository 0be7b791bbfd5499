//! What another master held past a command's bounded wait ([`Busy`]): nothing was changed,
//! and the same command a little later may succeed (exit 75; `vouch serve` answers 503). One
//! variant each, words and hint beside it.

use vouch_derive::{Hint, Message};

/// What a command waited for in vain ([`super::Error::Busy`]); nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, Message, Hint)]
#[non_exhaustive]
pub enum Busy {
    /// Another master revokes an administrator certificate: the fleet's lock on such
    /// revocations (docs/ldap.md, "Revoking an administrator") stayed its own past the wait.
    #[message = "another master is revoking an administrator certificate: the fleet's lock on revocations of \
                 administrator certificates is held by {holder} until {until}; nothing was revoked"]
    #[hint = "retry in a few seconds: the other revocation finishes, or the holder's time passes (a master killed \
              while it held the lock) and the next revocation takes the lock over; the guard then counts the \
              administrators that revocation left"]
    AdminRevocation { holder: String, until: String },
    /// This master's hold of that lock passed its time before its revocation was written, and
    /// another master took it over.
    #[message = "this master's hold of the fleet's lock on revocations of administrator certificates passed its \
                 time before the revocation was written, and {holder} took it over (until {until}); nothing was \
                 revoked"]
    #[hint = "retry: the administrators left are counted again under the lock; if it happens again, the store \
              answers slowly (the walk over the fleet's certificates took longer than the lock's time, or this \
              master was paused)"]
    AdminLockLost { holder: String, until: String },
    /// This master's confirm of that lock, just before its revocation, was answered more than
    /// half the lock's time after it was sent: another master could take the lock over before
    /// the revocation is written, so it is not.
    #[message = "this master's confirm of the fleet's lock on revocations of administrator certificates took \
                 {took_ms} ms, more than half the lock's time: nothing was revoked (another master could take the \
                 lock over before the revocation was written)"]
    #[hint = "retry: the administrators left are counted again under the lock; if it happens again, the LDAP \
              server answers slowly from this host (check its load and the network between them)"]
    AdminLockLate { took_ms: u64 },
}

impl Busy {
    /// The fleet's administrator-revocation lock, held by `holder` until `until`: another
    /// master's past the wait, or (`lost`) taken over from this one.
    pub fn of_admin_lock(holder: &str, until: &str, lost: bool) -> Busy {
        let (holder, until) = (holder.to_string(), until.to_string());
        if lost {
            Busy::AdminLockLost { holder, until }
        } else {
            Busy::AdminRevocation { holder, until }
        }
    }
}
