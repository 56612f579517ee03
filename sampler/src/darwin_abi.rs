//! Apple's ABI as Apple's headers state it, and the build-time comparison of
//! the Rust side with it.
//!
//! `sampler/abi/darwin-facts.txt` ([`HEADER_FACTS`]) holds one
//! `name = value` line per fact that macOS code relies on: struct sizes,
//! field offsets, sizes and signedness, constants, revision counts and
//! sysctl names. It is generated from `sampler/abi/darwin_probe.c` compiled
//! against the headers zig ships for aarch64-macos (`.ci/macos-check facts`
//! regenerates it and fails on any difference).
//!
//! The Rust side states the same facts as [`Fact`] lists: this crate's own
//! decoding constants in [`crate::darwin::ABI_FACTS`] (asserted on every
//! platform), and the `libc`/`mach2` struct layouts and constants evaluated
//! by the compiler for the target in the macOS module (asserted, complete,
//! when built for macOS). [`assert_agrees`] runs in a constant, so a build
//! fails naming the first fact that differs, that the Rust side states but
//! the headers do not, or (complete) that the headers state but no Rust
//! fact checks.
//!
//! `MEMQUAL_DARWIN_ABI_SKEW=<fact>` at build time makes the Rust side of
//! that fact wrong on purpose, so CI can prove the check fails.

/// The facts file, compiled in.
pub const HEADER_FACTS: &str = include_str!("../abi/darwin-facts.txt");

/// Where [`HEADER_FACTS`] lives, for messages.
pub const HEADER_FACTS_PATH: &str = "sampler/abi/darwin-facts.txt";

/// The fact whose Rust side is made wrong on purpose (set at build time).
pub const SKEW: Option<&str> = option_env!("MEMQUAL_DARWIN_ABI_SKEW");

/// A fact's value: a number (size, offset, 0/1 for signedness, constant)
/// or a text (a name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// A number: a size, offset, constant, or 0/1 for signedness.
    Number(u64),
    /// A text, such as a sysctl name.
    Text(&'static str),
}

/// One fact as the Rust side has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fact {
    /// The fact's name as the facts file spells it (e.g. `task_vm_info.phys_footprint.offset`).
    pub name: &'static str,
    /// The value the Rust side has.
    pub value: Value,
}

impl Fact {
    /// A numeric fact.
    pub const fn number(name: &'static str, value: u64) -> Fact {
        Fact {
            name,
            value: Value::Number(value),
        }
    }

    /// A text fact.
    pub const fn text(name: &'static str, value: &'static str) -> Fact {
        Fact {
            name,
            value: Value::Text(value),
        }
    }
}

/// Offset, size and signedness of one field of a C struct, as this crate
/// decodes it from raw bytes (for the structs it does not take from `libc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldLayout {
    /// Byte offset of the field from the start of the struct.
    pub offset: usize,
    /// Size of the field in bytes.
    pub size: usize,
    /// Whether the field is a signed integer.
    pub signed: bool,
}

impl FieldLayout {
    /// The field's bytes in `b`; `None` when `b` is too short.
    pub fn bytes<'a>(&self, b: &'a [u8]) -> Option<&'a [u8]> {
        b.get(self.offset..self.offset.checked_add(self.size)?)
    }
}

/// Integer types and their signedness, for field facts.
pub trait Integer {
    /// Whether the type is a signed integer.
    const SIGNED: bool;
}

macro_rules! integers {
    ($($t:ty => $signed:expr),* $(,)?) => { $(impl Integer for $t { const SIGNED: bool = $signed; })* };
}
integers!(u8 => false, u16 => false, u32 => false, u64 => false, usize => false,
          i8 => true, i16 => true, i32 => true, i64 => true, isize => true);

/// The size of the value `read` returns (a field read by value, which also
/// works for fields of packed structs).
pub const fn size_of_read<S, V, F: Fn(&S) -> V>(_read: &F) -> usize {
    size_of::<V>()
}

