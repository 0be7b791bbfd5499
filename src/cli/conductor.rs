//! `vouch conductor new`, `vouch conductor sign` and `vouch conductor revoke`.

use super::args::{ConductorSignArgs, FormatArg, KeyTypeArg};
use super::output::{note, preflight, say, write_out, write_pair, Replace};
use super::{dir, find_policy, now, read_file, Cli, EXIT_OK};
use crate::encoding::oids;
use crate::error::Error;
use crate::issuance::bootstrap::{self, ConductorSpec};
use crate::policy::{self, Policy};
use crate::vouching::attrs::{self, CsrAttributes};
use crate::vouching::classification::Classification;
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

pub(super) fn new(
    cli: &Cli,
    name: &String,
    cert_out: &Path,
    key_out: &Path,
    key_type: &KeyTypeArg,
    days: &u32,
) -> Result<i32, Error> {
    bootstrap::check_conductor_name(name)?;
    let d = dir(cli)?;
    // The data directory of a master that moved to a shared store is refused without
    // --store, as by every command that opens its CA: nothing is issued or recorded there.
    if cli.store_url().is_files() {
        d.refuse_retired_file_store()?;
    }
    preflight(&[(cert_out, Replace::Never), (key_out, Replace::Never)])?;
    let spec = ConductorSpec { name, key_type: (*key_type).into(), days: *days };
    let c = bootstrap::issue_conductor(&d, &spec, now(cli)?)?;
    // A conductor certificate is kept nowhere else: unwritten, it is simply lost.
    write_pair(key_out, &c.key_pem, cert_out, &c.cert_pem)?;
    if c.capped {
        note(&format!(
            "vouch: note: --days {days} reaches past the root CA's notAfter; the certificate ends with it, {}",
            crate::encoding::time::format_rfc3339(c.not_after)
        ));
    }
    sayln!("Conductor {name}: certificate {} key {}", cert_out.display(), key_out.display())?;
    sayln!(
        "Valid until {}; fingerprint (SHA-256): {}",
        crate::encoding::time::format_rfc3339(c.not_after),
        c.fingerprint
    )?;
    Ok(EXIT_OK)
}

/// `vouch conductor revoke`: the conductor on the root's CRL; then how many node
/// certificates it vouched for are current, and how to list them (never revoked here).
pub(super) fn revoke(cli: &Cli, cert: Option<&Path>, serial: Option<&str>, reason: &str) -> Result<i32, Error> {
    let reason = super::certs::canonical_reason(reason)?;
    let der = cert.map(read_conductor_der).transpose()?;
    let auth = crate::authority::Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    let now = now(cli)?;
    let target = crate::authority::RootTarget { cert: cert.zip(der.as_deref()), serial };
    let r = auth.revoke_by_root(&target, reason, now)?;
    match &r.before {
        Some(b) => say_done!(
            "{} (serial {}) was already revoked on the root CRL, at {} ({}): nothing changed; {} lists it",
            r.what,
            r.serial,
            b.time,
            b.reason,
            r.crl.display()
        )?,
        None => say_done!(
            "revoked {} (serial {}, {}): the root CRL {} lists it; this CA refuses what it vouches for from now on",
            r.what,
            r.serial,
            r.reason,
            r.crl.display()
        )?,
    }
    // The nodes it vouched for: counted, listed by command, never revoked here. The revocation
    // above is done whatever this walk meets.
    let at_dir = cli.dir.as_ref().map(|d| format!(" --dir {}", d.display())).unwrap_or_default();
    say_vouched_nodes(&auth, &r.serial, r.fingerprint.as_deref(), now, &at_dir)?;
    if auth.store.shares_root_crl() {
        let (published, number) = auth.publish_root_crl().map_err(|error| Error::Partial {
            done: format!(
                "{} (serial {}) is revoked here: the root CRL {} lists it, but it is not in the shared store yet \
                 (`vouch{at_dir} conductor publish-crl`, with the same --store, publishes it once that is fixed)",
                r.what,
                r.serial,
                r.crl.display()
            ),
            error: Box::new(error),
        })?;
        say_published(&auth, published, number)?;
        sayln!(
            "Masters on a file store refuse it once they hold this root CRL: copy {} to their DIR/ca/root_crl.pem \
             (or list a copy in conductors.crls of any other CA's policy).",
            r.crl.display()
        )?;
    } else {
        sayln!(
            "Masters without the root key refuse it once they hold this root CRL: with the fleet's shared store, \
             `vouch --store ldap://... conductor publish-crl` publishes it for them; else copy {} to their \
             DIR/ca/root_crl.pem (or list a copy in conductors.crls of any other CA's policy).",
            r.crl.display()
        )?;
    }
    Ok(EXIT_OK)
}

