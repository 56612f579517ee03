//! The Core ML placement summary: what the glue hands the header one
//! operation at a time, summarised identically by the C and C++ compilations,
//! and every self-contradicting plan refused, naming the operation.

use encoder_output_check::Compiled;
use encoder_output_check::placement::{
    Builder, DEVICES, Device, KINDS, NAME, PlacementStatus, RawPlacement, Structure, Summary,
    Usage, c_layout,
};

const ALL: u32 = 0b1110; // CPU, GPU and Neural Engine

fn on(device: Device, supported: u32) -> Option<Usage> {
    Some(Usage {
        preferred: device as i32,
        supported,
    })
}

/// A small encoder as an ML program: constants, convolutions and matmuls on
/// the Neural Engine, two GELUs the Neural Engine cannot take.
fn encoder_plan(compiled: Compiled) -> RawPlacement {
    let mut b = Builder::new(compiled, Structure::Program as i32);
    b.add("const", None, None).unwrap();
    b.add("const", None, None).unwrap();
    b.add("ios17.conv", on(Device::NeuralEngine, ALL), Some(0.30))
        .unwrap();
    b.add("ios17.conv", on(Device::NeuralEngine, ALL), Some(0.30))
        .unwrap();
    b.add("ios17.gelu", on(Device::Cpu, 0b0110), Some(0.05))
        .unwrap();
    b.add("ios17.matmul", on(Device::NeuralEngine, ALL), Some(0.25))
        .unwrap();
    b.add("ios17.gelu", on(Device::Gpu, 0b0110), Some(0.10))
        .unwrap();
    b.finish().unwrap()
}

#[test]
fn the_rust_mirror_has_the_compilers_layout() {
    let raw = RawPlacement::zeroed();
    let base = std::ptr::addr_of!(raw) as usize;
    assert_eq!(
        c_layout(),
        [
            std::mem::size_of::<RawPlacement>(),
            std::ptr::addr_of!(raw.operations) as usize - base,
            std::ptr::addr_of!(raw.cost) as usize - base,
            std::ptr::addr_of!(raw.kinds) as usize - base,
        ]
    );
}

#[test]
fn a_plan_is_summarised_by_device_cost_and_kind_alike_in_c_and_cpp() {
    let c = Summary::read(&encoder_plan(Compiled::C)).unwrap();
    let cpp = Summary::read(&encoder_plan(Compiled::Cpp)).unwrap();
    assert_eq!(c, cpp);
    assert_eq!(c.structure, Structure::Program);
    assert_eq!((c.operations, c.without_usage, c.costed), (7, 2, 5));
    // unknown, CPU, GPU, Neural Engine
    assert_eq!(c.preferred, [0, 1, 1, 3]);
    assert_eq!(c.supported, [0, 5, 5, 3]);
    let cost = c.cost;
    assert!((cost[3] - 0.85).abs() < 1e-12, "{cost:?}");
    assert!((cost[1] - 0.05).abs() < 1e-12 && (cost[2] - 0.10).abs() < 1e-12);
    let kinds: Vec<(&str, [u64; DEVICES])> = c
        .kinds
        .iter()
        .map(|k| (k.op.as_str(), k.preferred))
        .collect();
    assert_eq!(
        kinds,
        [
            ("ios17.conv", [0, 0, 0, 2]),
            ("ios17.gelu", [0, 1, 1, 0]),
            ("ios17.matmul", [0, 0, 0, 1]),
        ]
    );
    assert_eq!(c.kinds_dropped, 0);
}

#[test]
fn a_neural_network_counts_layers_without_costs() {
    for compiled in [Compiled::C, Compiled::Cpp] {
        let mut b = Builder::new(compiled, Structure::NeuralNetwork as i32);
        b.add("convolution", on(Device::NeuralEngine, ALL), None)
            .unwrap();
        b.add("activation", on(Device::Unknown, 0b0001), None)
            .unwrap();
        let s = Summary::read(&b.finish().unwrap()).unwrap();
        assert_eq!(s.structure, Structure::NeuralNetwork);
        assert_eq!((s.operations, s.costed), (2, 0));
        assert_eq!(s.preferred, [1, 0, 0, 1]);
        assert_eq!(s.cost, [0.0; DEVICES]);
    }
}

fn refused(
    structure: Structure,
    ops: &[(&str, Option<Usage>, Option<f64>)],
) -> (PlacementStatus, String) {
    let run = |compiled| {
        let mut b = Builder::new(compiled, structure as i32);
        for (op, usage, cost) in ops {
            b.add(op, *usage, *cost)?;
        }
        b.finish().map(|_| ())
    };
    let c = run(Compiled::C).expect_err("refused as C");
    let cpp = run(Compiled::Cpp).expect_err("refused as C++");
    assert_eq!(c, cpp, "the C and C++ compilations disagree");
    (c.status, c.message)
}