/// Whether the value `read` returns is a signed integer.
pub const fn signed_read<S, V: Integer, F: Fn(&S) -> V>(_read: &F) -> bool {
    V::SIGNED
}

/// The three facts of a field of a Rust struct that mirrors a C struct:
/// `TYPE.FIELD.offset`, `.size` and `.signed`, evaluated by the compiler.
/// The type's and field's Rust names are the C names.
#[macro_export]
#[doc(hidden)]
macro_rules! darwin_abi_struct_field {
    ($ty:ident, $field:ident) => {
        &[
            $crate::darwin_abi::Fact::number(
                concat!(stringify!($ty), ".", stringify!($field), ".offset"),
                ::core::mem::offset_of!($ty, $field) as u64,
            ),
            $crate::darwin_abi::Fact::number(
                concat!(stringify!($ty), ".", stringify!($field), ".size"),
                $crate::darwin_abi::size_of_read(&|s: &$ty| s.$field) as u64,
            ),
            $crate::darwin_abi::Fact::number(
                concat!(stringify!($ty), ".", stringify!($field), ".signed"),
                $crate::darwin_abi::signed_read(&|s: &$ty| s.$field) as u64,
            ),
        ]
    };
}

/// The three facts of a [`FieldLayout`] constant, named `NAME.offset`,
/// `.size` and `.signed`.
#[macro_export]
#[doc(hidden)]
macro_rules! darwin_abi_layout {
    ($name:literal, $layout:expr) => {
        &[
            $crate::darwin_abi::Fact::number(concat!($name, ".offset"), $layout.offset as u64),
            $crate::darwin_abi::Fact::number(concat!($name, ".size"), $layout.size as u64),
            $crate::darwin_abi::Fact::number(concat!($name, ".signed"), $layout.signed as u64),
        ]
    };
}

/// Rust facts in groups (a field's three facts are one group); a module's
/// list is one `Facts`, and a check takes several.
pub type Facts = &'static [&'static [Fact]];

/// How the Rust side and the headers disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Difference {
    /// Both state the fact, with different values. `skewed`: on purpose.
    Differs {
        /// The fact's name.
        name: &'static str,
        /// The value the Rust side has.
        rust: Value,
        /// The value as the facts file writes it.
        header: &'static str,
        /// Whether `MEMQUAL_DARWIN_ABI_SKEW` made the Rust side wrong on purpose.
        skewed: bool,
    },
    /// The Rust side checks a fact the facts file does not state.
    NotInHeaders {
        /// The fact the facts file lacks.
        name: &'static str,
    },
    /// The facts file states a fact no Rust fact checks (complete checks only).
    NotChecked {
        /// The fact no Rust fact checks.
        name: &'static str,
    },
    /// The skew names a fact the facts file does not state.
    UnknownSkew {
        /// The fact the skew names.
        name: &'static str,
    },
    /// A line of the facts file that is not `name = number` or `name = "text"`.
    Malformed {
        /// 1-based line number in the facts file.
        line: usize,
    },
}

impl Difference {
    /// The message a failed build (and a failed test) prints.
    pub const fn message(&self) -> Message {
        let mut m = Message::new();
        m.push("darwin ABI: ");
        match *self {
            Difference::Differs {
                name,
                rust,
                header,
                skewed,
            } => {
                m.push(name);
                m.push(" is ");
                match rust {
                    Value::Number(n) => m.push_u64(n),
                    Value::Text(t) => {
                        m.push("\"");
                        m.push(t);
                        m.push("\"");
                    }
                }
                m.push(" in Rust, ");
                m.push(header);
                m.push(" in Apple's headers (");
                m.push(HEADER_FACTS_PATH);
                m.push(")");
                if skewed {
                    m.push(" [made wrong on purpose by MEMQUAL_DARWIN_ABI_SKEW]");
                }
            }
            Difference::NotInHeaders { name } => {
                m.push(name);
                m.push(" is checked in Rust but not stated in ");
                m.push(HEADER_FACTS_PATH);
                m.push(": add it to sampler/abi/darwin_probe.c, then run `.ci/macos-check facts --write`");
            }
            Difference::NotChecked { name } => {
                m.push(name);
                m.push(" is stated by Apple's headers (");
                m.push(HEADER_FACTS_PATH);
                m.push(") but no Rust fact checks it: add it to the facts in sampler/src/macos.rs or darwin.rs");
            }
            Difference::UnknownSkew { name } => {
                m.push("MEMQUAL_DARWIN_ABI_SKEW names ");
                m.push(name);
                m.push(", which ");
                m.push(HEADER_FACTS_PATH);
                m.push(" does not state");
            }
            Difference::Malformed { line } => {
                m.push(HEADER_FACTS_PATH);
                m.push(" line ");
                m.push_u64(line as u64);
                m.push(" is not `name = number` or `name = \"text\"`");
            }
        }
        m
    }
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message().as_str())
    }
}

