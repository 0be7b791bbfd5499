use clap::Parser;

fn main() {
    let cli = vouch::cli::Cli::parse();
    let code = match vouch::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("vouch: error: {e}");
            if let Some(h) = e.hint() {
                eprintln!("  hint: {h}");
            }
            vouch::cli::EXIT_ERROR
        }
    };
    std::process::exit(code);
}
