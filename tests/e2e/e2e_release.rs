//! Release hygiene, through the binary as a user runs it: `--version` names
//! the version and the commit this checkout is at; shell completions and man
//! pages are generated from the CLI definition and cover every subcommand.

use crate::common;

use std::process::Command;

use clap::CommandFactory;
use common::*;
use slicectl::cli::args::Cli;

fn stdout_of(args: &[&str]) -> String {
    let o = Command::new(bin()).args(args).output().unwrap();
    assert!(
        o.status.success(),
        "slicectl {args:?}: {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Every subcommand of the CLI definition.
fn subcommands() -> Vec<String> {
    let names: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    assert!(names.len() > 10, "{names:?}");
    names
}

#[test]
fn version_names_the_version_and_the_commit_of_this_checkout() {
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("git is needed to know the checkout's commit");
    assert!(head.status.success(), "this test runs in a git checkout");
    let head = String::from_utf8(head.stdout).unwrap();
    let v = stdout_of(&["--version"]);
    let want = format!(
        "slicectl {} (commit {}, ",
        env!("CARGO_PKG_VERSION"),
        head.trim()
    );
    assert!(v.starts_with(&want), "{v:?} does not start with {want:?}");
    let date = v[want.len()..].trim_end().trim_end_matches(')');
    assert!(
        jiff::civil::Date::strptime("%Y-%m-%d", date).is_ok(),
        "{v:?}: the commit date {date:?}"
    );
}

#[test]
fn completions_cover_every_subcommand_and_bash_parses_them() {
    let subs = subcommands();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout_of(&["completions", shell]);
        for s in &subs {
            assert!(script.contains(s.as_str()), "{shell}: no {s}");
        }
        assert!(script.contains("detailed-exitcode"), "{shell}");
    }
    let script = stdout_of(&["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("slicectl.bash");
    std::fs::write(&f, &script).unwrap();
    // Loading it defines the completion function and registers it.
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!(". {} && complete -p slicectl", f.display()))
        .output()
        .unwrap();
    assert!(
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains("_slicectl"),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let bad = Command::new(bin())
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn man_pages_render_and_cover_every_subcommand() {
    let page = stdout_of(&["man"]);
    assert!(page.contains(".TH slicectl 1"), "{page}");
    assert!(page.contains(env!("CARGO_PKG_VERSION")));
    for s in subcommands() {
        let entry = format!("slicectl\\-{}(1)", s.replace('-', "\\-"));
        assert!(
            page.contains(&entry),
            "no {entry} in the SUBCOMMANDS of:\n{page}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    stdout_of(&["man", "--dir", dir.path().to_str().unwrap()]);
    for s in subcommands() {
        let f = dir.path().join(format!("slicectl-{s}.1"));
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(text.contains(".SH NAME"), "{}", f.display());
    }
    // groff renders it without a warning (what `man` runs).
    let o = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .arg(dir.path().join("slicectl-plan.1"))
        .output()
        .expect("groff is needed to check the man page renders");
    assert!(
        o.status.success() && o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
