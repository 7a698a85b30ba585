//! The layer order written in `src/lib.rs` is the code's: every `crate::…` path in a
//! module's code (its tests aside) names the module itself or one listed before it; and
//! inside a module, no files import each other in a loop.

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
        .filter_map(|l| {
            l.strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("pub(crate) mod "))
        })
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

/// The crate's modules, from `src/lib.rs` down through every `mod` declaration that is not
/// test code: module path (`["tui", "view", "inbox"]`) → its file.
fn module_files() -> Vec<(Vec<String>, PathBuf)> {
    let mut out = Vec::new();
    let mut todo = vec![(Vec::<String>::new(), src().join("lib.rs"))];
    while let Some((module, file)) = todo.pop() {
        let text = std::fs::read_to_string(&file).unwrap();
        let own_dir = file.parent().unwrap().to_path_buf();
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let children_dir = if stem == "mod" || stem == "lib" {
            own_dir.clone()
        } else {
            own_dir.join(&stem)
        };
        let mut attributes: Vec<&str> = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.starts_with("#[") {
                attributes.push(line);
                continue;
            }
            let declared = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("pub(crate) mod "))
                .or_else(|| line.strip_prefix("pub(super) mod "))
                .or_else(|| line.strip_prefix("mod "))
                .and_then(|rest| rest.strip_suffix(';'));
            let is_test = attributes.iter().any(|a| a.contains("cfg(test)"));
            let path_attr = attributes
                .iter()
                .find_map(|a| a.strip_prefix("#[path = \"")?.strip_suffix("\"]"));
            attributes.clear();
            let Some(name) = declared else { continue };
            if is_test {
                continue;
            }
            let child = match path_attr {
                Some(p) => own_dir.join(p),
                None if children_dir.join(format!("{name}.rs")).exists() => {
                    children_dir.join(format!("{name}.rs"))
                }
                None => children_dir.join(name).join("mod.rs"),
            };
            let mut path = module.clone();
            path.push(name.to_string());
            todo.push((path, child));
        }
        out.push((module, file));
    }
    out
}

/// A file's code up to its tests, without comments.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    code.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .filter(|l| {
            !l.trim_start().starts_with("pub use ")
                && !l.trim_start().starts_with("pub(crate) use ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a file's code names, each as segments from the crate root: `crate::a::b`,
/// `super::…`, `self::…` and `child::…` for a module the file declares. `use` groups
/// (`use super::{a, b::C}`) are expanded one level.
fn named_paths(code: &str, module: &[String], children: &[String]) -> Vec<Vec<String>> {
    let mut expanded = String::new();
    for piece in code.split(';') {
        let trimmed = piece.trim_start();
        match (trimmed.strip_prefix("use "), piece.find("::{")) {
            (Some(_), Some(open)) => {
                let head = &piece[..open];
                let head = head.trim_start().trim_start_matches("use ");
                let inner = piece[open + 3..].trim_end().trim_end_matches('}');
                for item in inner.split(',') {
                    expanded.push_str(&format!(" {head}::{} ", item.trim()));
                }
            }
            _ => expanded.push_str(piece),
        }
        expanded.push(' ');
    }
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut paths = Vec::new();
    for token in expanded.split(|c: char| !word(c)) {
        let segments: Vec<&str> = token.split("::").filter(|s| !s.is_empty()).collect();
        let Some((&first, rest)) = segments.split_first() else {
            continue;
        };
        if rest.is_empty() || !token.contains("::") {
            continue;
        }
        let mut base: Vec<String> = match first {
            "crate" => Vec::new(),
            "self" => module.to_vec(),
            "super" => module[..module.len().saturating_sub(1)].to_vec(),
            child if children.iter().any(|c| c == child) => {
                let mut m = module.to_vec();
                m.push(child.to_string());
                m
            }
            _ => continue,
        };
        let mut rest = rest;
        while let Some((&"super", more)) = rest.split_first() {
            base.pop();
            rest = more;
        }
        base.extend(rest.iter().map(|s| s.to_string()));
        paths.push(base);
    }
    paths
}

/// Inside a layer too, imports run one way: no file names another whose code names it back,
/// directly or through others (a file naming the modules above it, which contain it, aside).
#[test]
fn no_files_import_each_other_in_a_loop() {
    let modules = module_files();
    let file_of = |path: &[String]| -> Option<usize> {
        (1..=path.len())
            .rev()
            .find_map(|n| modules.iter().position(|(m, _)| m.as_slice() == &path[..n]))
    };
    // file → the files whose modules its code names, its own and those above it aside.
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); modules.len()];
    for (i, (module, file)) in modules.iter().enumerate() {
        let children: Vec<String> = modules
            .iter()
            .filter(|(m, _)| m.len() == module.len() + 1 && m.starts_with(module))
            .map(|(m, _)| m[module.len()].clone())
            .collect();
        for path in named_paths(&code_of(file), module, &children) {
            // A module is part of the modules above it: naming them is not an import.
            if let Some(j) = file_of(&path)
                && !module.starts_with(&modules[j].0)
                && !edges[i].contains(&j)
            {
                edges[i].push(j);
            }
        }
    }
    // Every file that reaches itself again, with the loop it takes (breadth first).
    let mut loops = Vec::new();
    for start in 0..modules.len() {
        let mut came_from: Vec<Option<usize>> = vec![None; modules.len()];
        let mut queue = std::collections::VecDeque::from([start]);
        let mut found = None;
        while let Some(at) = queue.pop_front() {
            for &next in &edges[at] {
                if next == start {
                    found = Some(at);
                    break;
                }
                if came_from[next].is_none() {
                    came_from[next] = Some(at);
                    queue.push_back(next);
                }
            }
            if found.is_some() {
                break;
            }
        }
        let Some(mut at) = found else { continue };
        let mut chain = vec![start];
        while at != start {
            chain.push(at);
            at = came_from[at].unwrap();
        }
        chain.push(start);
        chain.reverse();
        let names: Vec<String> = chain
            .iter()
            .map(|&f| {
                modules[f]
                    .1
                    .strip_prefix(src())
                    .unwrap()
                    .display()
                    .to_string()
            })
            .collect();
        let mut members = chain.clone();
        members.sort();
        members.dedup();
        if !loops
            .iter()
            .any(|(m, _): &(Vec<usize>, String)| *m == members)
        {
            loops.push((members, names.join(" -> ")));
        }
    }
    let loops: Vec<String> = loops.into_iter().map(|(_, text)| text).collect();
    assert!(
        loops.is_empty(),
        "files that import each other in a loop:\n{}",
        loops.join("\n")
    );
}

