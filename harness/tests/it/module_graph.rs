//! No import cycle between the top-level modules of any workspace crate.
//!
//! Every crate target (src/lib.rs, src/main.rs, src/bin/*.rs) is parsed with
//! `syn`, following `mod` declarations to their files. Each `crate::`,
//! `super::` and `self::` path, in `use` trees and anywhere in code, is
//! resolved to the top-level module it names; a name the crate root only
//! re-exports (`pub use a::X;` in lib.rs, then `crate::X`) resolves to the
//! module it comes from, so a re-export cannot hide an edge. A cycle is
//! reported with one `file:line` per edge.
//!
//! Not counted: code gated `#[cfg(test)]` (or `cfg(all(test, …))`), since
//! unit tests may reach across modules freely; paths inside macro
//! invocations (their tokens are not Rust syntax until expanded); and edges
//! from or to the crate root itself.

use proc_macro2::Span;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// Where an edge was seen first.
#[derive(Clone, Debug)]
struct Site {
    file: PathBuf,
    line: usize,
}

/// One crate target's module graph: top-level module -> module it uses -> where.
#[derive(Default)]
struct Graph {
    edges: BTreeMap<String, BTreeMap<String, Site>>,
}

/// Names the crate root itself re-exports, e.g. `pub use gates::Outcome;`
/// makes `crate::Outcome` an edge to `gates`.
type RootExports = BTreeMap<String, String>;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("harness sits inside the workspace")
        .to_path_buf()
}

/// The members of the workspace, as listed in its Cargo.toml.
fn members(root: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).expect("read Cargo.toml");
    let manifest: toml::Table = text.parse().expect("parse Cargo.toml");
    manifest["workspace"]["members"]
        .as_array()
        .expect("workspace.members is a list")
        .iter()
        .map(|m| root.join(m.as_str().expect("a member is a path")))
        .collect()
}

/// The root files of a crate's targets.
fn targets(member: &Path) -> Vec<PathBuf> {
    let src = member.join("src");
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.is_file())
        .collect();
    if let Ok(entries) = std::fs::read_dir(src.join("bin")) {
        let mut bins: Vec<PathBuf> = entries
            .map(|e| e.expect("read src/bin").path())
            .map(|p| if p.is_dir() { p.join("main.rs") } else { p })
            .filter(|p| p.extension().is_some_and(|e| e == "rs") && p.is_file())
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    roots
}

fn parse(file: &Path) -> syn::File {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    syn::parse_file(&text).unwrap_or_else(|e| {
        let at = e.span().start();
        panic!(
            "cannot parse {}:{}:{}: {e}",
            file.display(),
            at.line,
            at.column + 1
        )
    })
}

/// Whether attributes gate an item to test builds only.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>().is_ok_and(|m| match m {
                syn::Meta::Path(p) => p.is_ident("test"),
                syn::Meta::List(l) => {
                    l.path.is_ident("all")
                        && l.tokens
                            .clone()
                            .into_iter()
                            .any(|t| t.to_string() == "test")
                }
                syn::Meta::NameValue(_) => false,
            })
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Walks one file; `module` is the module path from the crate root.
struct Walker<'a> {
    file: PathBuf,
    /// Directory where `mod x;` inside this file looks for x.rs / x/mod.rs.
    child_dir: PathBuf,
    module: Vec<String>,
    tops: &'a BTreeSet<String>,
    exports: &'a RootExports,
    graph: &'a mut Graph,
}

