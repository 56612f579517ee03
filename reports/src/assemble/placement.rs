//! The Core ML placement a receipt states. A runtime report sent at
//! `state_ready` can only promise it (`after_teardown`: the compute plan
//! loads the model again, so the worker asks once the measured phases are
//! over); the answer is the worker's later `placement` message, which the
//! harness wrote to `coreml-placement.json`.

use crate::ReportError;
use crate::record::files;
use run_dir::{Rel, RunDir};
use worker_contract::CoremlPlacement;

/// Why a promised placement never came.
pub const NEVER_SENT: &str = "not attributable: the worker ended without sending Core ML's \
     compute plan after teardown_done";

/// The placement for the receipt: the promise replaced by what the worker
/// sent, or by [`NEVER_SENT`]; anything else stands as the runtime report
/// gave it.
pub fn settled(
    run: &RunDir,
    arm: &Rel,
    at_state_ready: &CoremlPlacement,
) -> Result<CoremlPlacement, ReportError> {
    if *at_state_ready != CoremlPlacement::AfterTeardown {
        return Ok(at_state_ready.clone());
    }
    let path = arm.join(files::COREML_PLACEMENT);
    match run.read_json(&path)? {
        None => Ok(CoremlPlacement::not_attributable(NEVER_SENT)),
        // The harness never writes a promise there (its reader refuses one):
        // the file was edited, and a receipt must not pass it on as settled.
        Some(CoremlPlacement::AfterTeardown) => Err(ReportError::Invalid {
            path: run.display(&path),
            reason: "holds `after_teardown`, a promise, where the worker's answer belongs".into(),
        }),
        Some(sent) => Ok(sent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn a_promise_is_kept_by_the_file_or_stated_as_never_kept() {
        let (_tmp, run) = testing::run();
        let arm = testing::arm(&run, "a");
        let stock = CoremlPlacement::not_attributable("not attributable: a stock build");
        assert_eq!(settled(&run, &arm, &stock).unwrap(), stock);
        assert_eq!(
            settled(&run, &arm, &CoremlPlacement::AfterTeardown).unwrap(),
            CoremlPlacement::not_attributable(NEVER_SENT)
        );
        let sent =
            CoremlPlacement::not_attributable("not attributable: MLComputePlan needs macOS 14.4");
        run.write_json(&arm.join(files::COREML_PLACEMENT), &sent)
            .unwrap();
        assert_eq!(
            settled(&run, &arm, &CoremlPlacement::AfterTeardown).unwrap(),
            sent
        );
        // The file never overrides what the runtime report settled itself.
        assert_eq!(settled(&run, &arm, &stock).unwrap(), stock);
        // A promise where the answer belongs is refused, naming the file.
        run.write_json(
            &arm.join(files::COREML_PLACEMENT),
            &CoremlPlacement::AfterTeardown,
        )
        .unwrap();
        let err = settled(&run, &arm, &CoremlPlacement::AfterTeardown)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("coreml-placement.json") && err.contains("a promise"),
            "{err}"
        );
        // A status no worker sends is named, on the file's first line.
        run.write_json(
            &arm.join(files::COREML_PLACEMENT),
            &serde_json::json!({"status": "guessed"}),
        )
        .unwrap();
        let err = settled(&run, &arm, &CoremlPlacement::AfterTeardown)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("coreml-placement.json:1:") && err.contains("unknown variant `guessed`"),
            "{err}"
        );
    }
}