/// A message built at compile time (a constant cannot allocate).
#[derive(Clone, Copy)]
pub struct Message {
    bytes: [u8; 400],
    len: usize,
}

impl Message {
    const fn new() -> Message {
        Message {
            bytes: [0; 400],
            len: 0,
        }
    }

    /// Append `s`, cut short (at a character boundary) if the buffer is full.
    const fn push(&mut self, s: &str) {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() && self.len < self.bytes.len() {
            self.bytes[self.len] = b[i];
            self.len += 1;
            i += 1;
        }
        // Cut inside a character: drop its bytes already copied.
        while i < b.len() && i > 0 && (b[i] & 0xC0) == 0x80 {
            self.len -= 1;
            i -= 1;
        }
    }

    const fn push_u64(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut k = digits.len();
        loop {
            k -= 1;
            digits[k] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let (_, tail) = digits.split_at(k);
        match core::str::from_utf8(tail) {
            Ok(s) => self.push(s),
            Err(_) => self.push("?"),
        }
    }

    /// The message text.
    pub const fn as_str(&self) -> &str {
        let (used, _) = self.bytes.split_at(self.len);
        match core::str::from_utf8(used) {
            Ok(s) => s,
            Err(_) => "darwin ABI: (unprintable message)",
        }
    }
}

/// The bytes `b[from..to]` (slicing by range is not const).
const fn sub(b: &[u8], from: usize, to: usize) -> &[u8] {
    b.split_at(to).0.split_at(from).1
}

const fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn as_str(b: &[u8]) -> &str {
    match core::str::from_utf8(b) {
        Ok(s) => s,
        Err(_) => "",
    }
}

/// One `name = value` line of the facts file, the value as written.
#[derive(Clone, Copy)]
struct HeaderFact {
    name: &'static [u8],
    value: &'static [u8],
}

/// The most facts a facts file may state (the table is a fixed array,
/// because constants cannot allocate).
pub const MAX_FACTS: usize = 512;

/// A facts file, parsed once (in a constant) so every lookup is a scan of
/// a short table; re-parsing the text for each fact would exceed what the
/// compiler allows one constant to compute.
pub struct HeaderFacts {
    facts: [HeaderFact; MAX_FACTS],
    len: usize,
    /// The first line that is not `name = value` (1-based), if any.
    malformed: Option<usize>,
}

/// [`HEADER_FACTS`], parsed.
pub const HEADER: HeaderFacts = HeaderFacts::parse(HEADER_FACTS);

impl HeaderFacts {
    /// Parse `text`: `name = number` or `name = "text"` lines; blank lines
    /// and `#` comments are skipped. A malformed line, a name stated twice,
    /// or more than [`MAX_FACTS`] facts is recorded as the line where it
    /// happened and reported by [`first_difference`].
    pub const fn parse(text: &'static str) -> HeaderFacts {
        let mut out = HeaderFacts {
            facts: [HeaderFact {
                name: &[],
                value: &[],
            }; MAX_FACTS],
            len: 0,
            malformed: None,
        };
        let text = text.as_bytes();
        let mut at = 0;
        let mut number = 0;
        while at < text.len() {
            let mut end = at;
            while end < text.len() && text[end] != b'\n' {
                end += 1;
            }
            number += 1;
            let line = sub(text, at, end);
            at = end + 1;
            if line.is_empty() || line[0] == b'#' {
                continue;
            }
            match parse_line(line) {
                // A fact stated twice is as wrong as a garbled line.
                Some(fact) if out.len < MAX_FACTS && out.get(fact.name).is_none() => {
                    out.facts[out.len] = fact;
                    out.len += 1;
                }
                _ => {
                    out.malformed = Some(number);
                    return out;
                }
            }
        }
        out
    }