impl Walker<'_> {
    fn top(&self) -> Option<&String> {
        self.module.first()
    }

    /// Record that the current module uses the item at `segments`
    /// (`crate`/`super`/`self` first).
    fn reference(&mut self, segments: &[String], span: Span) {
        let Some(from) = self.top().cloned() else {
            return; // the crate root
        };
        let mut module = self.module.clone();
        let mut rest = segments;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                module.clear();
                rest = &rest[1..];
            }
            Some("super") => {
                while rest.first().is_some_and(|s| s == "super") {
                    module.pop();
                    rest = &rest[1..];
                }
            }
            Some("self") => rest = &rest[1..],
            _ => return, // an extern crate, a prelude name or a local name
        }
        let to = match module.first() {
            Some(top) => Some(top.clone()),
            None => rest.first().and_then(|name| {
                if self.tops.contains(name) {
                    Some(name.clone())
                } else {
                    self.exports.get(name).cloned()
                }
            }),
        };
        if let Some(to) = to.filter(|t| *t != from) {
            let line = span.start().line;
            let file = self.file.clone();
            self.graph
                .edges
                .entry(from)
                .or_default()
                .entry(to)
                .or_insert(Site { file, line });
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.use_leaf(prefix, n.ident.to_string(), n.ident.span()),
            syn::UseTree::Rename(r) => self.use_leaf(prefix, r.ident.to_string(), r.ident.span()),
            syn::UseTree::Glob(g) => {
                let span = g.star_token.spans[0];
                self.reference(&prefix.clone(), span);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn use_leaf(&mut self, prefix: &[String], name: String, span: Span) {
        let mut full = prefix.to_vec();
        // `use crate::a::{self}` names `a` itself.
        if name != "self" {
            full.push(name);
        }
        self.reference(&full, span);
    }

    /// Follow `mod name;` to its file and walk it.
    fn out_of_line(&mut self, item: &syn::ItemMod) {
        let name = item.ident.to_string();
        let file = match path_attr(&item.attrs) {
            Some(p) => self.file.parent().expect("a file has a folder").join(p),
            None => {
                let flat = self.child_dir.join(format!("{name}.rs"));
                if flat.is_file() {
                    flat
                } else {
                    self.child_dir.join(&name).join("mod.rs")
                }
            }
        };
        assert!(
            file.is_file(),
            "{}: `mod {name};` has no file at {}",
            self.file.display(),
            file.display()
        );
        let child_dir = if file.file_name().is_some_and(|f| f == "mod.rs") {
            file.parent().expect("a file has a folder").to_path_buf()
        } else {
            file.with_extension("")
        };
        let mut module = self.module.clone();
        module.push(name);
        let syntax = parse(&file);
        let mut walker = Walker {
            file,
            child_dir,
            module,
            tops: self.tops,
            exports: self.exports,
            graph: self.graph,
        };
        walker.visit_file(&syntax);
    }
}

impl<'ast> Visit<'ast> for Walker<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            _ => &[],
        };
        if !test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs: &[syn::Attribute] = match item {
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Const(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            _ => &[],
        };
        if !test_only(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        match &item.content {
            None => self.out_of_line(item),
            Some((_, items)) => {
                let name = item.ident.to_string();
                self.module.push(name.clone());
                let outer = self.child_dir.clone();
                self.child_dir = outer.join(&name);
                for i in items {
                    self.visit_item(i);
                }
                self.child_dir = outer;
                self.module.pop();
            }
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            let span = path.segments[0].ident.span();
            self.reference(&segments, span);
        }
        syn::visit::visit_path(self, path);
    }
}

/// The root's top-level modules (every `mod` not gated to tests) and the
/// names it re-exports from them.
fn root_names(root: &syn::File) -> (BTreeSet<String>, RootExports) {
    let mut tops = BTreeSet::new();
    let mut uses = Vec::new();
    for item in &root.items {
        match item {
            syn::Item::Mod(m) if !test_only(&m.attrs) => {
                tops.insert(m.ident.to_string());
            }
            syn::Item::Use(u) if !test_only(&u.attrs) => uses.push(&u.tree),
            _ => {}
        }
    }
    let mut exports = RootExports::new();
    fn leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                leaves(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => out.push((prefix.clone(), n.ident.to_string())),
            syn::UseTree::Rename(r) => out.push((prefix.clone(), r.rename.to_string())),
            syn::UseTree::Glob(_) => {}
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| leaves(t, prefix, out)),
        }
    }
    let mut found = Vec::new();
    for tree in uses {
        leaves(tree, &mut Vec::new(), &mut found);
    }
    for (prefix, name) in found {
        let first = prefix
            .iter()
            .find(|s| !matches!(s.as_str(), "crate" | "self"));
        if let Some(top) = first.filter(|t| tops.contains(*t)) {
            exports.insert(name, top.clone());
        }
    }
    (tops, exports)
}

