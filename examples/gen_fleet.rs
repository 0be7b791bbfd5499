//! Fills the store of the CA in DIR with N real certificates (`node-0000000.example.test`…)
//! and writes an inventory file lacking every CUT-th name, to measure `vouch reconcile` at
//! scale (docs/fleet-operations.md). Without serial records (`serials/`), which a dry run
//! never reads: a million certificates take about 4 GB (one 4 KiB block each).
//!
//!     vouch --dir /var/tmp/fleet ca init
//!     cargo run --release --example gen_fleet -- /var/tmp/fleet 1000000 100 /var/tmp/fleet.txt
//!     /usr/bin/time -v vouch --dir /var/tmp/fleet reconcile --inventory file:/var/tmp/fleet.txt -o json >/dev/null
//!
//! With a sixth argument `--records`, the serial records too (what `vouch store verify` reads):
//!
//!     cargo run --release --example gen_fleet -- /var/tmp/fleet 100000 100 /var/tmp/fleet.txt --records
//!     /usr/bin/time -v vouch --dir /var/tmp/fleet store verify

#[allow(dead_code)]
#[path = "../tests/common/gen_store.rs"]
mod gen_store;

use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let records = match args.get(5).map(String::as_str) {
        None => false,
        Some("--records") => true,
        Some(_) => {
            eprintln!("usage: gen_fleet DIR N CUT INVENTORY [--records]");
            std::process::exit(2);
        }
    };
    if args.len() != 5 && args.len() != 6 {
        eprintln!("usage: gen_fleet DIR N CUT INVENTORY [--records]");
        std::process::exit(2);
    }
    let dir = std::path::PathBuf::from(&args[1]);
    let n: usize = args[2].parse().expect("N");
    let cut: usize = args[3].parse().expect("CUT");
    let names: Vec<String> = (0..n).map(|i| format!("node-{i:07}.example.test")).collect();
    let t = std::time::Instant::now();
    gen_store::fill_with(&dir, &names, time::OffsetDateTime::now_utc(), &|_| false, records);
    let mut inv = std::io::BufWriter::new(std::fs::File::create(&args[4]).expect("inventory"));
    for (i, name) in names.iter().enumerate() {
        if i % cut != 0 {
            writeln!(inv, "{name}").expect("write");
        }
    }
    inv.flush().expect("flush");
    eprintln!("wrote {n} certificates in {:.1?}", t.elapsed());
}
