//! The documentation's links: README.md and docs/*.md are checked for
//!
//! - a relative link to a file or directory that does not exist;
//! - an anchor (`#…`) that matches no heading of the file it points into, with
//!   GitHub's slugs (lowercase, spaces to `-`, punctuation other than `-` and `_`
//!   dropped, `-1`, `-2`… for repeated headings);
//! - a file in docs/ that README.md does not link to.
//!
//! Links inside fenced code blocks and inline code spans are not links. External
//! links (`https:`, `mailto:`, …) are not followed: no network.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// A link found in a Markdown file: its target as written and the line it ends on.
#[derive(Debug, PartialEq)]
struct Link {
    target: String,
    line: usize,
}

/// The text with fenced code blocks and inline code spans blanked out (replaced
/// by spaces, newlines kept), so that what is left is prose, headings and links.
fn without_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<String> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        let is_fence = indent <= 3
            && marker.len() >= 3
            && (marker.chars().all(|c| c == '`') || marker.chars().all(|c| c == '~'));
        match &fence {
            Some(open) => {
                if is_fence
                    && marker.starts_with(&open[..1])
                    && marker.len() >= open.len()
                    && trimmed[marker.len()..].trim().is_empty()
                {
                    fence = None;
                }
                out.extend(line.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
                continue;
            }
            None if is_fence => {
                fence = Some(marker);
                out.extend(line.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
                continue;
            }
            None => {}
        }
        out.push_str(line);
    }
    blank_code_spans(&out)
}

/// Blanks inline code spans: a run of N backticks up to the next run of exactly N
/// (possibly on a later line of the same paragraph).
fn blank_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = chars.clone();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && chars[i] == '`' {
            i += 1;
        }
        let n = i - start;
        // Find the closing run of exactly n backticks, not past a blank line.
        let mut j = i;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '\n' && chars.get(j + 1) == Some(&'\n') {
                break;
            }
            if chars[j] == '`' {
                let s = j;
                while j < chars.len() && chars[j] == '`' {
                    j += 1;
                }
                if j - s == n {
                    close = Some(j);
                    break;
                }
                continue;
            }
            j += 1;
        }
        if let Some(end) = close {
            for c in &mut out[start..end] {
                if *c != '\n' {
                    *c = ' ';
                }
            }
            i = end;
        }
    }
    out.into_iter().collect()
}

/// Inline links `[text](target)` and images `![alt](target)` of the text (code
/// already blanked). The text may span lines; the target may be followed by a
/// title (`[a](b "t")`), which is dropped.
fn links(prose: &str) -> Vec<Link> {
    let bytes = prose.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(off) = prose[i..].find("](") {
        let close = i + off;
        i = close + 2;
        // The matching '[' before it, brackets balanced.
        let mut depth = 0usize;
        let mut opened = false;
        for k in (0..close).rev() {
            match bytes[k] {
                b']' => depth += 1,
                b'[' if depth == 0 => {
                    opened = true;
                    break;
                }
                b'[' => depth -= 1,
                _ => {}
            }
        }
        if !opened {
            continue;
        }
        let Some(end) = prose[i..].find(')') else {
            continue;
        };
        let inside = prose[i..i + end].trim();
        let target = inside
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_start_matches('<')
            .trim_end_matches('>');
        found.push(Link {
            target: target.to_string(),
            line: prose[..i].matches('\n').count() + 1,
        });
    }
    // Reference definitions: `[label]: target`.
    for (n, line) in prose.lines().enumerate() {
        let t = line.trim_start();
        if line.len() - t.len() > 3 || !t.starts_with('[') {
            continue;
        }
        let Some(rest) = t.find(']').and_then(|k| t[k + 1..].strip_prefix(':')) else {
            continue;
        };
        if let Some(target) = rest.split_whitespace().next() {
            found.push(Link {
                target: target
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string(),
                line: n + 1,
            });
        }
    }
    found
}

