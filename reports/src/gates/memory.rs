//! `memory`: a phase's peak (or another snapshot field) against a bound or the control.

use super::Check;
use super::context::{Context, MIB, at_most, check};
use super::evaluate::Judge;
use crate::gate_spec::{MemoryField, MemoryGate, encoder_pairing};
use crate::receipt::ArmReceipt;
use sampler::{Phase, TaskMemory};

impl Judge for MemoryGate {
    fn checks(&self, ctx: &Context) -> Vec<Check> {
        vec![memory(ctx, self)]
    }
}

/// The field's name as checks and evidence pointers write it.
pub fn field_name(field: MemoryField) -> &'static str {
    match field {
        MemoryField::Peak => "peak",
        MemoryField::ResidentBytes => "resident_bytes",
        MemoryField::ResidentPeakBytes => "resident_peak_bytes",
        MemoryField::FootprintBytes => "footprint_bytes",
        MemoryField::FootprintPeakBytes => "footprint_peak_bytes",
        MemoryField::CompressedBytes => "compressed_bytes",
        MemoryField::SwapBytes => "swap_bytes",
        MemoryField::VirtualBytes => "virtual_bytes",
        MemoryField::RssAnonBytes => "rss_anon_bytes",
        MemoryField::RssFileBytes => "rss_file_bytes",
        MemoryField::RssShmemBytes => "rss_shmem_bytes",
        MemoryField::DeviceBytes => "device_bytes",
    }
}

/// The value of `field` in one snapshot.
pub fn read_field(m: &TaskMemory, field: MemoryField) -> Option<u64> {
    match field {
        MemoryField::Peak => m.footprint_peak_bytes.or(m.resident_peak_bytes),
        MemoryField::ResidentBytes => Some(m.resident_bytes),
        MemoryField::ResidentPeakBytes => m.resident_peak_bytes,
        MemoryField::FootprintBytes => m.footprint_bytes,
        MemoryField::FootprintPeakBytes => m.footprint_peak_bytes,
        MemoryField::CompressedBytes => m.compressed_bytes,
        MemoryField::SwapBytes => m.swap_bytes,
        MemoryField::VirtualBytes => Some(m.virtual_bytes),
        MemoryField::RssAnonBytes => m.rss_anon_bytes,
        MemoryField::RssFileBytes => m.rss_file_bytes,
        MemoryField::RssShmemBytes => m.rss_shmem_bytes,
        MemoryField::DeviceBytes => m.device_bytes,
    }
}

/// `peak` resolves to the footprint peak where the arm's markers carry one.
pub fn resolve_field(arm: &ArmReceipt, phase: Phase, field: MemoryField) -> MemoryField {
    if field != MemoryField::Peak {
        return field;
    }
    let footprint = arm
        .phases
        .iter()
        .any(|p| p.phase == phase && p.memory.footprint_peak_bytes.is_some());
    if footprint {
        MemoryField::FootprintPeakBytes
    } else {
        MemoryField::ResidentPeakBytes
    }
}

/// The largest value of `field` over the markers of `phase`, with its row index.
fn phase_value(arm: &ArmReceipt, phase: Phase, field: MemoryField) -> Option<(usize, u64)> {
    arm.phases
        .iter()
        .enumerate()
        .filter(|(_, p)| p.phase == phase)
        .filter_map(|(i, p)| Some((i, read_field(&p.memory, field)?)))
        .max_by_key(|(i, v)| (*v, std::cmp::Reverse(*i)))
}

/// The arm's external encoder process's `field` at the step named like
/// `phase`, with a pointer to it, and its own baseline: `runtime_ready`
/// (its runtime started and its file checked, no weight read), or
/// `process_start` in runs that did not record it.
struct EncoderFigures {
    at_phase: u64,
    baseline: u64,
    baseline_step: &'static str,
    pointer: String,
}

fn encoder_figures(arm: &ArmReceipt, phase: Phase, field: MemoryField) -> Option<EncoderFigures> {
    let steps = arm
        .speech
        .as_ref()?
        .runtime
        .as_ref()?
        .external_encoder
        .as_ref()?
        .memory
        .as_ref()?;
    let (step, name) = match phase {
        Phase::ModelLoaded => (&steps.model_loaded, "model_loaded"),
        Phase::StateReady => (&steps.state_ready, "state_ready"),
        _ => return None,
    };
    let read = |m: &worker_contract::EncoderMemory| match field {
        MemoryField::ResidentBytes => Some(m.resident_bytes),
        MemoryField::FootprintBytes => m.footprint_bytes,
        MemoryField::VirtualBytes => Some(m.virtual_bytes),
        _ => None,
    };
    let (baseline_step, baseline) = match &steps.runtime_ready {
        Some(ready) => ("runtime_ready", read(ready)?),
        None => ("process_start", read(&steps.process_start)?),
    };
    Some(EncoderFigures {
        at_phase: read(step)?,
        baseline,
        baseline_step,
        pointer: format!(
            "/speech/runtime/external_encoder/memory/{name}/{}",
            field_name(field)
        ),
    })
}