/// The conductor's certificate at `path`, DER (read as DER when it starts as one, else from PEM).
fn read_conductor_der(path: &Path) -> Result<Vec<u8>, Error> {
    let bytes = read_file(path, crate::files::input::Kind::Cert)?;
    Ok(if bytes.first() == Some(&0x30) {
        bytes
    } else {
        crate::encoding::pem::find(&bytes, &["CERTIFICATE"])
            .map(|(_, d)| d)
            .map_err(|e| Error::Cert { path: path.to_path_buf(), detail: e.to_string() })?
    })
}

/// How many current node certificates the revoked conductor vouched for, and how to list and
/// revoke them (a count that fails is a warning: the revocation is done).
fn say_vouched_nodes(
    auth: &crate::authority::Authority,
    serial: &str,
    fingerprint: Option<&str>,
    now: OffsetDateTime,
    at_dir: &str,
) -> Result<(), Error> {
    match auth.vouched_by(serial, fingerprint, now) {
        Ok(v) => {
            let fingerprint =
                fingerprint.map(str::to_string).or_else(|| v.conductor.as_ref().map(|(_, fp)| fp.clone()));
            if v.current == 0 {
                sayln!("No current node certificate names it as the conductor that vouched for it.")?;
            } else {
                sayln!(
                    "{} current node certificate{} vouched for by it stay{} valid (not revoked by this command):",
                    v.current,
                    if v.current == 1 { "" } else { "s" },
                    if v.current == 1 { "s" } else { "" }
                )?;
                if let Some(fp) = fingerprint {
                    sayln!("  list them:   vouch{at_dir} list --all --conductor {fp}")?;
                }
                sayln!("  revoke each: vouch{at_dir} revoke CERTNAME --reason key-compromise")?;
            }
        }
        Err(e) => note(&format!("vouch: warning: the node certificates it vouched for could not be counted: {e}")),
    }
    Ok(())
}

/// `vouch conductor publish-crl`: the root CRL into the shared store.
pub(super) fn publish_crl(cli: &Cli) -> Result<i32, Error> {
    let auth = crate::authority::Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    let (published, number) = auth.publish_root_crl()?;
    say_published(&auth, published, number)?;
    Ok(EXIT_OK)
}

fn say_published(
    auth: &crate::authority::Authority,
    published: crate::store::Published,
    number: u128,
) -> Result<(), Error> {
    use crate::store::Published;
    let store = auth.store.describe();
    match published {
        Published::Stored => say_done!(
            "published the root CRL (number {number}) in {store}: every master sharing it takes it at its next \
             command or maintenance run"
        ),
        Published::Same => say_done!("{store} holds this root CRL (number {number}) already: nothing changed"),
        Published::Kept => say_done!(
            "{store} holds a root CRL of this root numbered as high or higher than this one ({number}): it stays, \
             nothing changed"
        ),
        Published::NotShared => Err(Error::RootCrlNotShared { store }),
    }
}

