//! The outbound pipeline's seams (docs/architecture.md#how-it-is-tested): each stage is entered
//! once, in the documented order (redact → split → render → chunk), and the core modules import
//! each other without circles. Read from the sources, so a new import that breaks either fails
//! here.

use std::collections::{BTreeMap, BTreeSet};

/// Core module name → the core modules it imports.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/core");
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("src/core is readable") {
        let path = entry.expect("a directory entry").path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        // A module split into a folder (`config/`) counts as one module: all its files.
        let source = if path.is_dir() {
            std::fs::read_dir(&path)
                .expect("a module folder is readable")
                .map(|file| {
                    std::fs::read_to_string(file.expect("a directory entry").path())
                        .expect("a source file")
                })
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            std::fs::read_to_string(&path).expect("a source file")
        };
        let used = source
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .flat_map(|l| {
                ["crate::core::", "super::"]
                    .iter()
                    .filter_map(move |p| l.split(p).nth(1))
                    .collect::<Vec<_>>()
            })
            .filter_map(|rest| {
                let module: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                (!module.is_empty() && module != "super" && module != "*").then_some(module)
            })
            .filter(|m| m != name)
            .collect();
        graph.insert(name.to_owned(), used);
    }
    graph
}

#[test]
fn core_modules_import_each_other_without_circles() {
    let graph = imports();
    // Depth-first search with an explicit path: a module met again on the path is a circle.
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if done.contains(node) {
            return;
        }
        if let Some(at) = path.iter().position(|p| p == node) {
            panic!("import circle: {} -> {node}", path[at..].join(" -> "));
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if graph.contains_key(next) {
                visit(graph, next, path, done);
            }
        }
        path.pop();
        done.insert(node.to_owned());
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(&graph, node, &mut Vec::new(), &mut done);
    }
}

#[test]
fn each_pipeline_stage_is_entered_once_in_order() {
    let graph = imports();
    let uses = |a: &str, b: &str| graph.get(a).is_some_and(|s| s.contains(b));
    // The stages in order; a stage may call only the one right after it (the splitter
    // renders while it parses), never an earlier one, and only `outbound` calls the chunker.
    let stages = ["redact", "blocks", "render", "chunk"];
    for (i, a) in stages.iter().enumerate() {
        for (j, b) in stages.iter().enumerate() {
            let allowed = j == i + 1 && *a == "blocks";
            assert!(allowed || !uses(a, b), "{a} imports {b}");
        }
    }
    for stage in stages {
        assert!(
            uses("outbound", stage) || stage == "render",
            "outbound skips {stage}"
        );
    }
    // Measuring and the HTML tokenizer serve every stage and call none of them.
    for helper in ["measure", "html", "dialect"] {
        for stage in stages {
            assert!(!uses(helper, stage), "{helper} imports {stage}");
        }
    }
}
