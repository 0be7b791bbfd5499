#!/bin/bash
# Lays out a private Puppet Server 7.9 (Debian's puppetserver package) in DIR, listening on
# 127.0.0.1:PORT with TLS 1.2 only (TLS 1.3 stalls every agent bootstrap 30 s: see docs/operator-guide.md).
#
#   tests/support/puppetserver/setup.sh DIR PORT
#
# Then append a [server] section to DIR/etc/puppet.conf (autosign, node_terminus,
# external_nodes) and start it with `DIR/start.sh` (it execs java: its PID is the
# server's; SIGTERM stops it). Ready when DIR/log/puppetserver.log says
# "Puppet Server has successfully started". Used by tests/puppetserver.rs and
# examples/puppetserver_bench.sh.
set -euo pipefail
dir=${1:?usage: setup.sh DIR PORT}
port=${2:?usage: setup.sh DIR PORT}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
cp -r "$here/conf.d" "$here/services.d" "$here/logback.xml" "$here/request-logging.xml" "$here/start.sh" "$dir/"
chmod -R u+w "$dir"
for f in "$dir"/conf.d/* "$dir"/services.d/* "$dir"/logback.xml "$dir"/request-logging.xml "$dir"/start.sh; do
  sed -i "s#@SERVERDIR@#$dir#g; s#@PORT@#$port#g" "$f"
done
chmod +x "$dir/start.sh"
mkdir -p "$dir"/{etc/ssl,etc/puppetserver/ca,var,run,log,public,code/environments/production/manifests,code/environments/production/modules,gems}
# Debian's puppet does not derive ssldir, cadir, vardir... from --confdir: set every one.
cat > "$dir/etc/puppet.conf" <<CONF
[main]
certname = localhost
server = localhost
ssldir = $dir/etc/ssl
cadir = $dir/etc/puppetserver/ca
vardir = $dir/var
rundir = $dir/run
logdir = $dir/log
publicdir = $dir/public
codedir = $dir/code

CONF
echo 'node default { }' > "$dir/code/environments/production/manifests/site.pp"