fn graph_of(target: &Path) -> Graph {
    let syntax = parse(target);
    let (tops, exports) = root_names(&syntax);
    let mut graph = Graph::default();
    let mut walker = Walker {
        file: target.to_path_buf(),
        child_dir: target.parent().expect("a file has a folder").to_path_buf(),
        module: Vec::new(),
        tops: &tops,
        exports: &exports,
        graph: &mut graph,
    };
    walker.visit_file(&syntax);
    graph
}

/// Strongly connected components with more than one module (Tarjan).
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g Graph,
        next: usize,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<Vec<String>>,
    }
    fn connect<'g>(s: &mut State<'g>, v: &'g str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        for w in s.graph.edges.get(v).into_iter().flat_map(|e| e.keys()) {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                connect(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.stack.contains(&w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        next: 0,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    let nodes: BTreeSet<&str> = graph
        .edges
        .iter()
        .flat_map(|(a, to)| std::iter::once(a.as_str()).chain(to.keys().map(String::as_str)))
        .collect();
    for v in nodes {
        if !s.index.contains_key(v) {
            connect(&mut s, v);
        }
    }
    s.found
}

/// One line per edge inside each cycle of one target.
fn describe(target: &Path, root: &Path, graph: &Graph, cycles: &[Vec<String>]) -> String {
    let mut text = String::new();
    let shown = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    for component in cycles {
        text += &format!(
            "{}: import cycle among {{{}}}\n",
            shown(target),
            component.join(", ")
        );
        for from in component {
            for (to, site) in &graph.edges[from] {
                if component.contains(to) {
                    text += &format!(
                        "    {from} -> {to}  ({}:{})\n",
                        shown(&site.file),
                        site.line
                    );
                }
            }
        }
    }
    text
}

#[test]
fn no_import_cycle_between_the_top_level_modules_of_any_crate() {
    let root = workspace_root();
    let mut report = String::new();
    let mut checked = 0;
    for member in members(&root) {
        for target in targets(&member) {
            let graph = graph_of(&target);
            checked += 1;
            report += &describe(&target, &root, &graph, &cycles(&graph));
        }
    }
    assert!(checked >= 8, "only {checked} crate targets were found");
    assert!(
        report.is_empty(),
        "move each item to the module that owns it (or to one below both) \
         until no cycle is left:\n{report}"
    );
}

/// The checker itself sees a cycle through `crate::`, `super::`, a use
/// group and a root re-export, and ignores test-only code.
#[test]
fn the_checker_finds_a_planted_cycle() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path();
    std::fs::write(
        src.join("lib.rs"),
        "mod a; mod b; mod c; mod d; pub use d::Exported;",
    )
    .unwrap();
    std::fs::write(src.join("a.rs"), "use crate::{b::X, c};\n").unwrap();
    std::fs::create_dir(src.join("b")).unwrap();
    std::fs::write(src.join("b/mod.rs"), "mod inner;\n").unwrap();
    std::fs::write(
        src.join("b/inner.rs"),
        "pub struct X;\nfn f() -> super::super::a::Y { todo!() }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("c.rs"),
        "fn g(_: crate::Exported) {}\n#[cfg(test)]\nmod tests { use crate::a::Z; }\n",
    )
    .unwrap();
    std::fs::write(src.join("d.rs"), "pub struct Exported;\n").unwrap();
    let graph = graph_of(&src.join("lib.rs"));
    assert_eq!(cycles(&graph), vec![vec!["a".to_string(), "b".to_string()]]);
    let text = describe(&src.join("lib.rs"), src, &graph, &cycles(&graph));
    assert!(text.contains("a -> b  (a.rs:1)"), "{text}");
    assert!(text.contains("b -> a  (b/inner.rs:2)"), "{text}");
    assert!(
        graph.edges["c"].contains_key("d"),
        "the re-export hides c -> d"
    );
    assert!(
        !graph.edges["c"].contains_key("a"),
        "test-only code counted"
    );
}
