//! What issuing answers: [`IssueOutcome`] for a request, [`Stored`] for a certificate
//! stored under the store's lock (a renewal, a local certificate).

use crate::decision::Refused;
use crate::error::Error;
use crate::issuance::certificate::Issued;

/// The outcome of [`Authority::issue`].
///
/// [`Authority::issue`]: super::Authority::issue
#[derive(Debug)]
pub enum IssueOutcome {
    Issued(Issued),
    Refused(Refused),
}

/// A certificate stored by [`Authority::issue_locked`] (a renewal, a local certificate).
///
/// [`Authority::issue_locked`]: super::Authority::issue_locked
#[derive(Debug)]
pub struct Stored {
    pub issued: Issued,
    /// The superseded predecessor's serial, and why the CRL could not be written after its
    /// revocation (which IS stored): the CRL does not list it yet.
    pub superseded_crl: Option<(String, Error)>,
}