/// A source file holds one concern: none is over 500 lines (tests aside).
#[test]
fn no_source_file_is_over_500_lines() {
    let mut sources = Vec::new();
    files(&src(), "", &mut sources);
    let mut long: Vec<String> = sources
        .iter()
        .filter(|(_, path)| path.file_name().is_some_and(|n| n != "tests.rs"))
        .filter_map(|(_, path)| {
            let lines = std::fs::read_to_string(path).unwrap().lines().count();
            (lines > 500).then(|| format!("{} ({lines} lines)", path.display()))
        })
        .collect();
    long.sort();
    assert!(
        long.is_empty(),
        "files over 500 lines:\n{}",
        long.join("\n")
    );
}

/// A function does one thing: none is over 100 lines (tests aside).
#[test]
fn no_function_is_over_100_lines() {
    let mut sources = Vec::new();
    files(&src(), "", &mut sources);
    let mut long = Vec::new();
    for (_, path) in &sources {
        let text = std::fs::read_to_string(path).unwrap();
        for (name, line, length) in function_lengths(&text) {
            if length > 100 {
                long.push(format!(
                    "{}:{line} fn {name} ({length} lines)",
                    path.display()
                ));
            }
        }
    }
    long.sort();
    assert!(
        long.is_empty(),
        "functions over 100 lines:\n{}",
        long.join("\n")
    );
}

/// Each function of `code` with a body, tests aside: its name, first line (1-based) and
/// length in lines, from its `fn` to the brace that closes its body.
fn function_lengths(code: &str) -> Vec<(String, usize, usize)> {
    let lines = product_lines(code);
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let (number, line) = lines[i];
        let body = declared_fn(line).zip(item_extent(lines[i..].iter().map(|(_, l)| *l)));
        match body {
            Some((name, (length, true))) => {
                found.push((name, number, length));
                i += length;
            }
            _ => i += 1,
        }
    }
    found
}

/// How many lines the item starting with the first of `lines` takes, and whether it has a
/// body: it ends at a `;` before any brace, or where its first brace closes (`None`: it
/// never does). String and character literals and comments are not counted.
fn item_extent<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<(usize, bool)> {
    let (mut depth, mut opened) = (0i64, false);
    for (n, line) in lines.into_iter().enumerate() {
        let bare = without_literals(line);
        for c in bare.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        if opened && depth <= 0 {
            return Some((n + 1, true));
        }
        if !opened && bare.trim_end().ends_with(';') {
            return Some((n + 1, false));
        }
    }
    None
}

/// The lines of `text` outside the items `#[cfg(test)]` marks (a test module, or a
/// function or import only tests use), with their numbers (1-based).
fn product_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].split("//").next().unwrap_or("").trim() == "#[cfg(test)]" {
            let marked = item_extent(lines[i + 1..].iter().copied());
            i += 1 + marked.map_or(lines.len(), |(n, _)| n);
            continue;
        }
        out.push((i + 1, lines[i]));
        i += 1;
    }
    out
}

/// The name of the function a line declares, if it does.
fn declared_fn(line: &str) -> Option<String> {
    let mut words = line.split_whitespace().peekable();
    while let Some(word) = words.next() {
        let modifier = word.starts_with("pub")
            || matches!(word, "async" | "const" | "unsafe" | "extern" | "\"C\"");
        if word == "fn" {
            let name: String = words
                .next()?
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            return (!name.is_empty()).then_some(name);
        }
        if !modifier {
            return None;
        }
    }
    None
}

