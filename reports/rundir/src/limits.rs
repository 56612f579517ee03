//! How much memqual reads from each kind of file. Real runs stay far below
//! these (the quickstart's largest record is a few hundred KiB); the limits
//! only stop a hostile or broken file from exhausting memory.

const MIB: u64 = 1024 * 1024;

/// A JSON record file (`run.json`, `arm.json`, `spec.json`, …).
pub const JSON_RECORD: u64 = 64 * MIB;
/// `receipt.json` (soaks of many thousand requests stay in the tens of MiB).
pub const RECEIPT: u64 = 512 * MIB;
/// `manifest.json` and `raw-seal.json` (about 150 bytes per file).
pub const SEAL_RECORD: u64 = 256 * MIB;
/// One line of a JSON-lines or CSV file.
pub const LINE: u64 = 16 * MIB;
/// A raw tool snapshot or other text file read whole.
pub const TEXT: u64 = 64 * MIB;
/// A protocol file given on the command line.
pub const PROTOCOL: u64 = 4 * MIB;
/// A captured tool output given to `memqual import`.
pub const CAPTURE: u64 = 64 * MIB;
