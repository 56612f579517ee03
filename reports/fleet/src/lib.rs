//! memqual runs set beside each other: two sealed runs compared, and several
//! runs of one protocol, from several hosts, merged into one fleet report.
//!
//! Both read only receipts and what their seals cover; a figure whose seal
//! does not verify is marked, never silently trusted.
//!
//! - [`compare`]: two runs' key metrics side by side (`memqual compare`),
//!   with the regressions beyond a limit; its key metrics are the fleet
//!   report's columns.
//! - [`fleet`]: the fleet report (`memqual merge`): host × arm, the spread
//!   across hosts, what fails, the boots of each host; sealed.

// Every public item says what it means: the harness and the fleet page rely on these docs.
#![warn(missing_docs)]

pub mod compare;
pub mod fleet;
