//! Reading a command's input (a file, stdin) within its kind's limit, a failure as a command
//! error naming what could not be read.

use super::Error;
use crate::files::input::{read_bounded, read_path, Kind};
use std::path::Path;

/// [`read_path`], its failure as a command error naming the file.
pub fn read_input(path: &Path, kind: Kind) -> Result<Vec<u8>, Error> {
    read_path(path, kind).map_err(|source| Error::Io { path: path.to_path_buf(), op: "read", source })
}

/// Standard input up to the kind's limit.
pub fn read_stdin(kind: Kind) -> Result<Vec<u8>, Error> {
    read_bounded(std::io::stdin().lock(), kind).map_err(|source| Error::Io { path: "stdin".into(), op: "read", source })
}