    /// The value of fact `name` as written (`372`, `"hw.memsize"`).
    const fn get(&self, name: &[u8]) -> Option<&'static [u8]> {
        let mut i = 0;
        while i < self.len {
            if bytes_eq(self.facts[i].name, name) {
                return Some(self.facts[i].value);
            }
            i += 1;
        }
        None
    }

    /// The number the headers give for `name`, if they state it as one.
    pub fn number(&self, name: &str) -> Option<u64> {
        self.get(name.as_bytes()).and_then(parse_number)
    }
}

/// `name = value`, with a valid value.
const fn parse_line(line: &'static [u8]) -> Option<HeaderFact> {
    let mut i = 0;
    while i + 3 <= line.len() {
        if line[i] == b' ' && line[i + 1] == b'=' && line[i + 2] == b' ' {
            let name = sub(line, 0, i);
            let value = sub(line, i + 3, line.len());
            if name.is_empty() || !valid_value(value) {
                return None;
            }
            return Some(HeaderFact { name, value });
        }
        i += 1;
    }
    None
}

/// A decimal number, or text between double quotes with no quote inside.
const fn valid_value(v: &[u8]) -> bool {
    if v.is_empty() {
        return false;
    }
    if v[0] == b'"' {
        if v.len() < 2 || v[v.len() - 1] != b'"' {
            return false;
        }
        let mut i = 1;
        while i < v.len() - 1 {
            if v[i] == b'"' {
                return false;
            }
            i += 1;
        }
        return true;
    }
    parse_number(v).is_some()
}

const fn parse_number(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 20 {
        return None;
    }
    let mut n: u64 = 0;
    let mut i = 0;
    while i < v.len() {
        let d = v[i];
        if !d.is_ascii_digit() {
            return None;
        }
        n = match n.checked_mul(10) {
            Some(m) => match m.checked_add((d - b'0') as u64) {
                Some(s) => s,
                None => return None,
            },
            None => return None,
        };
        i += 1;
    }
    Some(n)
}

/// Whether the Rust value equals the header's written value.
const fn value_matches(rust: Value, header: &[u8]) -> bool {
    match rust {
        Value::Number(n) => match parse_number(header) {
            Some(h) => h == n,
            None => false,
        },
        Value::Text(t) => {
            header.len() >= 2
                && header[0] == b'"'
                && bytes_eq(sub(header, 1, header.len() - 1), t.as_bytes())
        }
    }
}

const fn is_skewed(name: &str, skew: Option<&str>) -> bool {
    match skew {
        Some(s) => bytes_eq(s.as_bytes(), name.as_bytes()),
        None => false,
    }
}

