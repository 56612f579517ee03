//! No import cycle between modules at any depth inside any workspace crate.
//!
//! Every crate target (src/lib.rs, src/main.rs, src/bin/*.rs) is parsed with
//! `syn`, following `mod` declarations to their files. Each `crate::`,
//! `super::`, `self::` and child-module path, in `use` trees and anywhere in
//! code, is resolved to the deepest module it names; a name a module only
//! imports or re-exports (`pub use a::X;` in lib.rs or a `mod.rs`, then
//! `crate::X` or `super::X`) resolves to the module it comes from, so a
//! re-export cannot hide an edge.
//!
//! A reference from module `p::a::…` to module `p::b::…` is an edge `a -> b`
//! between the siblings `a` and `b` of their deepest common parent `p` (the
//! crate root's top-level modules are the siblings of the root). The modules
//! of each parent must form a directed acyclic graph; a cycle is reported
//! with one `file:line` per edge. A module's edges to its own ancestors and
//! descendants are not sibling edges and are not counted (a parent declares
//! its children and its children may use what it holds).
//!
//! Inside a macro invocation (maud's `html!`, `format!`, a crate's own
//! `out!`), whose tokens are not Rust syntax until expanded, every run of
//! `name::name…` tokens is read as a path and resolved the same way, so a
//! reference written in a template counts like one in code.
//!
//! Not counted: code gated `#[cfg(test)]` (or `cfg(all(test, …))`), since
//! unit tests may reach across modules freely.

use proc_macro2::Span;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// Where an edge was seen first.
#[derive(Clone, Debug)]
pub(crate) struct Site {
    pub(crate) file: PathBuf,
    pub(crate) line: usize,
}

/// A module's path from the crate root (empty: the root).
pub(crate) type ModPath = Vec<String>;

/// The graph among the child modules of one parent: child -> sibling it
/// uses -> where that was seen first.
#[derive(Default)]
pub(crate) struct Graph {
    pub(crate) edges: BTreeMap<String, BTreeMap<String, Site>>,
}

/// What one walk of a crate target collects, resolved once it is complete.
#[derive(Default)]
struct Crate {
    /// Every module not gated to tests, the root included.
    modules: BTreeSet<ModPath>,
    /// (module, name) -> the path, as written, that a `use` in that module
    /// binds to the name.
    imports: BTreeMap<(ModPath, String), Vec<String>>,
    /// Every path used: (module it is used in, path as written, where).
    uses: Vec<(ModPath, Vec<String>, Site)>,
}

pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("harness sits inside the workspace")
        .to_path_buf()
}

/// The members of the workspace, as listed in its Cargo.toml.
pub(crate) fn members(root: &Path) -> Vec<PathBuf> {
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
pub(crate) fn targets(member: &Path) -> Vec<PathBuf> {
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
    module: ModPath,
    krate: &'a mut Crate,
}

impl Walker<'_> {
    /// Record that the current module uses the path `segments`.
    fn reference(&mut self, segments: &[String], span: Span) {
        let site = Site {
            file: self.file.clone(),
            line: span.start().line,
        };
        self.krate
            .uses
            .push((self.module.clone(), segments.to_vec(), site));
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                self.use_leaf(prefix, &name, name.clone(), n.ident.span())
            }
            syn::UseTree::Rename(r) => self.use_leaf(
                prefix,
                &r.ident.to_string(),
                r.rename.to_string(),
                r.ident.span(),
            ),
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

    /// `use prefix::name as alias;`
    fn use_leaf(&mut self, prefix: &[String], name: &str, alias: String, span: Span) {
        let mut full = prefix.to_vec();
        // `use crate::a::{self}` names `a` itself.
        let alias = if name == "self" {
            match prefix.last() {
                Some(last) if alias == "self" => last.clone(),
                _ => alias,
            }
        } else {
            full.push(name.to_string());
            alias
        };
        self.krate
            .imports
            .insert((self.module.clone(), alias), full.clone());
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
        self.krate.modules.insert(module.clone());
        let syntax = parse(&file);
        let mut walker = Walker {
            file,
            child_dir,
            module,
            krate: self.krate,
        };
        walker.visit_file(&syntax);
    }
}