/// GitHub's anchor for a heading's text.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's ATX headings, in order, repeats numbered.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: Vec<String> = Vec::new();
    let mut out = BTreeSet::new();
    // Only fences are blanked here: a heading's code span is part of its slug.
    let mut in_fence = false;
    for line in text.lines() {
        let t = line.trim_start();
        if line.len() - t.len() <= 3 && (t.starts_with("```") || t.starts_with("~~~")) {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || line.len() - t.len() > 3 {
            continue;
        }
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) {
            continue;
        }
        let rest = &t[hashes..];
        if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
            continue;
        }
        // A closing sequence of #s is not part of the heading.
        let rest = rest.trim();
        let rest = match rest.trim_end_matches('#') {
            r if r.len() < rest.len() && (r.is_empty() || r.ends_with(' ')) => r.trim_end(),
            _ => rest,
        };
        let s = slug(rest);
        let n = seen.iter().filter(|x| **x == s).count();
        seen.push(s.clone());
        out.insert(if n == 0 { s } else { format!("{s}-{n}") });
    }
    out
}

/// `a/b/../c` → `a/c`, without touching the filesystem.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The Markdown files checked, relative to `root`: README.md, CHANGELOG.md
/// (when there) and docs/*.md.
fn doc_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("README.md")];
    if root.join("CHANGELOG.md").is_file() {
        files.push(PathBuf::from("CHANGELOG.md"));
    }
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "md"))
                .map(|p| Path::new("docs").join(p.file_name().unwrap()))
                .collect()
        })
        .unwrap_or_default();
    docs.sort();
    files.extend(docs);
    files
}

/// Every problem with the links of README.md and docs/*.md under `root`, one line each.
fn check(root: &Path) -> Vec<String> {
    let files = doc_files(root);
    let mut problems = Vec::new();
    let mut linked_from_readme = BTreeSet::new();
    for file in &files {
        let text = match std::fs::read_to_string(root.join(file)) {
            Ok(t) => t,
            Err(e) => {
                problems.push(format!("{}: cannot read: {e}", file.display()));
                continue;
            }
        };
        for link in links(&without_code(&text)) {
            let at = format!("{}:{}", file.display(), link.line);
            let t = link.target.as_str();
            if t.is_empty() {
                problems.push(format!("{at}: empty link target"));
                continue;
            }
            // A scheme (https:, mailto:, …): external, not followed.
            let is_scheme = |s: &str| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            };
            if t.split_once(':')
                .is_some_and(|(scheme, _)| is_scheme(scheme))
            {
                continue;
            }
            if t.starts_with('/') {
                problems.push(format!("{at}: {t}: absolute link; use a relative one"));
                continue;
            }
            let (path, anchor) = match t.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (t, None),
            };
            let dest = if path.is_empty() {
                file.clone()
            } else {
                normalize(&file.parent().unwrap_or(Path::new("")).join(path))
            };
            if dest.as_os_str().is_empty() || dest.starts_with("..") {
                problems.push(format!("{at}: {t}: points outside the repository"));
                continue;
            }
            if !root.join(&dest).exists() {
                problems.push(format!("{at}: {t}: {} does not exist", dest.display()));
                continue;
            }
            if file == Path::new("README.md") {
                linked_from_readme.insert(dest.clone());
            }
            let Some(anchor) = anchor else { continue };
            if dest.extension().is_none_or(|x| x != "md") {
                problems.push(format!(
                    "{at}: {t}: an anchor into {}, which is not Markdown",
                    dest.display()
                ));
                continue;
            }
            let target_text = std::fs::read_to_string(root.join(&dest)).unwrap_or_default();
            if !anchors(&target_text).contains(anchor) {
                problems.push(format!(
                    "{at}: {t}: no heading of {} has the anchor #{anchor}",
                    dest.display()
                ));
            }
        }
    }
    for file in files.iter().filter(|f| f.starts_with("docs")) {
        if !linked_from_readme.contains(file) {
            problems.push(format!(
                "{}: not linked from README.md (add it to the list of documents)",
                file.display()
            ));
        }
    }
    problems
}

