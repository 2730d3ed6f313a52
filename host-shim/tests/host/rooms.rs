//! host-shim's rooms and the order they stand in, read from the sources: each room imports
//! only rooms below it, and no two files import each other, however indirectly. A new
//! import that breaks either fails here instead of waiting for a reviewer to notice the
//! heap growing back (the flat `src/` once had three circles and seven imports running
//! back up). The transport crates are held to the second rule too: each once had its
//! transport and its listener import each other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The rooms from the top floor down: a room may import only the rooms after it.
/// `main.rs` is the binary (it reaches the library as `host_shim::`).
const ROOMS_TOP_DOWN: &[&str] = &[
    "main",
    "commands",
    "cluster",
    "broker",
    "pi",
    "sandbox",
    "transcript",
    "native_guest",
    "ops",
    "factory",
    "local",
    "agent",
    "disk",
    "wit",
];

/// Every source file under a crate's `src/`, as its module path (`["commands", "serve"]`).
fn modules(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<Vec<String>, PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("src is readable") {
            let path = entry.expect("a directory entry").path();
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .expect("a file name")
                .to_owned();
            let mut module = prefix.to_vec();
            if path.is_dir() {
                module.push(name);
                walk(&path, &module, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                if name != "mod" && name != "lib" {
                    module.push(name);
                }
                out.insert(module, path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, &[], &mut out);
    out
}

/// host-shim's own `src/`.
fn host_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The paths one `use`/expression names after `crate::`: `a::b::C`, or each path of a group
/// (`crate::{gateway, settings::PLATFORM}`), as identifier segments.
fn named_paths(rest: &str) -> Vec<Vec<String>> {
    let segments = |path: &str| -> Vec<String> {
        path.trim()
            .split("::")
            .map(|s| {
                s.trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
            .take_while(|s| !s.is_empty())
            .collect()
    };
    match rest.strip_prefix('{') {
        Some(group) => group
            .split('}')
            .next()
            .unwrap_or_default()
            .split(',')
            .map(segments)
            .filter(|path| !path.is_empty())
            .collect(),
        None => vec![segments(rest)],
    }
}

/// The modules `source` names through `crate::` (or `host_shim::` in the binary), each
/// resolved to the longest path that is a file: `crate::disk::lock::LockDir` is
/// `["disk", "lock"]`. Comments are left out: a doc link is not an import.
fn imports(source: &str, files: &BTreeMap<Vec<String>, PathBuf>) -> BTreeSet<Vec<String>> {
    let mut found = BTreeSet::new();
    for line in source.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for prefix in ["crate::", "host_shim::"] {
            for rest in line.split(prefix).skip(1) {
                for segments in named_paths(rest) {
                    let longest = (1..=segments.len())
                        .rev()
                        .map(|n| segments[..n].to_vec())
                        .find(|path| files.contains_key(path));
                    if let Some(path) = longest {
                        found.insert(path);
                    }
                }
            }
        }
    }
    found
}

/// File → the files it imports, for the crate whose sources are `src`.
fn graph_of(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let files = modules(src);
    files
        .iter()
        .map(|(module, path)| {
            let source = std::fs::read_to_string(path).expect("a source file");
            let mut used = imports(&source, &files);
            used.remove(module);
            (module.clone(), used)
        })
        .collect()
}

/// host-shim's graph.
fn graph() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    graph_of(&host_src())
}

fn room(module: &[String]) -> &str {
    module.first().map(String::as_str).unwrap_or("lib")
}

#[test]
fn every_room_imports_only_rooms_below_it() {
    let graph = graph();
    let floor = |room: &str| ROOMS_TOP_DOWN.iter().position(|r| *r == room);
    let mut wrong = Vec::new();
    for (module, used) in &graph {
        let from = room(module);
        if from == "lib" {
            continue;
        }
        let Some(from_floor) = floor(from) else {
            wrong.push(format!(
                "src/{} is in no room: add {from:?} to ROOMS_TOP_DOWN where it stands",
                module.join("/")
            ));
            continue;
        };
        for target in used {
            let to = room(target);
            if to == from {
                continue;
            }
            if floor(to).is_none_or(|to_floor| to_floor <= from_floor) {
                wrong.push(format!(
                    "{} imports {} ({from} may import only rooms below it)",
                    module.join("::"),
                    target.join("::")
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports running up:\n{}",
        wrong.join("\n")
    );
}

/// The first import circle in `graph`, as the modules it runs through.
fn circle(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<String> {
    fn visit(
        graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        node: &Vec<String>,
        path: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<String> {
        if done.contains(node) {
            return None;
        }
        if let Some(at) = path.iter().position(|p| p == node) {
            let circle: Vec<String> = path[at..].iter().map(|m| m.join("::")).collect();
            return Some(format!("{} -> {}", circle.join(" -> "), node.join("::")));
        }
        path.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(graph, next, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(graph, node, &mut Vec::new(), &mut done))
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    if let Some(found) = circle(&graph()) {
        panic!("import circle in host-shim: {found}");
    }
}

#[test]
fn no_transport_crate_has_an_import_circle() {
    let transports = Path::new(env!("CARGO_MANIFEST_DIR")).join("../transports");
    let mut read = 0;
    for entry in std::fs::read_dir(&transports).expect("transports/ is readable") {
        let src = entry.expect("a directory entry").path().join("src");
        if !src.is_dir() {
            continue;
        }
        read += 1;
        if let Some(found) = circle(&graph_of(&src)) {
            panic!("import circle in {}: {found}", src.display());
        }
    }
    assert!(read >= 6, "read {read} transport crates");
}

#[test]
fn the_reader_sees_imports_and_resolves_them_to_files() {
    // Guards the two tests above against passing because nothing was read.
    let graph = graph();
    let serve = graph
        .get(&vec!["commands".to_owned(), "serve".to_owned()])
        .expect("commands/serve.rs is read");
    assert!(serve.contains(&vec!["commands".to_owned(), "process".to_owned()]));
    assert!(serve.contains(&vec!["disk".to_owned(), "lock".to_owned()]));
    assert!(graph.len() > 60, "{} files", graph.len());
    // A group import names each of its modules (discord's transport once imported its
    // gateway as `crate::{gateway, settings, wire}`, which a plain reader missed).
    let discord =
        graph_of(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../transports/discord/src"));
    let transport = discord
        .get(&vec!["transport".to_owned()])
        .expect("discord's transport.rs is read");
    assert!(
        transport.contains(&vec!["gateway".to_owned()]),
        "{transport:?}"
    );
    assert!(
        transport.contains(&vec!["state".to_owned()]),
        "{transport:?}"
    );
    // A planted circle is found.
    let mut planted = discord.clone();
    planted
        .entry(vec!["state".to_owned()])
        .or_default()
        .insert(vec!["transport".to_owned()]);
    assert!(circle(&planted).is_some());
}