/// A line without its string and character literals and its comment.
fn without_literals(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' => {
                // A char literal ('{', '\''), not a lifetime ('a).
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') {
                    chars.next();
                    chars.next();
                    chars.next();
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.next();
                    chars.next();
                }
            }
            '/' if chars.peek() == Some(&'/') => break,
            c => out.push(c),
        }
    }
    out
}

#[test]
fn function_lengths_count_from_fn_to_the_closing_brace() {
    let code = "pub async fn a() {\n    let s = \"}\";\n    let c = '{';\n}\nfn b<'x>(v: &'x str);\nfn c() { }\n";
    assert_eq!(
        function_lengths(code),
        [("a".to_string(), 1, 4), ("c".to_string(), 6, 1)]
    );
}

/// A file's product code: without comments, and without the items `#[cfg(test)]` marks
/// (a test module, or a function or import only tests use).
fn product_code(text: &str) -> String {
    let mut out = String::new();
    for (_, line) in product_lines(text) {
        out.push_str(line.split("//").next().unwrap_or(""));
        out.push('\n');
    }
    out
}

/// The `Result<…, String>` types `code` names.
fn string_errors(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("Result<") {
        let rest = &code[at + "Result<".len()..];
        let (mut depth, mut end, mut commas, mut previous) = (0, None, vec![0], ' ');
        for (i, c) in rest.char_indices() {
            match c {
                '>' if previous == '-' => {}
                '>' if depth == 0 => {
                    end = Some(i);
                    break;
                }
                '<' | '(' | '[' => depth += 1,
                '>' | ')' | ']' => depth -= 1,
                ',' if depth == 0 => commas.push(i + 1),
                _ => {}
            }
            previous = c;
        }
        let Some(end) = end else { continue };
        commas.push(end);
        let arguments: Vec<&str> = commas
            .windows(2)
            .map(|w| rest[w[0]..w[1]].trim_end_matches(',').trim())
            .filter(|a| !a.is_empty())
            .collect();
        if let [_, error] = arguments.as_slice()
            && *error == "String"
        {
            found.push(format!("Result<{}>", &rest[..end]));
        }
    }
    found
}

#[test]
fn the_string_error_check_sees_product_code_only() {
    let text = "fn a() -> Result<Vec<(u8, u8)>, String> {}\n\
                fn b() -> io::Result<String> {}\n\
                fn c() -> Result<Box<dyn Fn() -> u8>, Why> {}\n\
                // fn d() -> Result<(), String>\n\
                #[cfg(test)]\n\
                fn e() -> Result<(), String> {\n    if x { y }\n}\n\
                #[cfg(test)]\n\
                use f::Result<(), String>;\n\
                fn g() -> Result<\n    u8,\n    String,\n> {}\n";
    let found = string_errors(&product_code(text));
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("Vec<(u8, u8)>"), "{found:?}");
    assert!(found[1].contains("u8"), "{found:?}");
}

/// An error is a type that keeps its kind and source, never a bare `String`: no
/// `Result<…, String>` in product code.
#[test]
fn no_product_code_answers_a_bare_string_error() {
    let mut sources = Vec::new();
    files(&src(), "", &mut sources);
    let mut found: Vec<String> = sources
        .iter()
        .filter(|(_, path)| path.file_name().is_some_and(|n| n != "tests.rs"))
        .flat_map(|(_, path)| {
            let text = std::fs::read_to_string(path).unwrap();
            string_errors(&product_code(&text))
                .into_iter()
                .map(|t| format!("{}: {t}", path.display()))
                .collect::<Vec<_>>()
        })
        .collect();
    found.sort();
    assert!(
        found.is_empty(),
        "Result<…, String> in product code (give it an error type):\n{}",
        found.join("\n")
    );
}

/// The channels (Matrix, the web view, webhooks, the notifier) speak the method table
/// through the daemon's door: none of their files names the engine or the domain.
#[test]
fn channels_reach_the_core_only_through_the_door() {
    let daemon = src().join("daemon");
    let mut channel_files = Vec::new();
    for channel in ["matrix", "web", "http", "webhooks", "notify"] {
        let dir = daemon.join(channel);
        if dir.is_dir() {
            files(&dir, channel, &mut channel_files);
        }
        let file = daemon.join(format!("{channel}.rs"));
        if file.is_file() {
            channel_files.push((channel.to_string(), file));
        }
    }
    assert!(channel_files.len() > 10, "{channel_files:?}");
    let reaching: Vec<String> = channel_files
        .iter()
        .filter(|(_, path)| uses(path).iter().any(|m| m == "sessions" || m == "ledger"))
        .map(|(_, path)| path.display().to_string())
        .collect();
    assert!(
        reaching.is_empty(),
        "channel files that reach past the door: {reaching:?}"
    );
}
