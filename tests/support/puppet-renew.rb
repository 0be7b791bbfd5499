# Renews an agent's certificate through POST /puppet-ca/v1/certificate_renewal with
# Puppet's own HTTP client and the agent's own SSL context (mutual TLS with its
# current certificate), and saves the answer where the agent keeps its certificate.
#
#   ruby tests/support/puppet-renew.rb CONFDIR
#
# Debian's puppet-agent 7.23 has no automatic renewal (hostcert_renewal_interval came
# in a later Puppet): this sends what later agents send — an empty text/plain POST —
# through the same client, TLS settings and certificate store as `puppet ssl`.
require 'puppet'

confdir = ARGV[0] or abort('usage: puppet-renew.rb CONFDIR')
Puppet.initialize_settings(['--confdir', confdir])
ssl = Puppet::SSL::SSLProvider.new.load_context(certname: Puppet[:certname])
client = Puppet.runtime[:http]
route = client.create_session.route_to(:ca, ssl_context: ssl)
url = route.with_base_url('/certificate_renewal')
resp = client.post(url, '', headers: { 'Accept' => 'text/plain', 'Content-Type' => 'text/plain',
                                       'X-Puppet-Version' => Puppet.version },
                            options: { ssl_context: ssl })
puts "status #{resp.code}"
unless resp.success?
  puts resp.body.to_s
  exit 1
end
cert = OpenSSL::X509::Certificate.new(resp.body.to_s)
Puppet::X509::CertProvider.new.save_client_cert(Puppet[:certname], cert)
puts "serial #{cert.serial.to_s(16).downcase}"
