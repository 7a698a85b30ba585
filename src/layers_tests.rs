//! The layer order written in `src/lib.rs` is the code's: every `crate::…` path in a
//! module's code (its tests aside) names the module itself or one listed before it.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The modules in the order `src/lib.rs` lists them.
fn declared() -> Vec<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let mut order = Vec::new();
    for line in lib.lines() {
        let Some(item) = line.strip_prefix("//! - ") else {
            continue;
        };
        let names = item.split(':').next().unwrap_or("");
        for name in names.split('`').skip(1).step_by(2) {
            order.push(name.to_string());
        }
    }
    order
}

/// The top-level modules `src/lib.rs` declares.
fn declared_modules() -> Vec<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let mut modules: Vec<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect();
    modules.sort();
    modules
}

/// Every source file of a module that is not test code, with the module's name.
fn files(dir: &Path, module: &str, out: &mut Vec<(String, PathBuf)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "snapshots" {
                files(&path, module, out);
            }
        } else if name.ends_with(".rs") && !name.ends_with("tests.rs") && name != "fixture.rs" {
            out.push((module.to_string(), path));
        }
    }
}

/// The modules a file's code (up to its tests) names with `crate::`.
fn uses(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    code.match_indices("crate::")
        .map(|(at, _)| {
            code[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect::<String>()
        })
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn the_layer_list_names_every_module_once() {
    let mut listed = declared();
    listed.sort();
    let before = listed.len();
    listed.dedup();
    assert_eq!(before, listed.len(), "a module is listed twice");
    assert_eq!(listed, declared_modules());
}

#[test]
fn every_module_uses_only_the_layers_before_it() {
    let order = declared();
    let rank = |m: &str| order.iter().position(|o| o == m);
    let mut sources = Vec::new();
    for entry in std::fs::read_dir(src()).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if rank(&stem).is_none() {
            continue;
        }
        if path.is_dir() {
            files(&path, &stem, &mut sources);
        } else {
            sources.push((stem, path));
        }
    }
    let mut wrong = Vec::new();
    for (module, path) in &sources {
        let own = rank(module).unwrap();
        for used in uses(path) {
            match rank(&used) {
                Some(r) if r < own || used == *module => {}
                _ => wrong.push(format!(
                    "{} uses crate::{used}",
                    path.strip_prefix(src()).unwrap().display()
                )),
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "against the layer order in src/lib.rs:\n{}",
        wrong.join("\n")
    );
}