fn memory(ctx: &Context, g: &MemoryGate) -> Check {
    if g.with_encoder_process {
        return pair_memory(ctx, g);
    }
    let field = resolve_field(ctx.arm.arm, g.phase, g.field);
    let name = format!("{} {}", g.phase, field_name(field));
    let mut c = check(name, "bytes");
    let Some((row, measured)) = phase_value(ctx.arm.arm, g.phase, field) else {
        c.note = format!(
            "the arm has no `{}` marker with {} (phase not reached, or the platform does not report the field)",
            g.phase,
            field_name(field)
        );
        return c;
    };
    c.evidence.push(
        ctx.arm
            .at(&format!("/phases/{row}/memory/{}", field_name(field))),
    );
    c.measured = Some(measured as f64);
    let (threshold, how) = if let Some(mib) = g.ceiling_mib {
        (mib * MIB, format!("absolute ceiling {mib} MiB"))
    } else {
        let Some((_, cval)) = control_marker(ctx, g.phase, field, &mut c) else {
            return c;
        };
        c.control = Some(cval as f64);
        let Some((threshold, factor)) = scaled(g, cval) else {
            return c;
        };
        let smaller = g
            .min_reduction
            .map(|r| format!(": at least {:.1} % smaller", r * 100.0))
            .unwrap_or_default();
        (threshold, format!("control {factor}{smaller}"))
    };
    let mut c = at_most(c, measured as f64, threshold);
    c.note = format!(
        "{how}; measured {:.2} MiB, limit {:.2} MiB",
        measured as f64 / MIB,
        threshold / MIB
    );
    c
}

/// The worker and its encoder process together, against the control's pair
/// (or the control's worker plus this arm's encoder baseline).
fn pair_memory(ctx: &Context, g: &MemoryGate) -> Check {
    let field = g.field;
    let name = format!("{} {} with the encoder process", g.phase, field_name(field));
    let mut c = check(name, "bytes");
    if let Err(e) = encoder_pairing(g.phase, field) {
        c.note = e;
        return c;
    }
    let Some((row, worker)) = phase_value(ctx.arm.arm, g.phase, field) else {
        c.note = format!(
            "the arm has no `{}` marker with {}",
            g.phase,
            field_name(field)
        );
        return c;
    };
    let Some(encoder) = encoder_figures(ctx.arm.arm, g.phase, field) else {
        c.note = format!(
            "the arm's runtime report has no external encoder process with {} at {}",
            field_name(field),
            g.phase
        );
        return c;
    };
    c.evidence.push(
        ctx.arm
            .at(&format!("/phases/{row}/memory/{}", field_name(field))),
    );
    c.evidence.push(ctx.arm.at(&encoder.pointer));
    let measured = worker + encoder.at_phase;
    c.measured = Some(measured as f64);
    let (threshold, how) = if let Some(mib) = g.ceiling_mib {
        (mib * MIB, format!("absolute ceiling {mib} MiB"))
    } else {
        let Some((control, cworker)) = control_marker(ctx, g.phase, field, &mut c) else {
            return c;
        };
        // A control that runs its own encoder process is a pair too; one that
        // runs none is allowed this arm's second process's baseline.
        let (cval, allowance, whose) = match encoder_figures(control.arm, g.phase, field) {
            Some(ce) => {
                c.evidence.push(control.at(&ce.pointer));
                (
                    cworker + ce.at_phase,
                    0,
                    "the control's worker and encoder process",
                )
            }
            None => (cworker, encoder.baseline, "the control's worker"),
        };
        c.control = Some(cval as f64);
        let Some((base, factor)) = scaled(g, cval) else {
            return c;
        };
        let slack = g.allowance_mib.unwrap_or(0.0);
        (
            base + allowance as f64 + slack * MIB,
            format!(
                "{whose} {factor}{}{}",
                if allowance > 0 {
                    format!(
                        " + this arm's encoder process at {} ({:.2} MiB)",
                        encoder.baseline_step,
                        allowance as f64 / MIB
                    )
                } else {
                    String::new()
                },
                if slack > 0.0 {
                    format!(" + {slack} MiB allowance")
                } else {
                    String::new()
                }
            ),
        )
    };
    let mut c = at_most(c, measured as f64, threshold);
    c.note = format!(
        "worker {:.2} MiB + encoder process {:.2} MiB = {:.2} MiB; limit {:.2} MiB ({how})",
        worker as f64 / MIB,
        encoder.at_phase as f64 / MIB,
        measured as f64 / MIB,
        threshold / MIB
    );
    c
}

/// The control arm and its `field` at `phase`, its pointer added to `c`'s
/// evidence; `None` (with `c`'s note saying why, or the control's absence
/// already reported by `needs_control`) when there is none.
fn control_marker<'a>(
    ctx: &Context<'a>,
    phase: Phase,
    field: MemoryField,
    c: &mut Check,
) -> Option<(super::context::Located<'a>, u64)> {
    let control = *ctx.control.as_ref().ok()?;
    let Some((row, value)) = phase_value(control.arm, phase, field) else {
        c.note = format!(
            "control arm `{}` has no `{phase}` marker with {}",
            control.arm.id,
            field_name(field)
        );
        return None;
    };
    c.evidence
        .push(control.at(&format!("/phases/{row}/memory/{}", field_name(field))));
    Some((control, value))
}

/// The threshold a control value gives (`min_reduction` or `control_factor`)
/// and how, as `× …`; `None` when the gate sets neither.
fn scaled(g: &MemoryGate, control: u64) -> Option<(f64, String)> {
    match (g.min_reduction, g.control_factor) {
        (Some(r), _) => Some((control as f64 * (1.0 - r), format!("× (1 − {r})"))),
        (None, Some(f)) => Some((control as f64 * f, format!("× {f}"))),
        (None, None) => None,
    }
}
