//! Who holds a data directory's serving lock ([`ServingHolder`]), as the holder recorded it
//! in `DIR/serve.lock`: the words and the hint of a refusal to take it
//! ([`super::Error::ServeRunning`], [`super::Mistake`]).

use vouch_derive::{Hint, Message};

/// What holds a data directory's serving lock, as it recorded itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Message, Hint)]
#[non_exhaustive]
pub enum ServingHolder {
    /// `vouch serve`, for as long as it runs.
    #[message = "another vouch serve"]
    #[hint = "one vouch serve per data directory: a second one would issue its own service certificate and \
              revoke the running one's; stop the other first, or give this one another --dir (a further master: \
              'vouch ca init --root-cert … --root-key …', docs/operator-guide.md)"]
    Serve,
    /// `vouch migrate`, while it copies the file store into the shared store.
    #[message = "a vouch migrate"]
    #[hint = "vouch migrate holds the data directory while it copies its file store into the shared store: \
              wait for it to end, then start the master with --store URL, the store it names (docs/ldap.md, \
              migration)"]
    Migrate,
    /// A command opening the directory on a shared store, while it marks the directory's file
    /// store retired (it ends once the mark is written).
    #[message = "a vouch command opening it on a shared store"]
    #[hint = "that command marks the directory's file store retired in favour of the shared store and ends: \
              run this again with --store URL (or VOUCH_STORE) as that command has it"]
    SharedStoreOpen,
    /// No record that reads (removed, from an older vouch, damaged).
    #[message = "another vouch process (a vouch serve, or a vouch migrate)"]
    #[hint = "one process at a time holds a data directory to serve or migrate it: stop that vouch serve, or \
              wait for that vouch migrate to end (the holder above says which process it is)"]
    Unknown,
}