#[test]
fn a_plan_that_contradicts_itself_is_refused_naming_the_operation() {
    let bad_device = Some(Usage {
        preferred: 7,
        supported: ALL,
    });
    assert_eq!(
        refused(Structure::Program, &[("ios17.conv", bad_device, None)]),
        (
            PlacementStatus::Device,
            "operation ios17.conv: preferred device 7 is not one of unknown, cpu, gpu, neural_engine"
                .into()
        )
    );
    let negative = Some(Usage {
        preferred: -1,
        supported: ALL,
    });
    assert_eq!(
        refused(Structure::Program, &[("x", negative, None)]).0,
        PlacementStatus::Device
    );
    assert_eq!(
        refused(
            Structure::Program,
            &[("ios17.gelu", on(Device::NeuralEngine, 0b0110), Some(0.1))]
        ),
        (
            PlacementStatus::Supported,
            "operation ios17.gelu: prefers neural_engine, but its supported devices are mask 0x6 \
             (bit 1 cpu, 2 gpu, 3 neural_engine, 0 unknown)"
                .into()
        )
    );
    assert_eq!(
        refused(
            Structure::Program,
            &[("x", on(Device::Cpu, 0b1_0010), None)]
        )
        .0,
        PlacementStatus::Supported
    );
    for cost in [f64::NAN, -0.01, 1.5, f64::INFINITY] {
        let (status, message) = refused(
            Structure::Program,
            &[("ios17.add", on(Device::Cpu, ALL), Some(cost))],
        );
        assert_eq!(status, PlacementStatus::Cost, "{cost}");
        assert!(
            message.starts_with("operation ios17.add: estimated cost ")
                && message.ends_with(" is not a share between 0 and 1"),
            "{message}"
        );
    }
    assert_eq!(
        refused(
            Structure::Program,
            &[
                ("a", on(Device::NeuralEngine, ALL), Some(0.7)),
                ("b", on(Device::Cpu, ALL), Some(0.7)),
            ]
        ),
        (
            PlacementStatus::Total,
            "the estimated costs of 2 operations add up to 1.400000, past the whole (1)".into()
        )
    );
    assert_eq!(
        refused(Structure::Program, &[]),
        (
            PlacementStatus::Empty,
            "the compute plan lists no operation".into()
        )
    );
    let mut b = Builder::new(Compiled::C, 9);
    b.add("x", on(Device::Cpu, ALL), None).unwrap();
    assert_eq!(
        b.finish().unwrap_err().message,
        "the compute plan describes structure 9, neither an ML program nor a neural network"
    );
}

#[test]
fn kinds_past_the_table_are_counted_and_long_names_cut_on_a_character() {
    let mut b = Builder::new(Compiled::Cpp, Structure::Program as i32);
    for i in 0..KINDS + 3 {
        b.add(&format!("op{i}"), on(Device::Cpu, ALL), None)
            .unwrap();
    }
    // 62 ASCII bytes then a 3-byte character: cut before it, not inside it.
    let long = format!("{}€tail", "x".repeat(NAME - 2));
    b.add(&long, on(Device::Gpu, ALL), None).unwrap();
    let s = Summary::read(&b.finish().unwrap()).unwrap();
    assert_eq!(s.kinds.len(), KINDS);
    assert_eq!(s.kinds_dropped, 4);
    assert_eq!(s.kinds[KINDS - 1].op, format!("op{}", KINDS - 1));

    let mut b = Builder::new(Compiled::C, Structure::Program as i32);
    b.add(&long, on(Device::Gpu, ALL), None).unwrap();
    b.add(
        &format!("{}€other", "x".repeat(NAME - 2)),
        on(Device::Cpu, ALL),
        None,
    )
    .unwrap();
    let s = Summary::read(&b.finish().unwrap()).unwrap();
    // Both cut to the same 62 bytes: one kind, valid UTF-8.
    assert_eq!(s.kinds.len(), 1);
    assert_eq!(s.kinds[0].op, "x".repeat(NAME - 2));
    assert_eq!(s.kinds[0].preferred, [0, 1, 1, 0]);
}

#[test]
fn a_struct_whose_numbers_do_not_add_up_is_not_read() {
    let good = encoder_plan(Compiled::C);
    let mut bad = good;
    bad.operations += 1;
    assert_eq!(
        Summary::read(&bad).unwrap_err().to_string(),
        "the Core ML placement summary does not add up: 5 operations by device and 2 without a \
         usage, of 8"
    );
    let mut bad = good;
    bad.kinds[0].preferred[3] = 5;
    assert!(
        Summary::read(&bad)
            .unwrap_err()
            .0
            .contains("operations by kind")
    );
    let mut bad = good;
    bad.n_kinds = KINDS as i32 + 1;
    assert!(
        Summary::read(&bad)
            .unwrap_err()
            .0
            .contains("kinds in a table of 32")
    );
    let mut bad = good;
    bad.kinds[1].op = [b'y' as std::ffi::c_char; NAME];
    assert!(
        Summary::read(&bad)
            .unwrap_err()
            .0
            .contains("without its NUL")
    );
    let mut bad = good;
    bad.supported[1] = 9;
    assert!(
        Summary::read(&bad)
            .unwrap_err()
            .0
            .contains("supports 9 of 5")
    );
    let mut bad = good;
    bad.cost[0] = f64::NAN;
    assert!(Summary::read(&bad).unwrap_err().0.contains("cost shares"));
    let mut bad = good;
    bad.preferred[2] = -1;
    assert!(Summary::read(&bad).unwrap_err().0.contains("is -1"));
    let mut bad = good;
    bad.structure = 0;
    assert!(Summary::read(&bad).unwrap_err().0.contains("structure 0"));
}
