//! The documentation names only what exists. The attack table (docs/attacks.md) and the
//! decision table (docs/decision.md) cite a fixture or a test on every row, and each one
//! cited is there and used by a test; a test function named anywhere in the user
//! documentation exists; every relative link leads to a file, and to a heading in it; and
//! the documentation tells no project history (issue or stop numbers, seeds); and the
//! benchmark script runs the thousand certificates its comment says a run needs.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn root() -> &'static Path {
    Path::new(ROOT)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The user documentation: README.md, docs/*.md and the READMEs beside policies and fixtures.
fn documents() -> Vec<PathBuf> {
    let mut out =
        vec![root().join("README.md"), root().join("policy/README.md"), root().join("fixtures/puppet7/README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("a docs/ directory")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    assert!(docs.len() >= 2, "docs/ holds the documentation: {docs:?}");
    out.extend(docs);
    out
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The names of the functions defined in these files (`fn NAME(` or `fn NAME<`).
fn functions(files: &[PathBuf]) -> HashSet<String> {
    let mut names = HashSet::new();
    for f in files {
        let text = read(f);
        for (i, _) in text.match_indices("fn ") {
            let before = text[..i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let name: String = text[i + 3..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

/// What a reference may point at.
struct Repo {
    src_files: Vec<PathBuf>,
    test_files: Vec<PathBuf>,
    src_fns: HashSet<String>,
    all_fns: HashSet<String>,
    /// The text of every test source, to see that a fixture is used.
    tests_text: String,
    fixtures_csr: Vec<String>,
}

impl Repo {
    fn load() -> Repo {
        let (mut src_files, mut test_files) = (Vec::new(), Vec::new());
        rust_files(&root().join("src"), &mut src_files);
        rust_files(&root().join("tests"), &mut test_files);
        let src_fns = functions(&src_files);
        let mut all_fns = functions(&test_files);
        all_fns.extend(src_fns.iter().cloned());
        let tests_text = test_files.iter().map(|f| read(f)).collect::<Vec<_>>().join("\n");
        let fixtures_csr = std::fs::read_dir(root().join("fixtures/csr"))
            .expect("fixtures/csr")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        Repo { src_files, test_files, src_fns, all_fns, tests_text, fixtures_csr }
    }

    /// `tests/FILE.rs` defines `fn NAME`.
    fn test_fn(&self, file: &str, name: &str) -> Result<(), String> {
        let path = root().join("tests").join(file);
        if !path.is_file() {
            return Err(format!("no tests/{file}"));
        }
        if functions(&[path]).contains(name) {
            Ok(())
        } else {
            Err(format!("tests/{file} has no fn {name}"))
        }
    }

    /// Resolves one backticked reference from a table's test column.
    fn resolve(&self, token: &str) -> Result<(), String> {
        let snake =
            |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        let kebab = |s: &str| {
            !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '*')
        };
        let token = token.strip_prefix("tests/").unwrap_or(token);
        if let Some((file, name)) = token.split_once(".rs::") {
            // replay.rs::racing_replays_exactly_one_wins: a test function in tests/replay.rs.
            return if snake(file) && snake(name) {
                self.test_fn(&format!("{file}.rs"), name)
            } else {
                Err("malformed".into())
            };
        }
        if token.contains("::") {
            // csr::tests::name: a unit test somewhere in src/ (modules may move; the name stays).
            let name = token.rsplit("::").next().unwrap_or_default();
            return if token.split("::").all(snake) && self.src_fns.contains(name) {
                Ok(())
            } else {
                Err(format!("no fn {name} in src/"))
            };
        }
        if let Some(file) = token.strip_suffix(".rs") {
            // A file of tests (tests/replay.rs) or of unit tests (csr.rs, anywhere under src/).
            let found = root().join("tests").join(token).is_file()
                || self.src_files.iter().any(|p| p.file_name().is_some_and(|n| n == token));
            return if snake(file) && found { Ok(()) } else { Err(format!("no file {token} in tests/ or src/")) };
        }
        if token.contains('.') {
            // A fixture file: policy-scoped.toml, puppet7/offline-node.example.csr.pem.
            let name = Path::new(token).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            return if root().join("fixtures").join(token).is_file() && self.tests_text.contains(&name) {
                Ok(())
            } else {
                Err(format!("no fixtures/{token} used by a test"))
            };
        }
        if token.contains('_') && snake(token) {
            // A function name: a test in tests/ or a unit test in src/.
            return if self.all_fns.contains(token) { Ok(()) } else { Err(format!("no fn {token} in src/ or tests/")) };
        }
        if token.contains('-') && kebab(token) {
            // A fixture in fixtures/csr named by its defect (NAME.csr.pem, NAME.csr.txt, ...); `*` a prefix.
            let stem = |f: &str| f.split('.').next().unwrap_or_default().to_string();
            let matches: Vec<&String> = self
                .fixtures_csr
                .iter()
                .filter(|f| match token.strip_suffix('*') {
                    Some(prefix) => stem(f).starts_with(prefix),
                    None => stem(f) == token,
                })
                .collect();
            if matches.is_empty() {
                return Err(format!("no fixture fixtures/csr/{token}.*"));
            }
            return match matches.iter().find(|f| !self.tests_text.contains(f.as_str())) {
                Some(unused) => Err(format!("fixtures/csr/{unused} is used by no test")),
                None => Ok(()),
            };
        }
        Err("not a fixture, test file or test function".into())
    }
}

/// The cells of each row of every table under `heading` (to the next heading of its level),
/// header and separator rows left out.
fn table_rows(text: &str, heading: &str) -> Vec<Vec<String>> {
    let start = text.find(heading).unwrap_or_else(|| panic!("no heading {heading:?}"));
    let level = heading.chars().take_while(|c| *c == '#').count();
    let mut rows = Vec::new();
    let (mut header_seen, mut fenced) = (false, false);
    for line in text[start + heading.len()..].lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if !fenced && line.starts_with('#') && line.chars().take_while(|c| *c == '#').count() <= level {
            break; // the next section
        }
        if !line.starts_with('|') {
            header_seen = false;
            continue;
        }
        if line.starts_with("|---") {
            header_seen = true;
            continue;
        }
        if !header_seen {
            continue; // the header row
        }
        // Split on | outside backticks and not escaped (\|).
        let mut cells = Vec::new();
        let (mut cell, mut in_code, mut prev) = (String::new(), false, ' ');
        for c in line.chars() {
            match c {
                '`' => in_code = !in_code,
                '|' if !in_code && prev != '\\' => {
                    cells.push(std::mem::take(&mut cell).trim().to_string());
                    prev = c;
                    continue;
                }
                _ => {}
            }
            cell.push(c);
            prev = c;
        }
        rows.push(cells[1..].to_vec()); // before the first | there is nothing
    }
    rows
}

fn backticked(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// Checks a table whose last column cites tests; returns the number of rows.
fn check_citations(repo: &Repo, doc: &str, heading: &str, columns: usize) -> usize {
    let text = read(&root().join(doc));
    let rows = table_rows(&text, heading);
    let mut problems = Vec::new();
    let mut previous_cited = false;
    for row in &rows {
        if row.len() != columns {
            problems.push(format!("{} cells, not {columns}: {row:?}", row.len()));
            continue;
        }
        let cell = &row[columns - 1];
        let refs = backticked(cell);
        if refs.is_empty() {
            let allowed = (cell == "same test" && previous_cited) || cell.contains("no dedicated test");
            if !allowed {
                problems.push(format!("cites no fixture or test: {:?}", row[0]));
            }
            continue;
        }
        previous_cited = true;
        for r in refs {
            if let Err(e) = repo.resolve(r) {
                problems.push(format!("`{r}` ({e}), in the row {:?}", row[0]));
            }
        }
    }
    assert!(problems.is_empty(), "{doc}, {heading}:\n{}", problems.join("\n"));
    rows.len()
}

#[test]
fn every_attack_row_cites_tests_that_exist() {
    let repo = Repo::load();
    assert!(!repo.test_files.is_empty());
    let rows = check_citations(&repo, "docs/attacks.md", "# Attacks and the tests that refuse them", 3);
    // The table held 99 attacks when it moved to docs/: rows are added, never dropped.
    assert!(rows >= 99, "docs/attacks.md lists {rows} attacks; it listed 99");
}

#[test]
fn every_decision_check_cites_fixtures_that_exist() {
    let repo = Repo::load();
    let rows = check_citations(&repo, "docs/decision.md", "# The decision", 3);
    assert!(rows >= 30, "docs/decision.md lists {rows} checks; it listed 30");
}

#[test]
fn test_functions_named_in_the_documentation_exist() {
    let repo = Repo::load();
    let mut problems = Vec::new();
    for doc in documents() {
        let text = read(&doc);
        for r in backticked(&text) {
            let token = r.strip_prefix("tests/").unwrap_or(r);
            if let Some((file, name)) = token.split_once(".rs::") {
                if let Err(e) = repo.test_fn(&format!("{file}.rs"), name) {
                    problems.push(format!("{}: `{r}`: {e}", doc.display()));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_relative_link_leads_to_a_file_and_heading() {
    let mut problems = Vec::new();
    let mut links = 0;
    for doc in documents() {
        let text = read(&doc);
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(target) = rest.split(')').next() else { continue };
            if target.contains("://") || target.starts_with("mailto:") || target.contains(char::is_whitespace) {
                continue;
            }
            links += 1;
            let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
            let path = if file.is_empty() { doc.clone() } else { doc.parent().expect("parent").join(file) };
            if !path.exists() {
                problems.push(format!("{}: ({target}): no {}", doc.display(), path.display()));
                continue;
            }
            if !fragment.is_empty() && !anchors(&read(&path)).contains(fragment) {
                problems.push(format!("{}: ({target}): no heading #{fragment} in {}", doc.display(), path.display()));
            }
        }
    }
    assert!(links >= 20, "only {links} relative links found: is the link syntax still ](path)?");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_code_block_is_closed() {
    for doc in documents() {
        let fences = read(&doc).lines().filter(|l| l.starts_with("```")).count();
        assert!(fences % 2 == 0, "{}: {fences} fence lines: a code block is left open", doc.display());
    }
}

#[test]
fn the_documentation_tells_no_project_history() {
    // Readers need facts, not the numbers of the work items that produced them.
    let words = ["issue", "stop", "seed", "session", "point"];
    let mut problems = Vec::new();
    for doc in documents() {
        let text = read(&doc);
        let lower = text.to_lowercase();
        for (n, line) in lower.lines().enumerate() {
            let tokens: Vec<&str> = line.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).collect();
            for pair in tokens.windows(2) {
                if words.contains(&pair[0]) && pair[1].chars().all(|c| c.is_ascii_digit()) {
                    problems.push(format!("{}:{}: {}", doc.display(), n + 1, line.trim()));
                }
            }
            if tokens.iter().any(|t| *t == "seed" || *t == "seeds") {
                problems.push(format!("{}:{}: {}", doc.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(problems.is_empty(), "project history in the documentation:\n{}", problems.join("\n"));
}

/// A stand-in for vouch in `examples/cpu_per_cert.sh`: a server that says it listens and waits,
/// and a load tool that appends each measured run's arguments to `$FAKE_LOG` and prints the row
/// `vouch bench serve` prints (agents, certificates, failed, …).
const FAKE_VOUCH: &str = r#"#!/bin/bash
if [ "$1" = --version ] || [ "$*" = "bench --help" ]; then exit 0; fi
if [ "$1" = --dir ] && [ "$3" = serve ]; then echo '{"event":"listening"}'; exec sleep 600; fi
if [ "$1 $2" = "bench serve" ]; then
  agents=0 per=0
  while [ $# -gt 0 ]; do
    case $1 in --agents) agents=$2 ;; --per-agent) per=$2 ;; --server-pid) measured=1 ;; esac
    shift
  done
  [ -z "${measured:-}" ] || echo "--agents $agents --per-agent $per" >>"$FAKE_LOG"
  echo "${agents%%,*} 1000 0 x 100 1.0 2.0 10 x 0.5 x 0.1 x x"
  exit 0
fi
exit 1
"#;

/// `examples/cpu_per_cert.sh` says a run needs a thousand certificates for its CPU per
/// certificate to read to 0.01 ms, and `AGENTS=8` ran 8 agents × 32 = 256 (one call for every
/// level, one certificates-per-agent for all). Each level of AGENTS now runs at least that
/// many, by default; run with stand-ins for vouch, so that it takes no time.
#[test]
fn the_cpu_per_certificate_script_runs_the_thousand_certificates_it_says_a_run_needs() {
    use std::os::unix::fs::PermissionsExt;
    let script = read(&root().join("examples/cpu_per_cert.sh"));
    assert!(script.contains("a run needs a thousand certificates or more"), "the script's own minimum moved");
    let tmp = std::env::temp_dir().join(format!("vouch-docs-cpu-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let fake = tmp.join("fake-vouch");
    std::fs::write(&fake, FAKE_VOUCH).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let log = tmp.join("runs");
    let o = std::process::Command::new("bash")
        .arg(root().join("examples/cpu_per_cert.sh"))
        .envs([("VOUCH", &fake), ("LOAD", &fake), ("FAKE_LOG", &log)])
        .envs([("AGENTS", "8,64"), ("KEYS", "p256 rsa4096"), ("PUPPETSERVER", "0")])
        .env_remove("PER")
        .env_remove("A")
        .env_remove("B")
        .env_remove("CALLGRIND")
        .env_remove("SYSCALLS")
        .output()
        .unwrap();
    let runs = std::fs::read_to_string(&log).unwrap_or_default();
    std::fs::remove_dir_all(&tmp).unwrap();
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let mut levels = Vec::new();
    for line in runs.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        let per: u64 = words[3].parse().unwrap();
        for agents in words[1].split(',') {
            let agents: u64 = agents.parse().unwrap();
            assert!(agents * per >= 1000, "{agents} agents × {per} = {} certificates: {runs}", agents * per);
            levels.push(agents);
        }
    }
    assert_eq!(levels, [8, 64, 8, 64], "one run per level and key type: {runs}");
}
