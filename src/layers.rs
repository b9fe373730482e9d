//! The test that holds the map of layers in `lib.rs`: it reads every `use crate::…`, `use super::…` and path so
//! written in `src/`, follows re-exports to the file that defines the name, and fails on an import from a
//! top-level module to one on its own rung or above it, and on a circle of imports between files.
//!
//! Comments, string and character literals are not read (a doc link is no import), nor are test modules (a unit
//! test may build a whole core under the module it tests). A module's own descendants are part of it: its imports
//! of them (its `pub use child::…`, its `mod child;`) are no arrow, so a parent that hands on a child's names and
//! the child that uses the parent's shared items are no circle.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Circles left to another change, each with why. A circle found here that is gone from the code fails the test
/// too, so the entry is removed with the circle.
const KNOWN_CIRCLES: &[(&[&str], &str)] = &[];

type ModPath = Vec<String>;

/// One file of `src/`, as read.
struct File {
    /// Relative to `src/`, with `/`.
    name: String,
    module: ModPath,
    /// Every path the file's code names through `crate::` or `super::` (or `self::`), made absolute.
    paths: Vec<ModPath>,
}

#[derive(Default)]
struct Crate {
    files: Vec<File>,
    /// Module (a file's, or an inline `mod x { … }`'s) → the index of the file that holds it.
    modules: HashMap<ModPath, usize>,
    /// Module → the names its `use` items bind (re-exports, and a parent's names its children see), each with the
    /// absolute path it names.
    reexports: HashMap<ModPath, HashMap<String, ModPath>>,
    /// Files declared `#[cfg(test)] mod x;`: tests, not read.
    test_files: HashSet<ModPath>,
}

#[test]
fn no_import_runs_up_the_map_of_layers_and_no_files_import_each_other_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let krate = Crate::read(&src);
    assert!(krate.files.len() > 100, "read the crate's files");
    let rungs = rungs(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let declared = declared_modules(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let mapped: HashSet<&String> = rungs.keys().collect();
    assert_eq!(mapped, declared.iter().collect(), "lib.rs's map of layers names each of its modules once");

    let arrows = krate.arrows();
    let mut upward = Vec::new();
    for (&(from, to), path) in &arrows {
        let (a, b) = (&krate.files[from].module[0], &krate.files[to].module[0]);
        if a != b && rungs[b] <= rungs[a] {
            upward.push(format!("{} -> {} (`{}`)", krate.files[from].name, krate.files[to].name, path.join("::")));
        }
    }
    upward.sort();

    let mut circles: Vec<Vec<String>> = circles(krate.files.len(), arrows.keys().copied())
        .into_iter()
        .map(|circle| {
            let mut names: Vec<String> = circle.iter().map(|&f| krate.files[f].name.clone()).collect();
            names.sort();
            names
        })
        .collect();
    circles.sort();
    let known: Vec<Vec<String>> =
        KNOWN_CIRCLES.iter().map(|(files, _)| files.iter().map(|f| f.to_string()).collect()).collect();
    let show = |circles: &[Vec<String>]| circles.iter().map(|c| c.join(" <-> ")).collect::<Vec<_>>().join("\n");
    let new: Vec<_> = circles.iter().filter(|c| !known.contains(c)).cloned().collect();
    let gone: Vec<_> = known.iter().filter(|c| !circles.contains(c)).cloned().collect();
    assert!(
        upward.is_empty() && new.is_empty() && gone.is_empty(),
        "imports that do not run down lib.rs's map of layers:\n{}\n\nfiles that import each other in a circle:\n{}\n\n\
         known circles that are gone (remove them from KNOWN_CIRCLES):\n{}",
        upward.join("\n"),
        show(&new),
        show(&gone)
    );
}

/// The test reads what it is meant to: a circle, an upward import, a doc link and a test module.
#[test]
fn the_reader_sees_imports_and_skips_comments_strings_and_tests() {
    let code = code_of(
        "use crate::a::{self, b::C as D}; // crate::x::y\nlet s = \"crate::q\"; let c = '{'; let q = '\\'';\n\
         #[cfg(test)]\nmod tests { use crate::z; }\nfn f<'a>() { super::e::f(); }",
    );
    let (paths, ..) = read_code(&code, &["m".into(), "n".into()]);
    let paths: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(paths, ["a", "a::b::C", "m::e::f"]);
    let found = circles(4, [(0, 1), (1, 2), (2, 0), (2, 3)]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].iter().collect::<HashSet<_>>(), HashSet::from([&0, &1, &2]));
}