pub(super) fn sign(cli: &Cli, a: &ConductorSignArgs) -> Result<i32, Error> {
    preflight(&[(a.out.as_deref().unwrap_or(Path::new("-")), Replace::Yes)])?;
    let bootstrap::CertAndKey { cert_der, key } = bootstrap::load_cert_and_key(&a.cert, &a.key)?;
    let classification = read_classification(&a.classification)?;
    let now = now(cli)?;
    let expiry = attributes_expiry(a, now)?;
    check_conductor_eku(&cert_der, &a.cert)?;
    let vouched = if a.template {
        super::template::sign_template(cli, a, &cert_der, &key, &classification, expiry, now)?
    } else {
        let certname = bound_certname(a)?;
        attrs::vouch(&cert_der, &key, &classification, expiry, a.cert_encoding.into(), certname.as_deref())
            .map_err(|detail| Error::Key { path: a.key.clone(), detail })?
    };
    let mirror = mirror_oid(a)?;
    let mut out = CsrAttributes::from_vouched(&vouched, mirror.as_deref());
    // The signed trusted facts (pp_role, …) requested as extensions too, as Puppet agents
    // request them: Puppet Server as the CA (hook mode) copies requests into the certificate,
    // and vouch allows each only with its signed value.
    let trusted = crate::vouching::classification::trusted::trusted_facts(&classification.value)
        .map_err(|e| Error::Usage { detail: e.to_string() })?;
    for fact in trusted {
        out.extension_requests.insert(crate::encoding::oids::dotted(&fact.oid), fact.value);
    }
    let mut text = attrs::render(&out, a.format.into()).map_err(|detail| Error::Usage { detail })?;
    if let (Some(binding), FormatArg::CloudConfig) = (&a.identity_binding, a.format) {
        // Bound: the node adds its identity document before its agent starts.
        let template = crate::identity::Binding::parse(binding).map_err(|r| Error::Usage { detail: r.to_string() })?;
        text = crate::identity::cloud_init::bound_cloud_config(&text, template.template);
    }
    write_out(a.out.as_deref(), &text, 0o600)?;
    if !a.template {
        warn_if_policy_refuses(cli, expiry, now);
    }
    Ok(EXIT_OK)
}

/// The classification YAML from `--classification FILE` (`-`: stdin).
fn read_classification(arg: &str) -> Result<Classification, Error> {
    let (source, yaml) = if arg == "-" {
        let bytes = crate::error::read_stdin(crate::files::input::Kind::Classification)?;
        let s = String::from_utf8(bytes).map_err(|_| Error::Classification {
            source: "(stdin)".into(),
            error: crate::vouching::classification::ClassificationError::NotUtf8,
        })?;
        ("(stdin)".to_string(), s)
    } else {
        let p = PathBuf::from(arg);
        let bytes = read_file(&p, crate::files::input::Kind::Classification)?;
        let s = String::from_utf8(bytes).map_err(|_| Error::Classification {
            source: arg.to_string(),
            error: crate::vouching::classification::ClassificationError::NotUtf8,
        })?;
        (arg.to_string(), s)
    };
    Classification::from_yaml(&yaml, crate::vouching::classification::DEFAULT_MAX_BYTES)
        .map_err(|error| Error::Classification { source, error })
}

/// When the attributes expire: exactly one of `--expires-in` (from `now`) and `--expires`
/// (after `now`).
fn attributes_expiry(a: &ConductorSignArgs, now: OffsetDateTime) -> Result<OffsetDateTime, Error> {
    match (&a.expires_in, &a.expires) {
        (Some(text), None) => {
            let d = policy::parse_duration(text).filter(|d| d.as_secs() > 0).ok_or_else(|| Error::Expiry {
                detail: format!("--expires-in {}", policy::duration_problem(text, "90s, 30m, 2h or 1d")),
            })?;
            time::Duration::try_from(d)
                .ok()
                .and_then(|d| now.checked_add(d))
                .ok_or_else(|| Error::Expiry { detail: format!("--expires-in {text} reaches past the year 9999") })
        }
        (None, Some(t)) => {
            let t = crate::encoding::time::parse_rfc3339(t)
                .map_err(|e| Error::Expiry { detail: format!("{t:?} is not RFC 3339: {e}") })?;
            if t <= now {
                return Err(Error::Expiry {
                    detail: format!("{} is already past", crate::encoding::time::format_rfc3339(t)),
                });
            }
            Ok(t)
        }
        _ => Err(Error::Expiry { detail: "give exactly one of --expires-in and --expires".into() }),
    }
}