/// The first way `rust` and the `header` facts disagree, in this order: a
/// malformed header line, a skew naming no header fact, a Rust fact that
/// differs from or is missing in the headers (in `rust`'s order), and, when
/// `complete`, a header fact no Rust fact checks. `skew` makes that fact's
/// Rust side wrong: a number one more, a text different.
pub const fn first_difference(
    rust: &[Facts],
    header: &HeaderFacts,
    skew: Option<&'static str>,
    complete: bool,
) -> Option<Difference> {
    if let Some(line) = header.malformed {
        return Some(Difference::Malformed { line });
    }
    if let Some(name) = skew
        && header.get(name.as_bytes()).is_none()
    {
        return Some(Difference::UnknownSkew { name });
    }
    let mut all = AllFacts::new(rust);
    while let Some(fact) = all.next() {
        let Some(header_value) = header.get(fact.name.as_bytes()) else {
            return Some(Difference::NotInHeaders { name: fact.name });
        };
        let skewed = is_skewed(fact.name, skew);
        let mut value = fact.value;
        if skewed && let Value::Number(n) = value {
            value = Value::Number(n.wrapping_add(1));
        }
        if skewed || !value_matches(value, header_value) {
            return Some(Difference::Differs {
                name: fact.name,
                rust: value,
                header: as_str(header_value),
                skewed,
            });
        }
    }
    if complete {
        let mut i = 0;
        while i < header.len {
            let name = header.facts[i].name;
            if !checked(rust, name) {
                return Some(Difference::NotChecked { name: as_str(name) });
            }
            i += 1;
        }
    }
    None
}

/// Every fact of several lists, in order.
struct AllFacts<'a> {
    lists: &'a [Facts],
    list: usize,
    group: usize,
    fact: usize,
}

impl<'a> AllFacts<'a> {
    const fn new(lists: &'a [Facts]) -> Self {
        AllFacts {
            lists,
            list: 0,
            group: 0,
            fact: 0,
        }
    }

    const fn next(&mut self) -> Option<Fact> {
        while self.list < self.lists.len() {
            let groups = self.lists[self.list];
            if self.group >= groups.len() {
                self.list += 1;
                self.group = 0;
                continue;
            }
            let group = groups[self.group];
            if self.fact >= group.len() {
                self.group += 1;
                self.fact = 0;
                continue;
            }
            self.fact += 1;
            return Some(group[self.fact - 1]);
        }
        None
    }
}

/// Whether some Rust fact is named `name`.
const fn checked(rust: &[Facts], name: &[u8]) -> bool {
    let mut all = AllFacts::new(rust);
    while let Some(fact) = all.next() {
        if bytes_eq(fact.name.as_bytes(), name) {
            return true;
        }
    }
    false
}