#[test]
fn readme_and_docs_links_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(
        root.join("docs").is_dir(),
        "docs/ is where the README's detail lives"
    );
    let problems = check(root);
    assert!(
        problems.is_empty(),
        "broken documentation links:\n{}",
        problems.join("\n")
    );
}

/// The README's two set-up commands stay in it, verbatim.
#[test]
fn readme_keeps_the_two_commands() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    for command in [
        "cargo run -- apply specs/ --sim --auto-approve",
        "scripts/test.sh",
    ] {
        assert!(
            readme.lines().any(|l| l.trim() == command),
            "README.md: the command `{command}` on a line of its own"
        );
    }
}

#[test]
fn slugs_follow_github() {
    assert_eq!(slug("Two commands"), "two-commands");
    assert_eq!(
        slug("The GCE backend (self-managed Kubernetes on GCE)"),
        "the-gce-backend-self-managed-kubernetes-on-gce"
    );
    assert_eq!(
        slug("What `--sim` touches: nothing real"),
        "what---sim-touches-nothing-real"
    );
    assert_eq!(
        slug("Plan JSON (`plan --output json`), format version 1"),
        "plan-json-plan---output-json-format-version-1"
    );
    assert_eq!(slug("The manifests in deploy/"), "the-manifests-in-deploy");
    assert_eq!(slug("snake_case and CAPS"), "snake_case-and-caps");
    let a = anchors(
        "# A\n\n## A\n\n```\n# not a heading\n```\n### Closed ##\n    # indented code\n#no\n",
    );
    assert_eq!(
        a,
        ["a", "a-1", "closed"]
            .into_iter()
            .map(String::from)
            .collect::<BTreeSet<_>>()
    );
}

#[test]
fn links_skip_code_and_span_lines() {
    let text = "See [a\nb](x.md#y), `[not](a-link)` and ![img](i.png \"t\").\n\n```\n[no](code)\n```\n\n[ref]: r.md#z\n";
    let found = links(&without_code(text));
    assert_eq!(
        found,
        [
            Link {
                target: "x.md#y".into(),
                line: 2
            },
            Link {
                target: "i.png".into(),
                line: 2
            },
            Link {
                target: "r.md#z".into(),
                line: 8
            }
        ]
    );
}

/// The checker itself fails on each kind of broken link (a fixture tree in a
/// temporary directory, not the repository's files).
#[test]
fn broken_links_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("docs")).unwrap();
    std::fs::write(root.join("present.txt"), "x").unwrap();
    std::fs::write(
        root.join("README.md"),
        "# Top\n\n[ok](docs/a.md#section-one) [ok](#top) [ok](present.txt) [web](https://example.com/x)\n\
         [gone](docs/missing.md) [bad anchor](docs/a.md#no-such-heading) [self](#nope)\n",
    )
    .unwrap();
    std::fs::write(
        root.join("docs/a.md"),
        "# A\n\n## Section one\n\n[up](../README.md#top) [up bad](../README.md#bottom) [sib](b.md)\n",
    )
    .unwrap();
    std::fs::write(root.join("docs/b.md"), "# B\n").unwrap();
    let problems = check(root);
    let expect = [
        "README.md:4: docs/missing.md: docs/missing.md does not exist",
        "README.md:4: docs/a.md#no-such-heading: no heading of docs/a.md has the anchor #no-such-heading",
        "README.md:4: #nope: no heading of README.md has the anchor #nope",
        "docs/a.md:5: ../README.md#bottom: no heading of README.md has the anchor #bottom",
        "docs/b.md: not linked from README.md (add it to the list of documents)",
    ];
    assert_eq!(problems, expect, "{problems:#?}");
}
