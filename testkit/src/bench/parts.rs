//! What the shipping binary is made of: its symbols' sizes by crate, read from the
//! symbol table of the binary as it is linked before it is stripped (the same code as
//! what ships). Each function or object counts once (aliases of one address are one),
//! for the crate its demangled path starts with; a generic of the standard library
//! (`core::ptr::drop_in_place<matrix_sdk::Client>`, `alloc::vec::Vec<T>::push`) counts
//! for the first other crate its path names, whose code it is compiled for. C code (the
//! SQLite of Matrix's store, aws-lc, ring's assembly) is named by its symbols' prefixes.
//! What no symbol covers (unwind tables, relocations, string literals, section padding) is
//! given as one line, so the parts add up to the file.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use anyhow::{Context, Result, bail};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

/// The crates of the standard library: their generics count for the crate they serve.
const STD: [&str; 4] = ["core", "alloc", "std", "compiler_builtins"];

/// A binary's parts.
pub struct Parts {
    /// The file's size.
    pub file: u64,
    /// Bytes by crate (or C library), largest first.
    pub crates: Vec<(String, u64)>,
    /// The file's sections of 100 kB or more (code, literals, unwind tables, relocations,
    /// the symbol table), largest first.
    pub sections: Vec<(String, u64)>,
}

impl Parts {
    /// What no symbol covers.
    pub fn unattributed(&self) -> u64 {
        let covered: u64 = self.crates.iter().map(|(_, bytes)| bytes).sum();
        self.file.saturating_sub(covered)
    }

    /// Bytes by family (the database engine, Matrix, the TLS and crypto stacks, crucible
    /// itself…), largest first.
    pub fn families(&self) -> Vec<(&'static str, u64)> {
        let mut sums: HashMap<&'static str, u64> = HashMap::new();
        for (krate, bytes) in &self.crates {
            *sums.entry(family(krate)).or_default() += bytes;
        }
        let mut families: Vec<_> = sums.into_iter().collect();
        families.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        families
    }
}

/// Reads `path`'s symbol table; an error when it has none (a stripped binary).
pub fn read(path: &Path) -> Result<Parts> {
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let file =
        object::File::parse(&*data).with_context(|| format!("parsing {}", path.display()))?;
    let mut seen = HashSet::new();
    let mut sums: HashMap<String, u64> = HashMap::new();
    for symbol in file.symbols() {
        if symbol.size() == 0
            || !matches!(symbol.kind(), SymbolKind::Text | SymbolKind::Data)
            || !seen.insert(symbol.address())
        {
            continue;
        }
        let Ok(name) = symbol.name() else { continue };
        *sums.entry(owner(name)).or_default() += symbol.size();
    }
    if sums.is_empty() {
        bail!("{} has no symbol table (stripped)", path.display());
    }
    let mut crates: Vec<_> = sums.into_iter().collect();
    crates.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut sections: Vec<(String, u64)> = file
        .sections()
        .filter(|section| section.size() >= 100_000)
        .map(|section| (section.name().unwrap_or("?").to_string(), section.size()))
        .collect();
    sections.sort_by_key(|section| std::cmp::Reverse(section.1));
    Ok(Parts {
        file: data.len() as u64,
        crates,
        sections,
    })
}

/// The crate (or C library) a symbol's code belongs to.
fn owner(symbol: &str) -> String {
    match rustc_demangle::try_demangle(symbol) {
        Ok(demangled) => crate_of(&format!("{demangled:#}")),
        Err(_) => c_library(symbol).to_string(),
    }
}

/// The crate a demangled Rust path's code is for: its first crate, or, for the standard
/// library's generics, the first other crate it names.
fn crate_of(path: &str) -> String {
    let heads = path_heads(path);
    let first = heads.first().copied().unwrap_or("(unnamed)");
    if !STD.contains(&first) {
        return first.to_string();
    }
    heads
        .iter()
        .find(|head| !STD.contains(head))
        .copied()
        .unwrap_or(first)
        .to_string()
}

/// The first segment of every path in `text`, in order: each identifier followed by `::`
/// that does not itself follow `::`.
fn path_heads(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut heads = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !ident(bytes[i]) || bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && ident(bytes[i]) {
            i += 1;
        }
        let after_path = start >= 2 && &bytes[start - 2..start] == b"::";
        let starts_path = bytes.get(i..i + 2) == Some(b"::".as_slice());
        if starts_path && !after_path {
            heads.push(&text[start..i]);
        }
    }
    heads
}

/// The C library a symbol that is not Rust's comes from, by its prefix.
fn c_library(symbol: &str) -> &'static str {
    let lower = symbol.to_ascii_lowercase();
    if lower.starts_with("sqlite3") {
        "SQLite (C)"
    } else if lower.contains("aws_lc") || lower.starts_with("awslc") {
        "aws-lc (C)"
    } else if lower.starts_with("ring_core") {
        "ring (C, assembly)"
    } else {
        // SQLite's, aws-lc's and ring's static functions among them.
        "other C"
    }
}

/// The family a crate is counted in.
fn family(krate: &str) -> &'static str {
    let named = |prefixes: &[&str]| prefixes.iter().any(|p| krate.starts_with(p));
    if krate == "crucible" {
        "crucible"
    } else if named(&["surrealdb", "surrealkv", "surrealmx", "surrealism"]) {
        "SurrealDB (the database engine)"
    } else if named(&["matrix_sdk", "ruma", "vodozemac", "matrix_"]) || krate == "SQLite (C)" {
        "Matrix (the SDK, its crypto and its SQLite store)"
    } else if named(&["object_store"]) {
        "object_store (cloud storage clients)"
    } else if named(&[
        "aws_lc",
        "aws-lc",
        "ring",
        "rustls",
        "webpki",
        "jsonwebtoken",
    ]) {
        "TLS and crypto (rustls, ring, aws-lc)"
    } else if STD.contains(&krate) {
        "the Rust standard library"
    } else {
        "other crates"
    }
}
