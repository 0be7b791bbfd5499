//! The file store's own layout, as `vouch store verify` checks it (with the lock held, after
//! recovery): no operation marker left under `pending/`, every inventory line whole, every
//! record under `serials/` whole JSON and settled (no intent), every issued or revoked
//! record in the inventory, never two unexpired certificates of one certname that are not
//! revoked, and no junk.

use super::super::verify::Finding;
use super::super::{CertRecord, State, StoreError};
use super::{io_err, FileStore};
use std::collections::{HashMap, HashSet};

impl FileStore {
    pub(super) fn check_files(&self, now: time::OffsetDateTime, f: &mut dyn FnMut(Finding)) -> Result<(), StoreError> {
        let pending = self.p("pending");
        let dir = crate::files::durable::NoFollowDir::open(&pending).map_err(io_err(&pending, "open"))?;
        for name in dir.names().map_err(io_err(&pending, "read directory"))? {
            f(Finding::OperationLeftHalfDone { path: dir.path_of(&name).display().to_string() });
        }

        // The inventory's lines, read as written (Store::inventory leaves a damaged line out).
        let path = self.p("inventory.txt");
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(StoreError::Io { path, op: "read", source: e }),
        };
        let mut inventory = HashSet::new();
        let mut inventory_names: HashSet<Vec<u8>> = HashSet::new();
        for (i, line) in text.split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let fields: Vec<&[u8]> = line.split(|b| *b == b' ').collect();
            let whole = matches!(fields.as_slice(), [s, _, _, cn] if s.starts_with(b"0x") && cn.starts_with(b"/CN="));
            if let (true, Some(cn)) = (whole, fields.get(3)) {
                inventory_names.insert(cn.get(4..).unwrap_or_default().to_vec());
            }
            match fields.first().filter(|_| whole).and_then(|s| std::str::from_utf8(s).ok()) {
                Some(serial) => {
                    inventory.insert(serial.trim_start_matches("0x").to_string());
                }
                None => f(Finding::InventoryLineDamaged {
                    line: i + 1,
                    text: String::from_utf8_lossy(line.get(..200).unwrap_or(line)).into_owned(),
                }),
            }
        }

        // Every certificate file names a certname the inventory knows (the listing, and so the
        // checks over the trait, start from the inventory: a file it lacks is seen only here).
        let signed = self.p("signed");
        let dir = crate::files::durable::NoFollowDir::open(&signed).map_err(io_err(&signed, "open"))?;
        for name in dir.names().map_err(io_err(&signed, "read directory"))? {
            let Some(certname) = name.to_str().and_then(|n| n.strip_suffix(".pem")) else { continue };
            if crate::decision::check_certname(certname).is_err() || inventory_names.contains(certname.as_bytes()) {
                continue; // junk (the scan below names it), or listed
            }
            let path = dir.path_of(&name);
            let serial = std::fs::read_to_string(&path)
                .ok()
                .and_then(|pem| Self::serial_of_pem(&pem))
                .unwrap_or_else(|| "(unreadable)".into());
            f(Finding::NotInInventory { certname: certname.to_string(), serial });
        }
        drop(inventory_names);

        // Every record: one shard directory at a time.
        let mut valid: HashMap<String, Vec<String>> = HashMap::new();
        let serials = self.p("serials");
        let shards = crate::files::durable::NoFollowDir::open(&serials).map_err(io_err(&serials, "open"))?;
        for shard in shards.names().map_err(io_err(&serials, "read directory"))? {
            let shard_path = shards.path_of(&shard);
            let Ok(dir) = crate::files::durable::NoFollowDir::open(&shard_path) else {
                f(Finding::RecordDamaged {
                    path: shard_path.display().to_string(),
                    detail: "not a directory vouch can read (a shard is a real directory)".into(),
                });
                continue;
            };
            for name in dir.names().map_err(io_err(&shard_path, "read directory"))? {
                let path = dir.path_of(&name);
                if path.extension().and_then(|e| e.to_str()) != Some("json") {
                    continue; // a temporary file a killed writer left: never read as a record
                }
                let rec = match Self::read_json::<CertRecord>(&path) {
                    Ok(Some(r)) => r,
                    Ok(None) => continue,
                    Err(e) => {
                        f(Finding::RecordDamaged { path: path.display().to_string(), detail: e.to_string() });
                        continue;
                    }
                };
                if path.file_stem().and_then(|s| s.to_str()) != Some(rec.serial.as_str()) {
                    f(Finding::RecordDamaged {
                        path: path.display().to_string(),
                        detail: format!("it is the record of serial {}", rec.serial),
                    });
                    continue;
                }
                match rec.state {
                    State::Intent => f(Finding::IntentLeft { serial: rec.serial, certname: rec.certname }),
                    State::Abandoned => {}
                    State::Issued | State::Revoked => {
                        if !inventory.contains(&rec.serial) {
                            f(Finding::RecordNotInInventory {
                                serial: rec.serial.clone(),
                                certname: rec.certname.clone(),
                            });
                        }
                        if rec.state == State::Issued && unexpired(&rec.not_after, now) {
                            valid.entry(rec.certname).or_default().push(rec.serial);
                        }
                    }
                }
            }
        }
        let mut twice: Vec<(String, Vec<String>)> = valid.into_iter().filter(|(_, s)| s.len() > 1).collect();
        twice.sort();
        for (certname, mut serials) in twice {
            serials.sort();
            f(Finding::TwoValidCertificates { certname, serials });
        }

        super::super::junk::scan(&self.root, &mut |j| {
            f(Finding::Junk { name: j.name, kind: j.kind, detail: j.detail });
            Ok(())
        })
    }
}

/// Whether the RFC 3339 time `not_after` is after `now`; a time that does not parse counts
/// as unexpired (the stricter reading for this check).
fn unexpired(not_after: &str, now: time::OffsetDateTime) -> bool {
    crate::encoding::time::parse_rfc3339(not_after).map_or(true, |t| t > now)
}
