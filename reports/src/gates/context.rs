//! What every gate kind shares: the arm under judgement and its control
//! ([`Context`]), evidence pointers into the receipt, and the check builders.

use super::{Check, Evidence, Outcome};
use crate::receipt::{ArmReceipt, Receipt};
use crate::record::{ArmStatus, files};

pub(super) const MIB: f64 = 1048576.0;

/// An arm of the receipt with its index (for evidence pointers).
#[derive(Clone, Copy)]
pub(super) struct Located<'a> {
    pub index: usize,
    pub arm: &'a ArmReceipt,
}

impl<'a> Located<'a> {
    pub fn at(&self, path: &str) -> Evidence {
        Evidence {
            file: files::RECEIPT.to_string(),
            pointer: format!("/arms/{}{path}", self.index),
        }
    }
}

/// What every gate may look at.
pub(super) struct Context<'a> {
    pub receipt: &'a Receipt,
    pub arm: Located<'a>,
    /// `Err` says why the control cannot be used (absent, failed, none named).
    pub control: Result<Located<'a>, String>,
}

pub(super) fn check(name: impl Into<String>, unit: &str) -> Check {
    Check {
        name: name.into(),
        outcome: Outcome::NotEvaluated,
        threshold: None,
        measured: None,
        control: None,
        unit: unit.to_string(),
        evidence: Vec::new(),
        note: String::new(),
    }
}

pub(super) fn not_evaluated(name: impl Into<String>, unit: &str, why: impl Into<String>) -> Check {
    Check {
        note: why.into(),
        ..check(name, unit)
    }
}

/// PASS when `measured ≤ threshold`.
pub(super) fn at_most(mut c: Check, measured: f64, threshold: f64) -> Check {
    c.measured = Some(measured);
    c.threshold = Some(threshold);
    c.outcome = if measured <= threshold {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    c
}

/// PASS when `measured ≥ threshold`.
pub(super) fn at_least(mut c: Check, measured: f64, threshold: f64) -> Check {
    c.measured = Some(measured);
    c.threshold = Some(threshold);
    c.outcome = if measured >= threshold {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    c
}

pub(super) fn find_arm<'a>(receipt: &'a Receipt, id: &str) -> Option<Located<'a>> {
    receipt
        .arms
        .iter()
        .enumerate()
        .find(|(_, a)| a.id == id)
        .map(|(index, arm)| Located { index, arm })
}

pub(super) fn resolve_control<'a>(receipt: &'a Receipt, arm: &str) -> Result<Located<'a>, String> {
    let Some(id) = receipt.run.controls.get(arm) else {
        return Err("the arm names no control".into());
    };
    let control = find_arm(receipt, id)
        .ok_or_else(|| format!("control arm `{id}` has no measurements (it never ran)"))?;
    if control.arm.status != ArmStatus::Completed {
        return Err(format!(
            "control arm `{id}` did not complete ({}): it cannot serve as a baseline",
            control.arm.failure.join("; ")
        ));
    }
    Ok(control)
}