impl Walker<'_> {
    /// Every `a::b…` run of tokens in a macro's input (groups entered), as
    /// a path used here; an absolute `::a::b` is an extern crate's.
    fn macro_paths(&mut self, tokens: proc_macro2::TokenStream) {
        use proc_macro2::{Spacing, TokenTree};
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let colons = |a: Option<&TokenTree>, b: Option<&TokenTree>| {
            matches!((a, b), (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':')
        };
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => {
                    self.macro_paths(g.stream());
                    i += 1;
                }
                TokenTree::Ident(first) => {
                    let absolute = i >= 2 && colons(trees.get(i - 2), trees.get(i - 1));
                    let mut segments = vec![first.to_string()];
                    let mut j = i + 1;
                    while colons(trees.get(j), trees.get(j + 1)) {
                        let Some(TokenTree::Ident(next)) = trees.get(j + 2) else {
                            break;
                        };
                        segments.push(next.to_string());
                        j += 3;
                    }
                    if segments.len() > 1 && !absolute {
                        self.reference(&segments, first.span());
                    }
                    i = j;
                }
                _ => i += 1,
            }
        }
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
                self.krate.modules.insert(self.module.clone());
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

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.macro_paths(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
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

impl Crate {
    /// The path `segments`, written in module `at`, from the crate root;
    /// `None` for an extern crate, a prelude name or a local name.
    fn absolute(&self, at: &[String], segments: &[String]) -> Option<Vec<String>> {
        let mut module = at.to_vec();
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
            Some(first) => {
                let mut child = module.clone();
                child.push(first.to_string());
                if !self.modules.contains(&child) {
                    return None;
                }
            }
            None => return None,
        }
        module.extend(rest.iter().cloned());
        Some(module)
    }

    /// The deepest module an absolute path names, through the imports and
    /// re-exports on its way (`crate::X` where lib.rs has `pub use a::X`).
    fn target(&self, path: &[String], depth: usize) -> ModPath {
        let mut module = ModPath::new();
        for (i, segment) in path.iter().enumerate() {
            let mut child = module.clone();
            child.push(segment.clone());
            if self.modules.contains(&child) {
                module = child;
                continue;
            }
            let imported = self.imports.get(&(module.clone(), segment.clone()));
            if let Some(to) = imported.filter(|_| depth < 16)
                && let Some(mut through) = self.absolute(&module, to)
            {
                through.extend(path[i + 1..].iter().cloned());
                return self.target(&through, depth + 1);
            }
            break;
        }
        module
    }

    /// The sibling graphs, keyed by their parent module.
    fn graphs(&self) -> BTreeMap<ModPath, Graph> {
        let mut graphs = BTreeMap::<ModPath, Graph>::new();
        for (from, segments, site) in &self.uses {
            let Some(path) = self.absolute(from, segments) else {
                continue;
            };
            let to = self.target(&path, 0);
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue; // the same module, an ancestor or a descendant
            }
            graphs
                .entry(from[..common].to_vec())
                .or_default()
                .edges
                .entry(from[common].clone())
                .or_default()
                .entry(to[common].clone())
                .or_insert_with(|| site.clone());
        }
        graphs
    }
}

/// The module graphs of one crate target, keyed by parent module.
pub(crate) fn graphs_of(target: &Path) -> BTreeMap<ModPath, Graph> {
    walk(target).graphs()
}

/// The top-level modules of one crate target (test-only ones left out).
pub(crate) fn top_modules(target: &Path) -> BTreeSet<String> {
    walk(target)
        .modules
        .into_iter()
        .filter(|m| m.len() == 1)
        .map(|mut m| m.remove(0))
        .collect()
}

