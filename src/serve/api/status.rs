//! `certificate_status/NAME` (GET, PUT, DELETE) and `certificate_statuses/any`: what an
//! administrator sees and does, as Puppet Server's JSON.

use super::{certname_ok, not_found, ApiRequest, ApiResponse, Event};
use crate::authority::Authority;
use crate::error::Error;
use crate::store::State;
use time::OffsetDateTime;

fn digest_hex(alg: &'static aws_lc_rs::digest::Algorithm, der: &[u8]) -> String {
    aws_lc_rs::digest::digest(alg, der).as_ref().iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

fn fingerprints(der: &[u8]) -> serde_json::Value {
    let sha256 = digest_hex(&aws_lc_rs::digest::SHA256, der);
    serde_json::json!({
        "SHA1": digest_hex(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, der),
        "SHA256": sha256,
        "SHA512": digest_hex(&aws_lc_rs::digest::SHA512, der),
        "default": sha256,
    })
}

fn status_of(auth: &Authority, name: &str) -> Result<Option<serde_json::Value>, Error> {
    // A current certificate first: a pending request (anyone can make one) never hides it.
    if let Some(v) = cert_status(auth, name)? {
        if v["state"] == "signed" {
            return Ok(Some(v));
        }
    }
    if let Some((req, pem)) = auth.request(name)? {
        let der = crate::encoding::pem::find(&pem, &["CERTIFICATE REQUEST"]).map(|(_, d)| d).unwrap_or_default();
        let fp = fingerprints(&der);
        // What the request asks for, as Puppet Server lists it (`puppetserver ca list` shows it).
        let sans = requested_subject_alt_names(&der);
        let dns: Vec<&String> = sans.iter().filter(|s| s.starts_with("DNS:")).collect();
        return Ok(Some(serde_json::json!({
            "name": name, "state": "requested",
            "fingerprint": fp["SHA256"], "fingerprints": fp,
            "dns_alt_names": dns, "subject_alt_names": sans, "authorization_extensions": {},
            "requested_at": req.time,
            "reasons": req.reasons,
        })));
    }
    cert_status(auth, name)
}

fn cert_status(auth: &Authority, name: &str) -> Result<Option<serde_json::Value>, Error> {
    let Some((rec, pem)) = auth.certificate(name)? else { return Ok(None) };
    Ok(cert_value(name, &rec, &pem))
}

/// A certificate's status as Puppet Server answers it; `None` for a record never issued.
fn cert_value(name: &str, rec: &crate::store::CertRecord, pem: &str) -> Option<serde_json::Value> {
    let der = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"]).map(|(_, d)| d).unwrap_or_default();
    let fp = fingerprints(&der);
    let mut sans = Vec::new();
    let mut not_before = None;
    let mut not_after = None;
    let mut auth_ext = serde_json::Map::new();
    if let Ok((_, cert)) = x509_parser::parse_x509_certificate(&der) {
        not_before = Some(crate::encoding::time::format_puppet(cert.validity().not_before.to_datetime()));
        not_after = Some(crate::encoding::time::format_puppet(cert.validity().not_after.to_datetime()));
        sans = subject_alt_names(&cert);
        auth_ext = authorization_extensions(&cert);
    }
    let serial_number = serial_number(&rec.serial);
    let dns: Vec<&String> = sans.iter().filter(|s| s.starts_with("DNS:")).collect();
    let state = match rec.state {
        State::Issued => "signed",
        State::Revoked => "revoked",
        // Never issued: nothing to show.
        State::Intent | State::Abandoned => return None,
    };
    Some(serde_json::json!({
        "name": name, "state": state,
        "fingerprint": fp["SHA256"], "fingerprints": fp,
        "dns_alt_names": dns, "subject_alt_names": sans,
        "authorization_extensions": auth_ext,
        "serial_number": serial_number, "serial": rec.serial,
        "not_before": not_before, "not_after": not_after,
        "conductor": rec.conductor, "attributes_expiry": rec.attributes_expiry,
    }))
}

/// The subject alternative names a pending request (DER) asks for, as [`subject_alt_names`]
/// lists a certificate's (an unreadable request lists none).
fn requested_subject_alt_names(der: &[u8]) -> Vec<String> {
    use x509_parser::prelude::FromDer;
    let Ok(csr) = crate::encoding::csr::parse(der) else { return Vec::new() };
    let mut sans = Vec::new();
    for ext in csr.extensions.iter().filter(|e| e.oid == crate::encoding::oids::SUBJECT_ALT_NAME) {
        if let Ok((_, san)) = x509_parser::extensions::SubjectAlternativeName::from_der(&ext.value) {
            list_general_names(&san.general_names, &mut sans);
        }
    }
    sans
}

/// The certificate's subject alternative names as Puppet lists them (`DNS:name`, `IP Address:ip`).
fn subject_alt_names(cert: &x509_parser::certificate::X509Certificate<'_>) -> Vec<String> {
    let mut sans = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        list_general_names(&san.value.general_names, &mut sans);
    }
    sans
}

