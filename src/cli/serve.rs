//! `vouch serve`.

use super::args::ServeArgs;
use super::{dir, Cli, EXIT_OK};
use crate::error::Error;

pub(super) fn serve(cli: &Cli, a: &ServeArgs) -> Result<i32, Error> {
    if cli.now.is_some() {
        return Err(Error::Usage { detail: "vouch serve runs on the clock; --now is not accepted".into() });
    }
    // Each limit was range-checked by clap (at least 1; the upper bounds above).
    let size = |v: u64, flag: &str| {
        usize::try_from(v)
            .map_err(|_| Error::Usage { detail: format!("{flag} {v} is larger than this machine can count") })
    };
    let mut opts = crate::serve::ServeOptions::new(dir(cli)?.dir);
    opts.listen = a.listen;
    opts.store = cli.store_url();
    opts.server_names = a.server_names.clone();
    opts.key_type = a.key_type.into();
    opts.service_key_type = a.service_key_type.map(Into::into);
    opts.max_body = size(a.max_body, "--max-body")?;
    opts.header_timeout = std::time::Duration::from_secs(a.header_timeout);
    opts.body_timeout = std::time::Duration::from_secs(a.body_timeout);
    opts.handshake_timeout = opts.body_timeout;
    opts.max_connections = size(a.max_connections, "--max-connections")?;
    opts.max_per_peer = size(a.max_connections_per_address, "--max-connections-per-address")?;
    opts.connection_lifetime = std::time::Duration::from_secs(a.connection_lifetime);
    opts.metrics_listen = a.metrics_listen;
    opts.threads = match a.threads {
        Some(t) => size(t, "--threads")?,
        None => 0,
    };
    crate::serve::run(opts)?;
    Ok(EXIT_OK)
}
