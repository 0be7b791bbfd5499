# Load loop for Puppet Server's CA, as an agent talks to it: for each pre-made CSR,
# PUT /puppet-ca/v1/certificate_request/NAME then GET /puppet-ca/v1/certificate/NAME,
# over one kept-alive TLS connection per client thread.
#
#   ruby examples/puppetserver_bench_client.rb PORT CA_PEM CLIENTS CSR_DIR
#
# CSR_DIR holds NAME.csr files (PEM). Prints one line: certs/s, p50, p90, failures.
require 'net/http'
require 'openssl'

port, ca_file, clients, dir = ARGV
abort('usage: puppetserver_bench_client.rb PORT CA_PEM CLIENTS CSR_DIR') unless dir
clients = Integer(clients)
jobs = Dir.glob(File.join(dir, '*.csr')).sort.map { |f| [File.basename(f, '.csr'), File.read(f)] }
abort("no CSRs in #{dir}") if jobs.empty?
queue = Queue.new
jobs.each { |j| queue << j }
clients.times { queue << nil }

latencies = Queue.new
failures = Queue.new
t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
threads = Array.new(clients) do
  Thread.new do
    http = Net::HTTP.new('localhost', Integer(port))
    http.use_ssl = true
    http.ca_file = ca_file
    http.verify_mode = OpenSSL::SSL::VERIFY_PEER
    http.keep_alive_timeout = 30
    http.start do |h|
      while (job = queue.pop)
        name, pem = job
        s = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        put = h.send_request('PUT', "/puppet-ca/v1/certificate_request/#{name}", pem,
                             'Content-Type' => 'text/plain', 'Accept' => 'text/plain')
        get = h.request(Net::HTTP::Get.new("/puppet-ca/v1/certificate/#{name}", 'Accept' => 'text/plain'))
        latencies << (Process.clock_gettime(Process::CLOCK_MONOTONIC) - s)
        unless put.code == '200' && get.code == '200' && get.body.include?('BEGIN CERTIFICATE')
          failures << "#{name}: PUT #{put.code} GET #{get.code}"
        end
      end
    end
  end
end
threads.each(&:join)
elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
lat = []
lat << latencies.pop until latencies.empty?
lat.sort!
fails = []
fails << failures.pop until failures.empty?
pct = ->(p) { (lat[[(lat.size * p).ceil - 1, 0].max] * 1000).round }
printf("clients=%d certs=%d seconds=%.2f certs_per_s=%.1f p50_ms=%d p90_ms=%d failures=%d\n",
       clients, lat.size, elapsed, (lat.size - fails.size) / elapsed, pct.call(0.5), pct.call(0.9), fails.size)
fails.first(3).each { |f| warn("  failed: #{f}") }