/// Every module and path use of one crate target, its `mod` files followed.
fn walk(target: &Path) -> Crate {
    let syntax = parse(target);
    let mut krate = Crate::default();
    krate.modules.insert(ModPath::new());
    let mut walker = Walker {
        file: target.to_path_buf(),
        child_dir: target.parent().expect("a file has a folder").to_path_buf(),
        module: ModPath::new(),
        krate: &mut krate,
    };
    walker.visit_file(&syntax);
    krate
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

/// A module path as the report shows it (`crate` for the root).
fn shown_module(path: &[String]) -> String {
    if path.is_empty() {
        "crate".to_string()
    } else {
        path.join("::")
    }
}

/// One line per edge inside each cycle among the children of `parent`.
fn describe(
    target: &Path,
    root: &Path,
    parent: &[String],
    graph: &Graph,
    cycles: &[Vec<String>],
) -> String {
    let mut text = String::new();
    let shown = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    let full = |child: &str| {
        let mut path = parent.to_vec();
        path.push(child.to_string());
        path.join("::")
    };
    for component in cycles {
        text += &format!(
            "{}: import cycle inside `{}` among {{{}}}\n",
            shown(target),
            shown_module(parent),
            component.join(", ")
        );
        for from in component {
            for (to, site) in &graph.edges[from] {
                if component.contains(to) {
                    text += &format!(
                        "    {} -> {}  ({}:{})\n",
                        full(from),
                        full(to),
                        shown(&site.file),
                        site.line
                    );
                }
            }
        }
    }
    text
}

/// The cycles known when the check went below the top level, each named by
/// its crate target, the parent module and its members. Each is a debt:
/// break it and delete its line (a line whose cycle is gone fails the test,
/// and so does any cycle not listed here, or one that grew).
const KNOWN_CYCLES: &[(&str, &str, &[&str])] = &[];

/// A cycle named by its crate target, its parent module and its members.
type CycleKey = (String, String, Vec<String>);

/// Every cycle of every crate target, with the report of its edges, and the
/// number of targets checked.
fn workspace_cycles(root: &Path) -> (usize, Vec<(CycleKey, String)>) {
    let mut found = Vec::new();
    let mut checked = 0;
    for member in members(root) {
        for target in targets(&member) {
            checked += 1;
            let shown = target
                .strip_prefix(root)
                .unwrap_or(&target)
                .display()
                .to_string();
            for (parent, graph) in graphs_of(&target) {
                for component in cycles(&graph) {
                    let text = describe(
                        &target,
                        root,
                        &parent,
                        &graph,
                        std::slice::from_ref(&component),
                    );
                    found.push(((shown.clone(), shown_module(&parent), component), text));
                }
            }
        }
    }
    (checked, found)
}

#[test]
fn no_import_cycle_between_the_modules_of_any_crate_at_any_depth() {
    let root = workspace_root();
    let (checked, found) = workspace_cycles(&root);
    assert!(checked >= 8, "only {checked} crate targets were found");
    let known: BTreeSet<CycleKey> = KNOWN_CYCLES
        .iter()
        .map(|(target, parent, members)| {
            let members = members.iter().map(|m| m.to_string()).collect();
            (target.to_string(), parent.to_string(), members)
        })
        .collect();
    let report: String = found
        .iter()
        .filter(|(key, _)| !known.contains(key))
        .map(|(_, text)| text.as_str())
        .collect();
    assert!(
        report.is_empty(),
        "move each item to the module that owns it (or to one below both) \
         until no cycle is left:\n{report}"
    );
    let seen: BTreeSet<_> = found.into_iter().map(|(key, _)| key).collect();
    let gone: Vec<_> = known.difference(&seen).collect();
    assert!(
        gone.is_empty(),
        "these cycles are broken: delete them from KNOWN_CYCLES: {gone:?}"
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
    let graphs = graphs_of(&src.join("lib.rs"));
    let top = &graphs[&ModPath::new()];
    assert_eq!(cycles(top), vec![vec!["a".to_string(), "b".to_string()]]);
    let text = describe(&src.join("lib.rs"), src, &[], top, &cycles(top));
    assert!(text.contains("inside `crate` among {a, b}"), "{text}");
    assert!(text.contains("a -> b  (a.rs:1)"), "{text}");
    assert!(text.contains("b -> a  (b/inner.rs:2)"), "{text}");
    assert!(
        top.edges["c"].contains_key("d"),
        "the re-export hides c -> d"
    );
    assert!(!top.edges["c"].contains_key("a"), "test-only code counted");
}

/// A path written inside a macro's input counts: a template's `(…)` group
/// and a formatting macro's argument close a cycle, an absolute `::b::X`
/// (an extern crate's) does not.
#[test]
fn the_checker_reads_paths_inside_macro_invocations() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path();
    std::fs::write(
        src.join("lib.rs"),
        "mod a; mod b; mod c;
",
    )
    .unwrap();
    std::fs::write(
        src.join("a.rs"),
        "pub struct Y;
fn page() { html! { div { p { (super::b::title()) } } } }
",
    )
    .unwrap();
    std::fs::write(
        src.join("b.rs"),
        "pub fn title() {}
fn f() { println!(\"{:?}\", crate::a::Y); }
",
    )
    .unwrap();
    std::fs::write(
        src.join("c.rs"),
        "fn g() { out!(\"{}\", ::b::X); }
",
    )
    .unwrap();
    let graphs = graphs_of(&src.join("lib.rs"));
    let top = &graphs[&ModPath::new()];
    assert_eq!(cycles(top), vec![vec!["a".to_string(), "b".to_string()]]);
    let text = describe(&src.join("lib.rs"), src, &[], top, &cycles(top));
    assert!(text.contains("a -> b  (a.rs:2)"), "{text}");
    assert!(text.contains("b -> a  (b.rs:2)"), "{text}");
    assert!(
        !top.edges.get("c").is_some_and(|e| e.contains_key("b")),
        "an absolute path counted"
    );
}

/// A cycle between two modules deep inside one top-level module (the shape
/// of the whisper worker's engine, patch and external encoder, once) is
/// found among the siblings of their parent, through a parent's import, a
/// `self::` path and a child-relative `use`, and named edge by edge; the
/// same edges one level up are not a cycle between the top-level modules.
#[test]
fn the_checker_finds_a_planted_cycle_below_the_top_level() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "pub mod worker;\nmod other;\n").unwrap();
    std::fs::write(src.join("other.rs"), "use crate::worker::engine::Engine;\n").unwrap();
    std::fs::create_dir(src.join("worker")).unwrap();
    std::fs::write(
        src.join("worker/mod.rs"),
        "pub mod engine;\npub mod hooks;\nmod plain;\nuse hooks::Plan;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("worker/engine.rs"),
        "pub struct Engine;\nfn load() { let _ = super::Plan::default(); }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("worker/hooks.rs"),
        "pub mod inner {\n    pub fn raw(_: &crate::worker::engine::Engine) {}\n}\n\
         pub use self::inner::raw;\n#[derive(Default)] pub struct Plan;\n",
    )
    .unwrap();
    std::fs::write(src.join("worker/plain.rs"), "use super::engine::Engine;\n").unwrap();
    let graphs = graphs_of(&src.join("lib.rs"));
    let top = &graphs[&ModPath::new()];
    assert!(cycles(top).is_empty(), "{:?}", cycles(top));
    let worker = &graphs[&vec!["worker".to_string()]];
    assert_eq!(
        cycles(worker),
        vec![vec!["engine".to_string(), "hooks".to_string()]]
    );
    let text = describe(
        &src.join("lib.rs"),
        src,
        &["worker".to_string()],
        worker,
        &cycles(worker),
    );
    assert!(
        text.contains("lib.rs: import cycle inside `worker` among {engine, hooks}"),
        "{text}"
    );
    assert!(
        text.contains("worker::engine -> worker::hooks  (worker/engine.rs:2)"),
        "{text}"
    );
    assert!(
        text.contains("worker::hooks -> worker::engine  (worker/hooks.rs:2)"),
        "{text}"
    );
    assert!(
        worker.edges["plain"].contains_key("engine"),
        "plain -> engine missed"
    );
}