/// The map's rungs, from `lib.rs`'s doc: the numbered lines under "# Layers", top first; each module → its rung.
fn rungs(lib: &str) -> HashMap<String, usize> {
    let mut rungs = HashMap::new();
    let mut inside = false;
    for line in lib.lines().map_while(|l| l.strip_prefix("//!")) {
        let line = line.trim();
        if line.starts_with('#') {
            inside = line == "# Layers";
            continue;
        }
        let Some((number, modules)) = line.split_once(". ") else { continue };
        let Ok(number) = number.parse::<usize>() else { continue };
        if !inside {
            continue;
        }
        for module in modules.split(',') {
            let module = module.trim().trim_matches('`');
            assert!(rungs.insert(module.to_owned(), number).is_none(), "{module} is on two rungs");
        }
    }
    assert!(rungs.len() > 10, "read lib.rs's map of layers");
    rungs
}

/// The modules `lib.rs` declares, except those for tests.
fn declared_modules(lib: &str) -> HashSet<String> {
    let code = code_of(lib);
    let mut test = false;
    let mut declared = HashSet::new();
    for line in code.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("pub mod ").or_else(|| line.strip_prefix("mod "))
            && !test
        {
            declared.insert(name.trim_end_matches(';').to_owned());
        }
        test = line == "#[cfg(test)]";
    }
    declared
}

impl Crate {
    fn read(src: &Path) -> Self {
        let mut krate = Crate::default();
        let mut paths = Vec::new();
        walk(src, &mut paths);
        paths.sort();
        for path in paths {
            let name = path.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/");
            if name == "lib.rs" || name == "main.rs" {
                continue;
            }
            let module = module_of(&name);
            let code = code_of(&std::fs::read_to_string(&path).unwrap());
            let (paths, inline, reexports, test_children) = read_code(&code, &module);
            let index = krate.files.len();
            krate.modules.insert(module.clone(), index);
            for m in inline {
                krate.modules.insert(m, index);
            }
            for (module, names) in reexports {
                krate.reexports.entry(module).or_default().extend(names);
            }
            krate.test_files.extend(test_children);
            krate.files.push(File { name, module, paths });
        }
        krate
    }

    /// file → file, each with one path that draws it; none into a file's own module or its descendants, none
    /// from or to a test file.
    fn arrows(&self) -> HashMap<(usize, usize), ModPath> {
        let mut arrows = HashMap::new();
        for (from, file) in self.files.iter().enumerate() {
            if self.is_test(&file.module) {
                continue;
            }
            for path in &file.paths {
                let Some(to) = self.file_of(path, 0) else { continue };
                let target = &self.files[to].module;
                if target.starts_with(&file.module) || self.is_test(target) {
                    continue;
                }
                arrows.entry((from, to)).or_insert_with(|| path.clone());
            }
        }
        arrows
    }

    fn is_test(&self, module: &[String]) -> bool {
        (1..=module.len()).any(|n| self.test_files.contains(&module[..n]))
    }

