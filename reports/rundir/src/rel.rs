//! Paths inside a run directory: a list of plain names, never `..`, never
//! absolute, never empty. Every path the crate opens is one of these, so a
//! manifest entry, an arm id or a file name cannot reach outside the run.

use std::fmt;

/// Why a name or path is not acceptable inside a run directory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a plain path inside a run directory: {reason}")]
pub struct BadPath {
    /// The path as given.
    pub text: String,
    /// Why it is refused (absolute, `..`, empty component, …).
    pub reason: &'static str,
}

/// The longest single name accepted (most file systems allow 255 bytes).
pub const MAX_NAME_BYTES: usize = 255;

/// Check one path component: non-empty, not `.` or `..`, no `/` or NUL.
pub fn check_name(name: &str) -> Result<(), BadPath> {
    let bad = |reason| {
        Err(BadPath {
            text: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("an empty name");
    }
    if name == "." || name == ".." {
        return bad("`.` and `..` are not names");
    }
    if name.contains('/') {
        return bad("a name cannot contain `/`");
    }
    if name.contains('\0') {
        return bad("a name cannot contain NUL");
    }
    if name.len() > MAX_NAME_BYTES {
        return bad("longer than 255 bytes");
    }
    Ok(())
}

/// A relative path inside a run directory.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rel {
    parts: Vec<String>,
}

impl Rel {
    /// The run directory itself.
    pub fn root() -> Rel {
        Rel::default()
    }

    /// A path of one known-good name (the constants of [`crate::names`]).
    pub fn file(name: &str) -> Rel {
        Rel::root().join(name)
    }

    /// `self/name`. Names come from [`crate::names`], from validated arm ids
    /// or from [`Rel::parse`]; an invalid one here is a programming error and
    /// yields a path that no file can have (`<invalid>`), never an escape.
    pub fn join(&self, name: &str) -> Rel {
        let mut parts = self.parts.clone();
        match check_name(name) {
            Ok(()) => parts.push(name.to_string()),
            Err(_) => {
                debug_assert!(false, "invalid path component {name:?}");
                parts.push("\u{fffd}invalid".to_string());
            }
        }
        Rel { parts }
    }

    /// `self/name` for a name from outside (a tool, a record): checked.
    pub fn try_join(&self, name: &str) -> Result<Rel, BadPath> {
        check_name(name)?;
        Ok(self.join(name))
    }

    /// Parse a `/`-separated relative path (a manifest entry, a seal entry).
    pub fn parse(text: &str) -> Result<Rel, BadPath> {
        if text.starts_with('/') {
            return Err(BadPath {
                text: text.to_string(),
                reason: "an absolute path",
            });
        }
        let mut rel = Rel::root();
        for part in text.split('/') {
            check_name(part).map_err(|e| BadPath {
                text: text.to_string(),
                reason: e.reason,
            })?;
            rel.parts.push(part.to_string());
        }
        Ok(rel)
    }

    /// The path's plain names, outermost first.
    pub fn components(&self) -> &[String] {
        &self.parts
    }

    /// True for the run directory itself (no component).
    pub fn is_root(&self) -> bool {
        self.parts.is_empty()
    }

    /// The last name, if any.
    pub fn name(&self) -> Option<&str> {
        self.parts.last().map(String::as_str)
    }

    /// Everything but the last name.
    pub fn parent(&self) -> Rel {
        let mut parts = self.parts.clone();
        parts.pop();
        Rel { parts }
    }

    /// Whether `self` lies inside `dir` (or is it).
    pub fn starts_with(&self, dir: &Rel) -> bool {
        self.parts.starts_with(&dir.parts)
    }
}

impl fmt::Display for Rel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.parts.is_empty() {
            return f.write_str(".");
        }
        f.write_str(&self.parts.join("/"))
    }
}

impl fmt::Debug for Rel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Rel({self})")
    }
}

/// Why an arm id is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("arm id `{id}` {reason}")]
pub struct BadArmId {
    /// The id as given.
    pub id: String,
    /// Why it is refused.
    pub reason: &'static str,
}

/// The longest arm id accepted.
pub const MAX_ARM_ID_BYTES: usize = 64;

/// An arm id is one plain path component: ASCII letters, digits, `.`, `_`
/// and `-`, starting with a letter or digit, at most 64 bytes. That rules
/// out `.`, `..`, hidden names and anything a file system treats specially.
pub fn check_arm_id(id: &str) -> Result<(), BadArmId> {
    let bad = |reason| {
        Err(BadArmId {
            id: id.to_string(),
            reason,
        })
    };
    if id.is_empty() {
        return bad("is empty");
    }
    if id.len() > MAX_ARM_ID_BYTES {
        return bad("is longer than 64 bytes");
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return bad("may hold only ASCII letters, digits, '.', '_' and '-'");
    }
    if !id.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return bad("must start with a letter or digit");
    }
    Ok(())
}

/// `arms/<id>` for an id that passed [`check_arm_id`].
pub fn arm_dir(id: &str) -> Result<Rel, BadArmId> {
    check_arm_id(id)?;
    Ok(Rel::file(crate::names::ARMS).join(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_refuses_every_way_out() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "arms/../../x",
            "a//b",
            "a/./b",
            "a/",
            "a\0b",
        ] {
            assert!(Rel::parse(bad).is_err(), "{bad:?} accepted");
        }
        let ok = Rel::parse("arms/a/snapshots/0001-model_loaded-vm_stat.txt").unwrap();
        assert_eq!(ok.components().len(), 4);
        assert_eq!(
            ok.to_string(),
            "arms/a/snapshots/0001-model_loaded-vm_stat.txt"
        );
        assert_eq!(ok.name(), Some("0001-model_loaded-vm_stat.txt"));
        assert_eq!(ok.parent().to_string(), "arms/a/snapshots");
    }

    #[test]
    fn arm_ids_are_plain_names() {
        for bad in [
            "", ".", "..", ".hidden", "-x", "a/b", "a b", "é", "a\0", "../up",
        ] {
            assert!(check_arm_id(bad).is_err(), "{bad:?} accepted");
        }
        assert!(check_arm_id(&"x".repeat(65)).is_err());
        for good in ["fp16-one-state", "plateau-256", "a.b_c", "0"] {
            check_arm_id(good).unwrap();
        }
        assert_eq!(arm_dir("a1").unwrap().to_string(), "arms/a1");
    }

    #[test]
    fn try_join_checks_outside_names() {
        assert!(Rel::root().try_join("..").is_err());
        assert!(Rel::root().try_join("x/y").is_err());
        assert_eq!(Rel::root().try_join("x").unwrap().to_string(), "x");
    }
}