/// Refuse early what the CA would refuse: a certificate without the conductor EKU.
fn check_conductor_eku(cert_der: &[u8], path: &Path) -> Result<(), Error> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der)
        .map_err(|e| Error::Cert { path: path.to_path_buf(), detail: e.to_string() })?;
    let has_eku = matches!(cert.extended_key_usage(), Ok(Some(eku))
        if eku.value.other.iter().any(|o| o.iter().is_some_and(|arcs| arcs.eq(oids::EKU_CONDUCTOR.iter().copied()))));
    if !has_eku {
        return Err(Error::Cert {
            path: path.to_path_buf(),
            detail: "it lacks the extended key usage 1.3.6.1.4.1.34380.2.0; a CA would refuse what it signs".into(),
        });
    }
    Ok(())
}

/// The certname the signature binds (version 2), lowercased and checked; none for version 1.
fn bound_certname(a: &ConductorSignArgs) -> Result<Option<String>, Error> {
    match (a.version, &a.certname) {
        (Some(1), Some(_)) => Err(Error::Usage {
            detail: "signature version 1 cannot bind a certname; drop --version 1 to sign version 2".into(),
        }),
        (Some(2), None) => {
            Err(Error::Usage { detail: "signature version 2 binds a certname: give --certname NAME".into() })
        }
        (_, Some(given)) => {
            let c = given.to_lowercase();
            if c != *given {
                note(&format!(
                    "vouch: note: --certname {given:?} is signed as {c:?}: Puppet's certnames are lower case, \
                     so the instance's agent must use {c:?} as its certname"
                ));
            }
            crate::decision::check_certname(&c)
                .map_err(|p| Error::Usage { detail: format!("--certname {c:?} is not a valid certname: {p}") })?;
            if crate::decision::is_reserved_certname(&c) {
                return Err(Error::Usage {
                    detail: format!("--certname {c:?} is reserved by Puppet for the CA itself"),
                });
            }
            Ok(Some(c))
        }
        (_, None) => Ok(None),
    }
}

/// The OID the classification is mirrored under (`--mirror-oid`, under pp_reg or
/// pp_priv), or none with `--no-mirror`.
fn mirror_oid(a: &ConductorSignArgs) -> Result<Option<Vec<u64>>, Error> {
    if a.no_mirror {
        return Ok(None);
    }
    let o = oids::parse(&a.mirror_oid)
        .filter(|o| oids::is_under(o, oids::PP_REG) || oids::is_under(o, oids::PP_PRIV))
        .ok_or_else(|| Error::Usage {
            detail: format!("--mirror-oid {:?} must be an OID under 1.3.6.1.4.1.34380.1.1 or .1.2", a.mirror_oid),
        })?;
    Ok(Some(o))
}

/// The default of a policy's `attributes.max_lifetime` (src/policy.rs).
pub(super) const DEFAULT_MAX_LIFETIME: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// The CA decides, not the conductor; but an expiry further ahead than the policy at hand
/// (--dir's, VOUCH_POLICY, /etc/vouch; else vouch's default) allows is a mistake worth a
/// warning now rather than a refusal at the node's first boot.
pub(super) fn warn_if_policy_refuses(cli: &Cli, expiry: OffsetDateTime, now: OffsetDateTime) {
    let (max, whose) = match find_policy(None, cli.dir.as_deref()) {
        Ok(path) => match Policy::load(&path) {
            Ok(p) => (p.max_attribute_lifetime, format!("the policy {}", path.display())),
            Err(_) => return,
        },
        Err(_) => (DEFAULT_MAX_LIFETIME, "vouch's default policy".to_string()),
    };
    // The difference of two OffsetDateTimes cannot overflow (both lie within years -9999..=9999).
    #[allow(clippy::arithmetic_side_effects)]
    let ahead = expiry - now;
    if ahead > max {
        note(&format!(
            "vouch: warning: these attributes expire {} ({} from now), but {whose} refuses attributes \
             expiring more than {} ahead (attributes.max_lifetime): sign with a shorter --expires-in, \
             or raise that limit on the CA",
            crate::encoding::time::format_rfc3339(expiry),
            policy::format_duration_roughly(std::time::Duration::from_secs(
                u64::try_from(ahead.whole_seconds()).unwrap_or(0)
            )),
            policy::format_duration(max)
        ));
    }
}