    /// The file that defines what `path` names: the longest module it starts with, through that module's
    /// re-export of the next name if it has one.
    fn file_of(&self, path: &[String], depth: usize) -> Option<usize> {
        assert!(depth < 16, "re-exports in a loop at {}", path.join("::"));
        let n = (0..=path.len()).rev().find(|&n| self.modules.contains_key(&path[..n]))?;
        if let Some(target) = path.get(n).and_then(|name| self.reexports.get(&path[..n])?.get(name)) {
            let mut target = target.clone();
            target.extend_from_slice(&path[n + 1..]);
            if let Some(file) = self.file_of(&target, depth + 1) {
                return Some(file);
            }
        }
        self.modules.get(&path[..n]).copied()
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `actors/users/mod.rs` → `actors::users`; `actors/remote.rs` → `actors::remote`.
fn module_of(name: &str) -> ModPath {
    let mut module: ModPath = name.trim_end_matches(".rs").split('/').map(str::to_owned).collect();
    if module.last().is_some_and(|m| m == "mod") {
        module.pop();
    }
    module
}

/// `text` with comments, string and character literals blanked out (line breaks kept).
fn code_of(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, skipped: &[char]| {
        out.extend(skipped.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let after_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        let end = if c == '/' && next == Some('/') {
            chars[i..].iter().position(|&c| c == '\n').map_or(chars.len(), |n| i + n)
        } else if c == '/' && next == Some('*') {
            let (mut depth, mut j) = (0usize, i);
            loop {
                if chars[j] == '/' && chars.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if chars[j] == '*' && chars.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break j;
                    }
                } else {
                    j += 1;
                }
            }
        } else if c == 'r' && !after_ident && matches!(next, Some('"' | '#')) {
            let hashes = chars[i + 1..].iter().take_while(|&&c| c == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let mut j = i + 2 + hashes;
            while !(chars[j] == '"' && chars[j + 1..].iter().take(hashes).filter(|&&c| c == '#').count() == hashes) {
                j += 1;
            }
            j + 1 + hashes
        } else if c == '"' {
            let mut j = i + 1;
            while chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if c == '\'' && next == Some('\\') {
            // The escaped character may itself be a quote (`'\''`).
            i + 3 + chars[i + 3..].iter().position(|&c| c == '\'').unwrap() + 1
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i + 3
        } else {
            out.push(c);
            i += 1;
            continue;
        };
        blank(&mut out, &chars[i..end]);
        i = end;
    }
    out
}

fn tokens(code: &str) -> Vec<&str> {
    let mut tokens = Vec::new();
    let mut rest = code;
    while let Some(c) = rest.chars().next() {
        let len = if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
            continue;
        } else if c.is_alphanumeric() || c == '_' {
            rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len())
        } else if rest.starts_with("::") {
            2
        } else {
            c.len_utf8()
        };
        tokens.push(&rest[..len]);
        rest = &rest[len..];
    }
    tokens
}

/// What a file's code (as [`code_of`] leaves it) names and declares, in `module`: the absolute paths it names, its
/// inline modules, its re-exports by module, and its children declared for tests only.
#[allow(clippy::type_complexity)]
fn read_code(
    code: &str,
    module: &[String],
) -> (Vec<ModPath>, Vec<ModPath>, HashMap<ModPath, HashMap<String, ModPath>>, Vec<ModPath>) {
    let t = tokens(code);
    let (mut paths, mut inline, mut reexports, mut test_children) =
        (Vec::new(), Vec::new(), HashMap::<ModPath, HashMap<String, ModPath>>::new(), Vec::new());
    // The inline modules the reader is in, each with the brace depth its body opened at.
    let mut stack: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut for_tests = false;
    let mut i = 0;
    let here = |stack: &[(String, usize)]| -> ModPath {
        module.iter().cloned().chain(stack.iter().map(|(m, _)| m.clone())).collect()
    };
    while i < t.len() {
        match t[i] {
            "#" if t[i + 1..].starts_with(&["[", "cfg", "(", "test", ")", "]"]) => {
                for_tests = true;
                i += 7;
                continue;
            }
            "mod" if i + 2 < t.len() => {
                let name = t[i + 1].to_owned();
                if t[i + 2] == ";" && for_tests {
                    test_children.push(here(&stack).into_iter().chain([name]).collect());
                } else if t[i + 2] == "{" && for_tests {
                    i = closing_brace(&t, i + 2) + 1;
                    for_tests = false;
                    continue;
                } else if t[i + 2] == "{" {
                    depth += 1;
                    stack.push((name, depth));
                    inline.push(here(&stack));
                    i += 3;
                    continue;
                }
            }
            // Not `impl Trait + use<…>` (precise capturing), which names no path.
            "use" if t.get(i + 1) != Some(&"<") => {
                let end = i + t[i..].iter().position(|&t| t == ";").unwrap();
                let mut tree = Vec::new();
                use_tree(&t[i + 1..end], &mut 0, Vec::new(), &mut tree);
                let here = here(&stack);
                for (path, name) in tree {
                    let Some(path) = absolute(&path, &here) else { continue };
                    // Any `use` binds the name in the module (a private one for its children): `super::Name`
                    // reaches the file that defines it through it.
                    if name != "*" {
                        reexports.entry(here.clone()).or_default().insert(name, path.clone());
                    }
                    paths.push(path);
                }
                i = end;
            }
            "crate" | "super" | "self" if t.get(i + 1) == Some(&"::") && (i == 0 || t[i - 1] != "::") => {
                let mut path = vec![t[i].to_owned()];
                let mut j = i + 1;
                while t.get(j) == Some(&"::") && t.get(j + 1).is_some_and(|s| is_ident(s)) {
                    path.push(t[j + 1].to_owned());
                    j += 2;
                }
                paths.extend(absolute(&path, &here(&stack)));
                i = j;
                continue;
            }
            "{" => depth += 1,
            "}" => {
                if stack.last().is_some_and(|&(_, d)| d == depth) {
                    stack.pop();
                }
                depth -= 1;
            }
            _ => {}
        }
        if matches!(t[i], ";" | "{" | "}") {
            for_tests = false;
        }
        i += 1;
    }
    (paths, inline, reexports, test_children)
}

fn is_ident(s: &str) -> bool {
    s.chars().all(|c| c.is_alphanumeric() || c == '_') && s != "self"
}

fn closing_brace(t: &[&str], open: usize) -> usize {
    let mut depth = 0;
    for (j, &token) in t.iter().enumerate().skip(open) {
        match token {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced braces")
}

/// The paths a use tree names, each with the name it binds (`*` for a glob).
fn use_tree(t: &[&str], i: &mut usize, mut path: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    loop {
        match t.get(*i).copied() {
            Some("{") => {
                *i += 1;
                while t[*i] != "}" {
                    use_tree(t, i, path.clone(), out);
                    if t[*i] == "," {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            Some("*") => {
                *i += 1;
                out.push((path, "*".into()));
                return;
            }
            Some(segment) => {
                *i += 1;
                // `{self, …}` names the prefix itself; a leading `self::` is the current module.
                if segment != "self" || path.is_empty() {
                    path.push(segment.to_owned());
                }
                if t.get(*i) == Some(&"::") {
                    *i += 1;
                    continue;
                }
                let mut name = path.last().cloned().unwrap_or_default();
                if t.get(*i) == Some(&"as") {
                    name = t[*i + 1].to_owned();
                    *i += 2;
                }
                out.push((path, name));
                return;
            }
            None => return,
        }
    }
}

/// `path` as written in `here`, from the crate's root.
fn absolute(path: &[String], here: &[String]) -> Option<ModPath> {
    let mut base: ModPath = here.to_vec();
    let mut rest = path;
    match path.first()?.as_str() {
        "crate" => {
            base.clear();
            rest = &path[1..];
        }
        "self" => rest = &path[1..],
        "super" => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        // A relative path: a child of `here` (its own descendant, no arrow), another crate's, or a local name's;
        // resolved as a child, it finds no file but `here`'s own.
        _ => {}
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The circles (strongly connected components of more than one file) of a graph of `n` files (Tarjan).
fn circles(n: usize, arrows: impl IntoIterator<Item = (usize, usize)>) -> Vec<Vec<usize>> {
    let mut next = vec![Vec::new(); n];
    for (a, b) in arrows {
        next[a].push(b);
    }
    struct Walk {
        next: Vec<Vec<usize>>,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on_stack: Vec<bool>,
        count: usize,
        found: Vec<Vec<usize>>,
    }
    fn visit(w: &mut Walk, v: usize) {
        w.index[v] = Some(w.count);
        w.low[v] = w.count;
        w.count += 1;
        w.stack.push(v);
        w.on_stack[v] = true;
        for k in 0..w.next[v].len() {
            let u = w.next[v][k];
            match w.index[u] {
                None => {
                    visit(w, u);
                    w.low[v] = w.low[v].min(w.low[u]);
                }
                Some(index) if w.on_stack[u] => w.low[v] = w.low[v].min(index),
                Some(_) => {}
            }
        }
        if Some(w.low[v]) == w.index[v] {
            let mut component = Vec::new();
            loop {
                let u = w.stack.pop().unwrap();
                w.on_stack[u] = false;
                component.push(u);
                if u == v {
                    break;
                }
            }
            if component.len() > 1 {
                w.found.push(component);
            }
        }
    }
    let mut w = Walk {
        next,
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on_stack: vec![false; n],
        count: 0,
        found: Vec::new(),
    };
    for v in 0..n {
        if w.index[v].is_none() {
            visit(&mut w, v);
        }
    }
    w.found
}
