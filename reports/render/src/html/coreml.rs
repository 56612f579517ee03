//! The report page's Core ML placement line of an arm whose encoder ran in
//! Core ML: where the compute plan puts the operations, which operators stay
//! off the Neural Engine, or why the placement is not attributable.

use maud::{Markup, html};
use worker_contract::CoremlPlacement;

/// The paragraph for `placement` (the receipt's `runtime.coreml.placement`).
pub fn placement(placement: &CoremlPlacement) -> Markup {
    html! {
        h3 { "Core ML placement" }
        @match placement {
            CoremlPlacement::Planned(p) => {
                p.placement { "From " code { (p.source) } ": " (p.line()) "." }
                @let off = p.off_neural_engine();
                @if !off.is_empty() {
                    p.placement {
                        "Off the Neural Engine: "
                        @for (i, (op, n)) in off.iter().enumerate() {
                            @if i > 0 { ", " }
                            code { (op) } " × " (n)
                        }
                        @if p.kinds_dropped > 0 {
                            " (and " (p.kinds_dropped) " operations of kinds past the table)"
                        }
                        "."
                    }
                }
            }
            CoremlPlacement::AfterTeardown => {
                p.placement { "Promised after teardown_done and not yet read from the run directory." }
            }
            CoremlPlacement::NotAttributable { reason } => p.placement { (reason) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use worker_contract::{DeviceCounts, DeviceShares, OperationKind, PlannedPlacement};

    fn counts(cpu: u64, gpu: u64, neural_engine: u64) -> DeviceCounts {
        DeviceCounts {
            cpu,
            gpu,
            neural_engine,
            unknown: 0,
        }
    }

    #[test]
    fn a_plan_names_its_devices_and_the_operators_off_the_neural_engine() {
        let plan = CoremlPlacement::Planned(PlannedPlacement {
            source: "MLComputePlan".into(),
            compute_units: "cpu_and_ne".into(),
            structure: "ml_program".into(),
            operations: 12,
            without_usage: 2,
            preferred: counts(3, 0, 7),
            supported: counts(10, 0, 9),
            costed: 10,
            cost_share: DeviceShares {
                cpu: 0.25,
                gpu: 0.0,
                neural_engine: 0.75,
                unknown: 0.0,
            },
            kinds: vec![
                OperationKind {
                    op: "ios17.conv".into(),
                    preferred: counts(0, 0, 4),
                },
                OperationKind {
                    op: "ios17.gelu".into(),
                    preferred: counts(3, 0, 3),
                },
            ],
            kinds_dropped: 0,
        });
        let page = placement(&plan).into_string();
        assert!(
            page.contains("7 of 12 operations planned for the Neural Engine, 0 GPU, 3 CPU"),
            "{page}"
        );
        assert!(page.contains("75.0 % Neural Engine"), "{page}");
        assert!(
            page.contains("Off the Neural Engine: <code>ios17.gelu</code> × 3."),
            "{page}"
        );
        assert!(!page.contains("ios17.conv"), "{page}");
    }

    #[test]
    fn no_plan_shows_the_reason_escaped() {
        let none =
            CoremlPlacement::not_attributable("not attributable: macOS 14.3 <no MLComputePlan>");
        let page = placement(&none).into_string();
        assert!(
            page.contains("macOS 14.3 &lt;no MLComputePlan&gt;"),
            "{page}"
        );
    }
}
