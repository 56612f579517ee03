//! Where Core ML plans to run the encoder, for the receipt: what the runtime
//! report says at `state_ready` (the patched Core ML build asks after
//! `teardown_done`; any other build never asks, and says so), and the
//! library's summary (patch 0006, `whisper-memqual-placement.h`) read back,
//! checked and turned into the contract's [`CoremlPlacement`].
//!
//! Everything but the library call is plain Rust, tested on Linux with
//! summaries built by the header itself.

use encoder_output_check::placement::{DEVICES, Structure, Summary};
use worker_contract::{
    CoremlComputeUnits, CoremlPlacement, DeviceCounts, DeviceShares, OperationKind,
    PlannedPlacement,
};

/// The capability of a build whose library reads Core ML's compute plan.
pub const CAPABILITY: &str = "coreml:placement";

/// Why a build without [`CAPABILITY`] states no placement.
pub const NOT_QUERIED: &str = "not attributable: this build does not query MLComputePlan (only \
     memqual's patched whisper.cpp built with Core ML does), and placement is never inferred \
     from timing";

/// Whether a build with `caps` asks Core ML for its compute plan.
pub fn asks(caps: &[&str]) -> bool {
    caps.contains(&CAPABILITY)
}

/// What the runtime report says at `state_ready`, where the build `asks`
/// after `teardown_done` or never does.
pub fn at_state_ready(asks: bool) -> CoremlPlacement {
    if asks {
        CoremlPlacement::AfterTeardown
    } else {
        CoremlPlacement::not_attributable(NOT_QUERIED)
    }
}

fn devices(v: [u64; DEVICES]) -> DeviceCounts {
    // The header's order: unknown, CPU, GPU, Neural Engine.
    let [unknown, cpu, gpu, neural_engine] = v;
    DeviceCounts {
        cpu,
        gpu,
        neural_engine,
        unknown,
    }
}

/// The contract's placement from a checked summary made with `units`.
pub fn planned(summary: &Summary, units: CoremlComputeUnits) -> PlannedPlacement {
    let [unknown, cpu, gpu, neural_engine] = summary.cost;
    PlannedPlacement {
        source: "MLComputePlan".into(),
        compute_units: units.coreml_name().into(),
        structure: match summary.structure {
            Structure::Program => "ml_program",
            Structure::NeuralNetwork => "neural_network",
        }
        .into(),
        operations: summary.operations,
        without_usage: summary.without_usage,
        preferred: devices(summary.preferred),
        supported: devices(summary.supported),
        costed: summary.costed,
        cost_share: DeviceShares {
            cpu,
            gpu,
            neural_engine,
            unknown,
        },
        kinds: summary
            .kinds
            .iter()
            .map(|k| OperationKind {
                op: k.op.clone(),
                preferred: devices(k.preferred),
            })
            .collect(),
        kinds_dropped: summary.kinds_dropped,
    }
}

/// The placement from the library's answer: its struct, read and checked,
/// or its status and text (1: no plan on this system; else a failure).
pub fn from_library(
    answer: Result<encoder_output_check::placement::RawPlacement, (i32, String)>,
    units: CoremlComputeUnits,
) -> CoremlPlacement {
    match answer {
        Ok(raw) => match Summary::read(&raw) {
            Ok(summary) => CoremlPlacement::Planned(planned(&summary, units)),
            Err(e) => CoremlPlacement::not_attributable(format!("not attributable: {e}")),
        },
        Err((1, why)) => CoremlPlacement::not_attributable(format!("not attributable: {why}")),
        Err((code, why)) => CoremlPlacement::not_attributable(format!(
            "not attributable: MLComputePlan failed ({code}): {why}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use encoder_output_check::Compiled;
    use encoder_output_check::placement::{Builder, Device, Usage};

    fn on(device: Device) -> Option<Usage> {
        Some(Usage {
            preferred: device as i32,
            supported: Device::Cpu.bit() | Device::Gpu.bit() | device.bit(),
        })
    }

    #[test]
    fn only_a_build_that_asks_core_ml_promises_a_placement() {
        assert!(asks(
            worker_contract::capabilities::PATCH_CAPABILITIES_COREML
        ));
        assert!(!asks(worker_contract::capabilities::PATCH_CAPABILITIES));
        assert!(!asks(&["encoder:coreml", "encoder:coreml_fail_closed"]));
        assert_eq!(at_state_ready(true), CoremlPlacement::AfterTeardown);
        assert_eq!(
            at_state_ready(false),
            CoremlPlacement::not_attributable(NOT_QUERIED)
        );
    }

    #[test]
    fn the_librarys_summary_becomes_the_receipts_placement() {
        let mut b = Builder::new(Compiled::Cpp, Structure::Program as i32);
        b.add("const", None, None).unwrap();
        b.add("ios17.conv", on(Device::NeuralEngine), Some(0.6))
            .unwrap();
        b.add("ios17.gelu", on(Device::Cpu), Some(0.4)).unwrap();
        let placed = from_library(Ok(b.finish().unwrap()), CoremlComputeUnits::CpuAndNe);
        let CoremlPlacement::Planned(p) = placed else {
            panic!("{placed:?}");
        };
        assert_eq!(p.compute_units, "MLComputeUnitsCPUAndNeuralEngine");
        assert_eq!(p.structure, "ml_program");
        assert_eq!((p.operations, p.without_usage, p.costed), (3, 1, 2));
        assert_eq!((p.preferred.neural_engine, p.preferred.cpu), (1, 1));
        assert_eq!(
            (p.supported.cpu, p.supported.gpu, p.supported.neural_engine),
            (2, 2, 1)
        );
        assert_eq!((p.cost_share.neural_engine, p.cost_share.cpu), (0.6, 0.4));
        assert_eq!(p.off_neural_engine(), [("ios17.gelu", 1)]);
    }

    #[test]
    fn no_plan_and_a_bad_plan_are_not_attributable_with_why() {
        let units = CoremlComputeUnits::All;
        assert_eq!(
            from_library(
                Err((1, "MLComputePlan needs macOS 14.4 or iOS 17.4".into())),
                units
            ),
            CoremlPlacement::not_attributable(
                "not attributable: MLComputePlan needs macOS 14.4 or iOS 17.4"
            )
        );
        assert_eq!(
            from_library(Err((-1, "Core ML gave no compute plan: E".into())), units),
            CoremlPlacement::not_attributable(
                "not attributable: MLComputePlan failed (-1): Core ML gave no compute plan: E"
            )
        );
        let mut b = Builder::new(Compiled::C, Structure::Program as i32);
        b.add("ios17.conv", on(Device::Gpu), None).unwrap();
        let mut raw = b.finish().unwrap();
        raw.operations = 5;
        let CoremlPlacement::NotAttributable { reason } = from_library(Ok(raw), units) else {
            panic!("an inconsistent summary was accepted");
        };
        assert!(reason.contains("does not add up"), "{reason}");
    }
}
