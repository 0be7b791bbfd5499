//! Why `vouch import --puppet-cadir` refuses a Puppet CA directory ([`PuppetCaDefect`]): one
//! variant per defect, each with its code, words and hint beside it. Every refusal happens
//! before anything is written.

use vouch_derive::{Code, Hint, Message};

/// What is wrong with a Puppet (or OpenVox) CA directory ([`super::Error::PuppetImport`]).
#[derive(Debug, Clone, PartialEq, Eq, Code, Message, Hint)]
#[non_exhaustive]
pub enum PuppetCaDefect {
    /// `--puppet-cadir` itself is not a directory this user can read (missing, a file, a
    /// device, a loop of symbolic links).
    #[code = "puppet-ca-directory-unusable"]
    #[message = "the CA directory: {detail}"]
    #[hint = "give --puppet-cadir the CA directory itself (`puppet config print cadir --section server`, \
              usually /etc/puppetlabs/puppetserver/ca, or a whole copy of it), a directory this user may read"]
    Directory { detail: String },
    /// A file or directory every Puppet 7/8 CA directory holds is not there.
    #[code = "puppet-ca-incomplete"]
    #[message = "{file} is missing"]
    #[hint = "give --puppet-cadir the CA directory itself (`puppet config print cadir --section server`, \
              usually /etc/puppetlabs/puppetserver/ca), copied whole while Puppet Server is stopped: \
              ca_crt.pem, ca_key.pem, ca_crl.pem, inventory.txt, serial and signed/"]
    Missing { file: String },
    /// A file is there but does not read as what it must hold (cut short, not PEM, not UTF-8).
    #[code = "puppet-ca-unreadable"]
    #[message = "{file} cannot be read: {detail}"]
    #[hint = "the file is damaged or cut short: copy it again from the Puppet CA directory (or restore it from \
              a backup) while Puppet Server is stopped"]
    Unreadable { file: String, detail: String },
    /// A file this user may not open (EACCES): its content is not judged, it may be whole.
    #[code = "puppet-ca-permission-denied"]
    #[message = "{path} cannot be read: {detail}"]
    #[hint = "this user may not read that file (or a directory on its path): run the import as a user who may \
              read the whole Puppet CA directory (root, or the user Puppet Server runs as), or give that user \
              read access; keep the keys private to it (mode 0600)"]
    PermissionDenied { path: String, detail: String },
    /// `ca_crt.pem` holds one self-signed certificate whose key is not `ca_key.pem`: the root
    /// alone, without Puppet's CA certificate (the intermediate) before it.
    #[code = "puppet-ca-intermediate-missing"]
    #[message = "ca_crt.pem holds only the root ({root}): Puppet's CA certificate, whose key is ca_key.pem and \
                 which issued the agents' certificates, is missing before it"]
    #[hint = "copy ca_crt.pem whole from the Puppet CA directory (`puppetserver ca setup` writes Puppet's CA \
              certificate first, then the root); a file cut to its last certificate, or the root's copy \
              (root_crt.pem elsewhere), is not the CA's"]
    IntermediateMissing { root: String },
    /// `ca_crt.pem` is no chain vouch can take over: not one or two CA certificates, the
    /// intermediate not issued by the root, or not allowed to sign.
    #[code = "puppet-ca-chain-invalid"]
    #[message = "ca_crt.pem: {detail}"]
    #[hint = "ca_crt.pem must hold Puppet's CA certificate, then its root when there is one (the layout of \
              `puppetserver ca setup` and of Puppet Server's first start), each a CA certificate"]
    Chain { detail: String },
    /// A private key is not the key of the certificate it sits beside.
    #[code = "puppet-ca-key-mismatch"]
    #[message = "{key} is not the private key of {cert} (their public keys differ)"]
    #[hint = "the CA directory mixes files of two CAs: copy ca_key.pem (and root_key.pem) from the same CA \
              directory as ca_crt.pem"]
    KeyMismatch { key: String, cert: String },
    /// `ca_crl.pem` lacks the CA's CRL, or a CRL there is not signed by the CA it names.
    #[code = "puppet-ca-crl-invalid"]
    #[message = "ca_crl.pem: {detail}"]
    #[hint = "ca_crl.pem must hold the CRL of the CA in ca_crt.pem (then the root's), as Puppet Server writes \
              it: copy it again from the Puppet CA directory"]
    Crl { detail: String },
    /// A certificate in `signed/` is not this CA's, or is not the certname its file names.
    #[code = "puppet-ca-signed-invalid"]
    #[message = "signed/{file}: {detail}"]
    #[hint = "every signed/NAME.pem must be the certificate the CA in ca_crt.pem issued to NAME: remove a file \
              that does not belong there (or restore the directory) and import again"]
    Signed { file: String, detail: String },
    /// `inventory.txt` disagrees with `signed/`: a certificate it does not list, or lists under
    /// another name or serial, or a line that is not Puppet's.
    #[code = "puppet-ca-inventory-disagrees"]
    #[message = "inventory.txt disagrees with signed/: {detail}"]
    #[hint = "Puppet Server lists every certificate it signs in inventory.txt (0xSERIAL NOTBEFORE NOTAFTER \
              /CN=NAME); a directory whose inventory lost lines or was edited is not one to take over as it \
              is: restore inventory.txt from a backup or copy the directory again"]
    Inventory { detail: String },
    /// `serial` is not above every serial the CA issued (one that is no serial at all is [`Self::Unreadable`]).
    #[code = "puppet-ca-serial-behind"]
    #[message = "serial: {detail}"]
    #[hint = "the serial file holds the next serial Puppet Server would give, in hexadecimal, above every serial \
              in inventory.txt and signed/: restore it from a backup or copy the directory again"]
    Serial { detail: String },
}
