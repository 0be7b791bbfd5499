//! The house rules' checker (scripts/house, run by .ci/run): it keeps the repository's own src/
//! within the rules, and it refuses each kind of breach in a tree made to carry one.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

fn house(args: &[&str]) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/house");
    Command::new(&script).args(args).output().expect("scripts/house runs (python3 is needed)")
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A function of `body` lines (its signature and closing brace count too, as scripts/long-fns counts).
fn function(name: &str, body: usize) -> String {
    format!("pub fn {name}() {{\n{}}}\n", "    let _ = 1;\n".repeat(body))
}

#[test]
fn the_repository_keeps_the_house_rules() {
    let out = house(&["--report"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "scripts/house found problems:\n{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("house rules: kept"));
}

#[test]
fn each_breach_is_named_and_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write(
        &src,
        "lib.rs",
        "pub mod a;\npub mod hidden;\npub mod hidden2;\npub mod long_file;\npub mod long_fn;\npub mod one;\npub mod room;\npub mod two;\npub mod unended;\n",
    );
    // What must not hide a long function: a one-line test item before it, a comment after its
    // closing brace, a `tests.rs` that is compiled into the product.
    let commented = function("commented", 79).replace("\n}\n", "\n} // commented\n");
    write(
        &src,
        "hidden/mod.rs",
        &format!("pub mod tests;\n#[cfg(test)]\nfn helper() {{}}\n\n{}{commented}", function("after_a_test_item", 79)),
    );
    write(&src, "hidden/tests.rs", &function("in_a_product_tests_rs", 79));
    // A multi-line test constant before a long function; a comment that names a test module.
    write(
        &src,
        "hidden2/mod.rs",
        &format!(
            "// the tests were once `#[cfg(test)] mod tests;`\npub mod tests;\n#[cfg(test)]\nconst NAMES: &[&str] = &[\n    \"a}}\",\n];\n\n{}",
            function("after_a_test_const", 79)
        ),
    );
    write(&src, "hidden2/tests.rs", &function("behind_a_comment", 79));
    // A 601st line without its newline.
    write(&src, "unended.rs", &format!("{}// the last line", "// a line\n".repeat(600)));
    // Two rooms that name each other through super::super.
    write(&src, "one/mod.rs", "pub mod x;\n");
    write(&src, "one/x.rs", "use super::super::two::y::Y;\npub struct X(pub Y);\n");
    write(&src, "two/mod.rs", "pub mod y;\n");
    write(&src, "two/y.rs", "pub struct Y;\npub fn f(_: super::super::one::x::X) {}\n");
    // Two sibling files that name each other: a circle.
    write(&src, "a/mod.rs", "pub mod x;\npub mod y;\npub use x::X;\n");
    write(&src, "a/x.rs", "use super::y::Y;\npub struct X(pub Y);\n");
    write(&src, "a/y.rs", "use crate::a::{self, x::X};\npub struct Y;\npub fn f(_: X) {}\n");
    // A parent and its child that name each other: not a circle.
    write(&src, "room/mod.rs", "mod inner;\npub use inner::I;\npub struct R;\n");
    write(&src, "room/inner.rs", "use super::R;\npub struct I(pub R);\n");
    write(&src, "long_file.rs", &"// a line\n".repeat(601));
    write(&src, "long_fn.rs", &(function("too_long", 79) + &function("allowed", 100) + &function("fits", 78)));
    let allow = tmp.path().join("allow");
    fs::write(
        &allow,
        "fn src/long_fn.rs allowed  # a table\nfn src/long_fn.rs fits  # no longer long\nfile src/a/x.rs\n",
    )
    .unwrap();
    let out = house(&["--src", src.to_str().unwrap(), "--allow", allow.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for want in [
        "src/long_file.rs: 601 lines",
        "fn too_long is 81 lines",
        "import circle between files: src/a/x.rs ↔ src/a/y.rs",
        "`fn src/long_fn.rs fits` no longer needs an exception",
        "file src/a/x.rs has no reason",
        "fn after_a_test_item is 81 lines",
        "fn commented is 81 lines",
        "fn in_a_product_tests_rs is 81 lines",
        "fn after_a_test_const is 81 lines",
        "fn behind_a_comment is 81 lines",
        "src/unended.rs: 601 lines",
        "import circle between rooms",
        "import circle between files: src/one/x.rs ↔ src/two/y.rs",
        "house rules: 13 problem(s)",
    ] {
        assert!(stderr.contains(want), "wanted {want:?} in:\n{stderr}");
    }
    for unwanted in ["fn allowed", "fn fits", "src/room/"] {
        assert!(!stderr.contains(unwanted), "{unwanted} named in:\n{stderr}");
    }
}

#[test]
fn a_missing_tree_is_said() {
    let out = house(&["--src", "/nonexistent/src"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a directory"));
}

#[test]
fn the_readme_shows_the_rooms_as_they_are() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/module-deps")).output().expect("scripts/module-deps runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    let start = readme.find("$ scripts/module-deps\n").expect("README.md shows scripts/module-deps") + 22;
    let shown = &readme[start..start + readme[start..].find("```").unwrap()];
    assert_eq!(
        shown,
        String::from_utf8_lossy(&out.stdout),
        "README.md's table of rooms is not scripts/module-deps' output"
    );
}
