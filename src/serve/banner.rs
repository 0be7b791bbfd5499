//! What `vouch serve` prints on stdout when it starts: the CA, its credentials, where it
//! listens, and what an agent's puppet.conf needs.

use super::setup::SetupReport;
use std::io::Write;
use std::net::SocketAddr;

pub(super) fn banner(r: &SetupReport, local: SocketAddr, metrics: Option<SocketAddr>) {
    let mut out = String::new();
    let dir = r.dir.display();
    if r.created_ca {
        out.push_str(&format!("vouch: created a new CA in {dir}\n"));
    } else {
        out.push_str(&format!("vouch: serving the CA in {dir}\n"));
    }
    for n in &r.notes {
        out.push_str(&format!("  {n}\n"));
    }
    out.push_str(&format!("  root CA fingerprint (SHA-256): {}\n", r.root_fingerprint));
    out.push_str(&format!("  policy:                        {}\n", r.policy.display()));
    if let Some((c, k)) = &r.conductor {
        out.push_str(&format!("  conductor credentials:         {} {}\n", c.display(), k.display()));
    }
    if let Some((c, k)) = &r.admin {
        out.push_str(&format!("  admin credentials:             {} {}\n", c.display(), k.display()));
    }
    out.push_str(&format!(
        "  service certificate:           {} ({})\n",
        r.server_cert.display(),
        r.server_names.join(", ")
    ));
    out.push_str(&format!("  listening on https://{local}/puppet-ca/v1\n"));
    if let Some(m) = metrics {
        out.push_str(&format!("  metrics on http://{m}/metrics\n"));
    }
    out.push_str(&agent_settings(r, local));
    // Not print!, which panics when stdout cannot be written.
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(out.as_bytes()).and_then(|()| stdout.flush());
}

/// What an agent's puppet.conf needs, for the banner. vouch is the agent's CA only (no
/// catalogs): `ca_server`/`ca_port` point at vouch, `server` stays the Puppet Server. The
/// certname is the one the conductor signed; the service's own names are reserved.
fn agent_settings(r: &SetupReport, local: SocketAddr) -> String {
    // Agents on this host reach a loopback listener as localhost; others by the certname.
    let host = if local.ip().is_loopback() && r.server_names.iter().any(|n| n == "localhost") {
        "localhost".to_string()
    } else {
        r.server_certname.clone()
    };
    let mut out = String::new();
    out.push_str("\nAn agent's puppet.conf needs (vouch is its CA only; catalogs come from your Puppet Server):\n");
    out.push_str("  [main]\n  certname = <the name the conductor signed>\n");
    out.push_str(&format!("  ca_server = {host}\n  ca_port = {}\n", local.port()));
    out.push_str(&format!("  ca_fingerprint = {}\n", r.bundle_fingerprint.replace(':', "")));
    out.push_str("  server = <your Puppet Server>\n");
    out.push_str(
        "certname: as in 'vouch conductor sign --certname NAME'; never this host's name when it is a name of\n\
         this service (the service certificate's names above are reserved: refused, 400)\n",
    );
    match r.fleet_masters {
        Some(n) => out.push_str(&format!(
            "ca_fingerprint: the SHA-256 of the fleet's CA bundle, which every master sends ({n} master CA(s) of the\n\
             shared store + root); it changes when a master joins or is retired: give new agents the value a\n\
             master prints then (agents bootstrapped before need nothing: docs/ldap.md, 'One fleet')\n"
        )),
        None => out.push_str(
            "ca_fingerprint: the SHA-256 of the CA bundle this service sends (master CA + root), which is why it\n\
             differs from the root CA fingerprint above\n",
        ),
    }
    out.push_str(
        "compile servers (a stock Puppet Server with its CA service disabled in services.d/ca.cfg): enrol each\n\
         with 'puppet ssl bootstrap' against this service (alt names such as dns_alt_names = puppet only if its\n\
         conductor's [[conductor]] scope lists it in servers and the names in dns_alt_names), keep its hostcrl\n\
         fresh with 'vouch crl --fetch --ca-url URL --cacert BUNDLE --out FILE' (a timer), and classify with\n\
         'vouch enc --ca-url URL --cacert BUNDLE': docs/compile-servers.md\n",
    );
    out.push_str("then: puppet ssl bootstrap (certificate only; puppet agent --test also needs the Puppet Server)\n");
    out
}