fn list_general_names(names: &[x509_parser::extensions::GeneralName<'_>], sans: &mut Vec<String>) {
    {
        for n in names {
            match n {
                x509_parser::extensions::GeneralName::DNSName(d) => sans.push(format!("DNS:{d}")),
                x509_parser::extensions::GeneralName::IPAddress(ip) => {
                    let ip = match ip.len() {
                        4 => <[u8; 4]>::try_from(*ip).ok().map(|b| std::net::IpAddr::from(b).to_string()),
                        16 => <[u8; 16]>::try_from(*ip).ok().map(|b| std::net::IpAddr::from(b).to_string()),
                        _ => None,
                    };
                    if let Some(ip) = ip {
                        sans.push(format!("IP Address:{ip}"));
                    }
                }
                _ => {}
            }
        }
    }
}

/// The certificate's extensions under Puppet's `pp_auth` arc, by short name (else dotted OID).
fn authorization_extensions(
    cert: &x509_parser::certificate::X509Certificate<'_>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut auth_ext = serde_json::Map::new();
    for e in cert.extensions() {
        let arcs: Option<Vec<u64>> = e.oid.iter().map(|i| i.collect());
        if let Some(arcs) = arcs.filter(|a| crate::encoding::oids::is_under(a, crate::encoding::oids::PP_AUTH)) {
            let name = crate::encoding::oids::PUPPET_SHORT_NAMES
                .iter()
                .find(|(_, o)| *o == arcs.as_slice())
                .map(|(n, _)| n.to_string())
                .unwrap_or_else(|| arcs.iter().map(u64::to_string).collect::<Vec<_>>().join("."));
            let value = crate::encoding::der::Reader::new(e.value)
                .any()
                .ok()
                .map(|t| String::from_utf8_lossy(t.content).into_owned())
                .unwrap_or_default();
            auth_ext.insert(name, serde_json::Value::String(value));
        }
    }
    auth_ext
}

/// Puppet gives the serial as a JSON integer; vouch's serials are up to 128 bits, more
/// than a JSON integer carries safely, so larger ones come as a decimal string
/// (`serial` always has the hex form). (serde_json's json! panics on a u128.)
fn serial_number(serial_hex: &str) -> serde_json::Value {
    match u128::from_str_radix(serial_hex, 16) {
        Ok(n) => match u64::try_from(n) {
            Ok(small) => serde_json::Value::from(small),
            Err(_) => serde_json::Value::String(n.to_string()),
        },
        Err(_) => serde_json::Value::Null,
    }
}

pub(super) fn status_one(auth: &Authority, name: &str) -> Result<ApiResponse, Error> {
    if certname_ok(name).is_err() {
        return Ok(not_found("certificate_status", name));
    }
    Ok(match status_of(auth, name)? {
        Some(v) => ApiResponse::json(200, &v),
        None => not_found("certificate_status", name),
    })
}

/// The states `certificate_statuses` is asked for: every `state=` of the query (none: all).
/// Repeated, each is answered (`state=signed&state=revoked`: both); Puppet Server 7 answers
/// every status then, unfiltered, which a client asking for two states does not mean.
fn queried_states(query: &str) -> Result<Vec<&str>, ApiResponse> {
    let states: Vec<&str> = query.split('&').filter_map(|kv| kv.strip_prefix("state=")).collect();
    match states.iter().find(|s| !["requested", "signed", "revoked"].contains(s)) {
        Some(s) => Err(ApiResponse::text(400, format!("Invalid state {s:?}: one of requested, signed, revoked"))),
        None => Ok(states),
    }
}

pub(super) fn statuses(auth: &Authority, query: &str) -> Result<ApiResponse, Error> {
    let states = match queried_states(query) {
        Ok(states) => states,
        Err(response) => return Ok(response),
    };
    let asked = |s: &str| states.is_empty() || states.contains(&s);
    let wanted = |v: &serde_json::Value| v["state"].as_str().is_some_and(asked);
    let mut out = Vec::new();
    // A name listed twice (a request kept beside its certificate, as `on_existing =
    // "supersede"` keeps one) is answered once, as `status_of` answers it: the pending
    // requests first (each as `status_of` answers its name), then every other certname's
    // current certificate from one walk of the store (a read per certificate would cost the
    // LDAP store a round trip each).
    let mut seen = std::collections::HashSet::new();
    for entry in auth.list(false)? {
        if seen.insert(entry.name.clone()) {
            out.extend(status_of(auth, &entry.name)?.filter(wanted));
        }
    }
    if asked("signed") || asked("revoked") {
        auth.for_each_current(|l, read| {
            // Each listed name once, answered by that name (as `status_of` reads it), its
            // certificate read only when its listed state is wanted.
            let listed = if l.revoked { "revoked" } else { "signed" };
            if !asked(listed) || !seen.insert(l.certname.clone()) {
                return Ok(());
            }
            if let Some(c) = read()? {
                out.extend(cert_value(&l.certname, &c.record, &c.pem).filter(wanted));
            }
            Ok(())
        })?;
    }
    Ok(ApiResponse::json(200, &serde_json::Value::Array(out)))
}

pub(super) fn status_put(
    auth: &Authority,
    req: &ApiRequest,
    name: &str,
    who: &str,
    now: OffsetDateTime,
    events: &mut Vec<Event>,
) -> Result<ApiResponse, Error> {
    if let Err(resp) = certname_ok(name) {
        return Ok(resp);
    }
    let body = serde_json::from_slice::<serde_json::Value>(&req.body).unwrap_or_default();
    let Some(desired) = body.get("desired_state").and_then(|s| s.as_str()).map(str::to_string) else {
        return Ok(ApiResponse::text(
            400,
            "Bad Request: the body must be JSON like {\"desired_state\":\"signed\"} or {\"desired_state\":\"revoked\"}",
        ));
    };
    events.push(Event::Admin { client: who.to_string(), action: desired.clone(), certname: name.to_string() });
    match desired.as_str() {
        "signed" => match super::sign::cert_ttl(&body, name) {
            Ok(ttl) => super::sign::sign(auth, name, who, ttl, now, events),
            Err(resp) => Ok(resp),
        },
        "revoked" => {
            if let Some(resp) = unforced(auth, name, now)? {
                return Ok(resp);
            }
            revoke(auth, name, now)
        }
        other => {
            Ok(ApiResponse::text(400, format!("Bad Request: desired_state {other:?} is not one of: signed, revoked")))
        }
    }
}

/// `desired_state: revoked` of `name`'s certificate (answered as Puppet Server does).
fn revoke(auth: &Authority, name: &str, now: OffsetDateTime) -> Result<ApiResponse, Error> {
    match auth.revoke_guarded(name, "unspecified", false, false, now) {
        Ok(_) => Ok(ApiResponse::empty(204)),
        Err(e @ Error::NeedsForce { .. }) => Ok(never_forced(&e)),
        // Only a request: nothing to revoke (Puppet Server answers 409 too, and
        // `puppetserver ca clean` then deletes the request).
        Err(Error::NotFound { .. }) if auth.request(name)?.is_some() => Ok(ApiResponse::text(
            409,
            format!("Cannot revoke certificate for host {name} without a signed certificate"),
        )),
        Err(Error::NotFound { .. }) => Ok(not_found("certificate", name)),
        Err(e) => Err(e),
    }
}

/// A revocation `vouch revoke` refuses without `--force` (a master's service certname, the
/// store's last valid administrator certificate): refused here (409), as never forced over
/// the API.
fn unforced(auth: &Authority, name: &str, now: OffsetDateTime) -> Result<Option<ApiResponse>, Error> {
    match auth.refuse_unforced(name, false, now) {
        Ok(()) => Ok(None),
        Err(e @ Error::NeedsForce { .. }) => Ok(Some(never_forced(&e))),
        Err(e) => Err(e),
    }
}

/// The API's answer to a revocation that needs `--force` (409).
fn never_forced(e: &Error) -> ApiResponse {
    ApiResponse::text(
        409,
        format!("{e} (over this API a revocation is never forced: 'vouch revoke --force' on a master does it)"),
    )
}

pub(super) fn status_delete(
    auth: &Authority,
    name: &str,
    who: &str,
    now: OffsetDateTime,
    events: &mut Vec<Event>,
) -> Result<ApiResponse, Error> {
    if let Err(resp) = certname_ok(name) {
        return Ok(resp);
    }
    if auth.request(name)?.is_none() && auth.certificate(name)?.is_none() {
        return Ok(not_found("certificate_status", name));
    }
    if let Some(resp) = unforced(auth, name, now)? {
        return Ok(resp);
    }
    events.push(Event::Admin { client: who.to_string(), action: "clean".into(), certname: name.to_string() });
    match auth.revoke_guarded(name, "unspecified", true, false, now) {
        Err(e @ Error::NeedsForce { .. }) => return Ok(never_forced(&e)),
        other => other?,
    };
    Ok(ApiResponse::empty(204))
}