/// Fail (at compile time, in a constant) with the first difference between
/// `rust` and [`HEADER_FACTS`], honouring [`SKEW`].
pub const fn assert_agrees(rust: &[Facts], complete: bool) {
    if let Some(d) = first_difference(rust, &HEADER, SKEW, complete) {
        let m = d.message();
        panic!("{}", m.as_str());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_facts_state_the_known_header_values() {
        let n = |name| HEADER.number(name);
        assert_eq!(n("task_vm_info.size"), Some(372));
        assert_eq!(n("task_vm_info.phys_footprint.offset"), Some(144));
        assert_eq!(
            n("task_vm_info.ledger_phys_footprint_peak.offset"),
            Some(168)
        );
        assert_eq!(n("const.TASK_VM_INFO_COUNT"), Some(93));
        assert_eq!(n("const.TASK_VM_INFO_REV1_COUNT"), Some(38));
        assert_eq!(n("const.TASK_VM_INFO_REV3_COUNT"), Some(84));
        assert_eq!(n("rusage_info_v4.size"), Some(296));
        assert_eq!(n("no.such.fact"), None);
        assert_eq!(
            HEADER.get(b"sysctl.hw_memsize"),
            Some(&b"\"hw.memsize\""[..])
        );
    }

    #[test]
    fn this_crates_decoding_constants_agree_with_the_headers() {
        assert_eq!(
            first_difference(&[crate::darwin::ABI_FACTS], &HEADER, None, false),
            None
        );
    }

    /// The prefix of `struct task_vm_info` up to `ledger_phys_footprint_peak`,
    /// as the header lays it out (`#pragma pack(4)`).
    #[allow(non_camel_case_types)]
    #[repr(C, packed(4))]
    struct task_vm_info {
        virtual_size: u64,
        region_count: i32,
        page_size: i32,
        resident_size: u64,
        resident_size_peak: u64,
        rest_of_rev0: [u64; 11],
        compressed: u64,
        compressed_peak: u64,
        compressed_lifetime: u64,
        phys_footprint: u64,
        min_address: u64,
        max_address: u64,
        ledger_phys_footprint_peak: i64,
    }

    const MIRROR: Facts = &[
        darwin_abi_struct_field!(task_vm_info, virtual_size),
        darwin_abi_struct_field!(task_vm_info, resident_size),
        darwin_abi_struct_field!(task_vm_info, resident_size_peak),
        darwin_abi_struct_field!(task_vm_info, compressed),
        darwin_abi_struct_field!(task_vm_info, phys_footprint),
        darwin_abi_struct_field!(task_vm_info, ledger_phys_footprint_peak),
    ];

    #[test]
    fn a_mirror_laid_out_as_the_header_agrees() {
        assert_eq!(first_difference(&[MIRROR], &HEADER, None, false), None);
    }

    mod wrong {
        use super::super::*;

        /// As above, but with `compressed_lifetime` declared twice: every
        /// field from `phys_footprint` on sits 8 bytes late.
        #[allow(non_camel_case_types)]
        #[repr(C, packed(4))]
        pub struct task_vm_info {
            pub virtual_size: u64,
            pub region_count: i32,
            pub page_size: i32,
            pub resident_size: u64,
            pub resident_size_peak: u64,
            pub rest_of_rev0: [u64; 11],
            pub compressed: u64,
            pub compressed_peak: u64,
            pub compressed_lifetime: u64,
            pub compressed_lifetime_again: u64,
            pub phys_footprint: u64,
            pub ledger_phys_footprint_peak: u64,
        }

        pub const FACTS: Facts = &[
            darwin_abi_struct_field!(task_vm_info, compressed),
            darwin_abi_struct_field!(task_vm_info, phys_footprint),
            darwin_abi_struct_field!(task_vm_info, ledger_phys_footprint_peak),
        ];
    }

    #[test]
    fn a_wrong_offset_is_named_with_both_values() {
        let d = first_difference(&[wrong::FACTS], &HEADER, None, false).unwrap();
        assert_eq!(
            d,
            Difference::Differs {
                name: "task_vm_info.phys_footprint.offset",
                rust: Value::Number(152),
                header: "144",
                skewed: false,
            }
        );
        assert_eq!(
            d.to_string(),
            "darwin ABI: task_vm_info.phys_footprint.offset is 152 in Rust, 144 in Apple's \
             headers (sampler/abi/darwin-facts.txt)"
        );
    }

    #[test]
    fn a_wrong_signedness_is_named() {
        // Offsets fixed, but the ledger peak declared unsigned (it is int64_t).
        const FACTS: Facts = &[&[Fact::number(
            "task_vm_info.ledger_phys_footprint_peak.signed",
            signed_read(&|s: &wrong::task_vm_info| s.ledger_phys_footprint_peak) as u64,
        )]];
        assert_eq!(
            first_difference(&[FACTS], &HEADER, None, false)
                .unwrap()
                .to_string(),
            "darwin ABI: task_vm_info.ledger_phys_footprint_peak.signed is 0 in Rust, 1 in \
             Apple's headers (sampler/abi/darwin-facts.txt)"
        );
    }

    #[test]
    fn a_wrong_name_a_missing_fact_and_an_unchecked_fact_are_named() {
        const NAME: Facts = &[&[Fact::text("sysctl.hw_memsize", "hw.memsiz")]];
        assert_eq!(
            first_difference(&[NAME], &HEADER, None, false)
                .unwrap()
                .to_string(),
            "darwin ABI: sysctl.hw_memsize is \"hw.memsiz\" in Rust, \"hw.memsize\" in Apple's \
             headers (sampler/abi/darwin-facts.txt)"
        );
        const MISSING: Facts = &[&[Fact::number("task_vm_info.no_such_field.offset", 0)]];
        assert_eq!(
            first_difference(&[MISSING], &HEADER, None, false),
            Some(Difference::NotInHeaders {
                name: "task_vm_info.no_such_field.offset"
            })
        );
        // Complete: the first header fact the mirror does not check.
        assert_eq!(
            first_difference(&[MIRROR], &HEADER, None, true),
            Some(Difference::NotChecked {
                name: "type.natural_t.size"
            })
        );
        // A number where the headers state a text, and the reverse.
        const NUMBER_FOR_TEXT: Facts = &[&[Fact::number("sysctl.hw_memsize", 0)]];
        assert!(matches!(
            first_difference(&[NUMBER_FOR_TEXT], &HEADER, None, false),
            Some(Difference::Differs { .. })
        ));
        const TEXT_FOR_NUMBER: Facts = &[&[Fact::text("task_vm_info.size", "372")]];
        assert!(matches!(
            first_difference(&[TEXT_FOR_NUMBER], &HEADER, None, false),
            Some(Difference::Differs { .. })
        ));
    }

    #[test]
    fn a_skew_makes_a_right_fact_fail_and_must_name_a_header_fact() {
        let skew = Some("task_vm_info.phys_footprint.offset");
        let d = first_difference(&[MIRROR], &HEADER, skew, false).unwrap();
        assert_eq!(
            d.to_string(),
            "darwin ABI: task_vm_info.phys_footprint.offset is 145 in Rust, 144 in Apple's \
             headers (sampler/abi/darwin-facts.txt) [made wrong on purpose by \
             MEMQUAL_DARWIN_ABI_SKEW]"
        );
        const TEXT: Facts = &[&[Fact::text("sysctl.hw_memsize", "hw.memsize")]];
        assert!(matches!(
            first_difference(&[TEXT], &HEADER, Some("sysctl.hw_memsize"), false),
            Some(Difference::Differs { skewed: true, .. })
        ));
        assert_eq!(
            first_difference(&[MIRROR], &HEADER, Some("task_vm_info.typo"), false),
            Some(Difference::UnknownSkew {
                name: "task_vm_info.typo"
            })
        );
    }

    #[test]
    fn malformed_facts_files_are_refused_with_the_line() {
        const FACTS: Facts = &[&[Fact::number("a", 1)]];
        for (text, line) in [
            ("# c\na 1\n", 2),
            ("a = 1\nb = \n", 2),
            ("a = 1x\n", 1),
            ("a = \"x\n", 1),
            ("a = \"x\"y\"\n", 1),
            (" = 1\n", 1),
            ("a = 99999999999999999999999\n", 1),
            ("a = 1\n\na = 1\n", 3),
        ] {
            assert_eq!(
                first_difference(&[FACTS], &HeaderFacts::parse(text), None, false),
                Some(Difference::Malformed { line }),
                "{text:?}"
            );
        }
        let parse = HeaderFacts::parse;
        assert_eq!(
            first_difference(&[FACTS], &parse("# c\n\na = 1"), None, true),
            None
        );
        assert_eq!(
            first_difference(&[FACTS], &parse("a = 1\nb = 2\n"), None, true),
            Some(Difference::NotChecked { name: "b" })
        );
    }

    #[test]
    fn messages_are_cut_at_a_character_boundary() {
        let long: &'static str = Box::leak("é".repeat(300).into_boxed_str());
        let m = Difference::NotInHeaders { name: long }.message();
        assert!(m.as_str().starts_with("darwin ABI: éé"));
        assert!(m.as_str().len() <= 400);
    }

    #[test]
    fn field_layouts_read_their_bytes_or_nothing() {
        let f = FieldLayout {
            offset: 2,
            size: 4,
            signed: false,
        };
        assert_eq!(f.bytes(&[0, 1, 2, 3, 4, 5]), Some(&[2, 3, 4, 5][..]));
        assert_eq!(f.bytes(&[0, 1, 2, 3, 4]), None);
        let huge = FieldLayout {
            offset: usize::MAX,
            size: 2,
            signed: false,
        };
        assert_eq!(huge.bytes(&[0; 8]), None);
    }
}
