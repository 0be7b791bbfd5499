# Makes a CSR through Puppet's own agent code path (Puppet::X509::CertProvider#create_request),
# with a private, throw-away confdir/ssldir: no server, nothing in /etc touched.
#
#   ruby tests/support/make-puppet-csr.rb CERTNAME CSR_ATTRIBUTES_YAML OUT_CSR_PEM
#
# The key is RSA-2048. (Puppet 7.23's CertificateRequest#generate cannot take an EC key on
# OpenSSL 3: "pkeys are immutable", certificate_request.rb:73.)
require 'puppet'
require 'tmpdir'

name, attrs, out = ARGV
abort('usage: make-puppet-csr.rb CERTNAME ATTRS_YAML OUT_CSR') unless out
Dir.mktmpdir('vouch-puppet') do |d|
  Puppet.initialize_settings(['--confdir', d, '--vardir', "#{d}/var", '--ssldir', "#{d}/ssl",
                              '--rundir', "#{d}/run", '--logdir', "#{d}/log", '--codedir', "#{d}/code",
                              '--publicdir', "#{d}/public", '--certname', name, '--csr_attributes', attrs])
  key = OpenSSL::PKey::RSA.new(2048)
  csr = Puppet::X509::CertProvider.new.create_request(name, key)
  File.write(out, csr.to_pem)
end
