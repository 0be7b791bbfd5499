//! A command given what it cannot take, where the plain reading would mislead
//! ([`Mistake`]): `vouch import` with a shared store, `ca init` with its root's certificate
//! and key given the wrong way round, `vouch migrate` (or `--store`) beside a running `vouch serve`,
//! `vouch migrate` towards an LDAP server it cannot reach. One variant each, words and hint beside it.

use std::path::PathBuf;
use vouch_derive::{Hint, Message};

/// What the command was given by mistake ([`super::Error::Mistake`]); nothing was written.
#[derive(Debug, Message, Hint)]
#[non_exhaustive]
pub enum Mistake {
    /// `vouch import --puppet-cadir` with `--store ldap://…` (or `VOUCH_STORE`): an import
    /// writes a file store; the shared store is filled from one by `vouch migrate`.
    #[message = "vouch import writes the data directory's file store, not the shared store {url}; nothing was \
                 written"]
    #[hint = "two steps: import into the data directory's file store (the same command without --store and \
              with VOUCH_STORE unset), then copy it into the shared store with `vouch --dir DIR migrate --to \
              URL` (docs/ldap.md, migration)"]
    ImportIntoSharedStore { url: String },
    /// `ca init --root-cert KEY --root-key CERT`: the two files given the wrong way round.
    #[message("--root-cert {} holds a private key and --root-key {} a certificate: the two are swapped; nothing \
               was written", cert.display(), key.display())]
    #[hint = "give them the other way round: --root-cert ROOT_DIR/ca/root_crt.pem --root-key \
              ROOT_DIR/ca/root_key.pem"]
    RootFilesSwapped { cert: PathBuf, key: PathBuf },
    /// `ca init --root-cert FILE` where FILE holds a private key (and no certificate).
    #[message("--root-cert {} holds a private key, not the root's certificate; nothing was written", cert.display())]
    #[hint = "give --root-cert the root's certificate (ROOT_DIR/ca/root_crt.pem) and --root-key its private key \
              (ROOT_DIR/ca/root_key.pem)"]
    RootCertIsKey { cert: PathBuf },
    /// `ca init --root-key FILE` where FILE holds a certificate (and no private key).
    #[message("--root-key {} holds a certificate, not the root's private key; nothing was written", key.display())]
    #[hint = "give --root-key the root's private key (ROOT_DIR/ca/root_key.pem) and --root-cert its certificate \
              (ROOT_DIR/ca/root_crt.pem)"]
    RootKeyIsCert { key: PathBuf },
    /// `vouch template uses` on a CA whose policy keeps no replay journal: no template's
    /// uses are counted there (and its nodes' template attributes are refused).
    #[message = "this CA keeps no replay journal (replay.enabled = false in its policy): no template's uses are \
                 counted, and a template's attributes are refused"]
    #[hint = "templates need the replay journal: remove `enabled = false` from [replay] in policy.toml (or give \
              --store for the fleet's shared store)"]
    TemplateUsesWithoutJournal,
    /// `vouch migrate` while a `vouch serve` runs on the data directory: what it grants during
    /// or after the copy (a certificate, a template's use) would stay in the file store only,
    /// and be granted again by the masters on the shared store.
    #[message("{who} is running on {} ({holder}): vouch migrate copies a file store nothing else writes; \
               nothing was copied", dir.display())]
    #[hint = "stop that vouch serve (and the Puppet Server hooks that use this directory's journal), run vouch \
              migrate, then start every master with --store URL (docs/ldap.md, migration)"]
    MigrateWhileServing { dir: PathBuf, holder: String, who: super::ServingHolder },
    /// A command given `--store URL` on a data directory whose `vouch serve` runs on its file
    /// store (the directory not marked yet): opened, the shared store would register the
    /// directory's CA in the fleet and mark its file store retired under that serve, which
    /// then fails every vouched request.
    #[message("{who} is running on {} on its file store ({holder}): opened on the shared store {to}, this \
               command would join its CA to the fleet and retire the file store that serve writes (it would \
               then fail every vouched request); nothing was read or written", dir.display())]
    #[hint = "stop that vouch serve first, or move the directory to the shared store with `vouch --dir DIR \
              migrate --to URL` (docs/ldap.md, migration) and start it again with --store URL; then run this \
              command again (a vouch migrate holding the directory: wait for it to end)"]
    SharedStoreBesideServe { dir: PathBuf, to: String, holder: String, who: super::ServingHolder },
    /// `vouch migrate --to URL` where no LDAP server answers (or it answered busy): said of
    /// migrate, whose re-run resumes the copy (exit 75, as the store's unavailability).
    #[message = "vouch migrate cannot reach the LDAP store {url}: {detail}"]
    #[hint = "check --to (its host and port, ldap:// or ldaps:// with --ldap-ca, or ldapi://) and that the \
              LDAP server runs and answers there; then run the same vouch migrate again: it copies what is \
              missing and keeps what is already there"]
    MigrateTargetUnavailable { url: String, detail: String },
}
