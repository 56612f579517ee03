//! The real-time keys of `[arm.whisper]` (`request_mode`, `chunk_ms`,
//! `idle_policy`, `unload_after_idle_s`, `gaps_s`) as a protocol writes
//! them, and their resolution into the worker's `RequestMode`,
//! `IdlePolicy` and `gaps_ms`.

use schemars::JsonSchema;
use serde::Deserialize;
use worker_contract::bounds::{CHUNK_MS, FloatBound, GAPS};
use worker_contract::{FieldError, IdlePolicy, RequestMode};

/// One entry of a whisper arm's `gaps_s`: at most an hour of silence.
pub const GAP_S: FloatBound = FloatBound::closed(0.0, 3600.0, "seconds, at most 1 hour");

/// `unload_after_idle_s`: at most an hour without speech.
pub const UNLOAD_AFTER_IDLE_S: FloatBound =
    FloatBound::closed(0.0, 3600.0, "seconds, at most 1 hour");

/// How each request's audio reaches the worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RequestModeName {
    /// The whole fixture at once (the default).
    #[default]
    File,
    /// The fixture at real-time pace in `chunk_ms` chunks, as a person
    /// speaking; stop-to-final latency is measured from its last chunk.
    Realtime,
}

/// What stays loaded between requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IdlePolicyName {
    /// Load once, keep everything until teardown (the default).
    #[default]
    Resident,
    /// Nothing loaded while idle: load at speech start, release after the final text.
    LoadOnSpeech,
    /// Release after `unload_after_idle_s` without speech; reload at the next speech start.
    UnloadAfterIdle,
}

/// Chunk length when `request_mode = "realtime"` names none.
pub const DEFAULT_CHUNK_MS: u32 = 100;

/// The real-time keys of one whisper arm, as declared.
pub struct RealtimeDecl<'a> {
    /// `request_mode`.
    pub request_mode: RequestModeName,
    /// `chunk_ms`.
    pub chunk_ms: Option<u32>,
    /// `idle_policy`.
    pub idle_policy: IdlePolicyName,
    /// `unload_after_idle_s`.
    pub unload_after_idle_s: Option<f64>,
    /// `gaps_s`.
    pub gaps_s: &'a [f64],
}

fn seconds_to_ms(s: f64) -> u64 {
    // Bounded to an hour before this is called: the cast is exact enough.
    (s * 1000.0).round() as u64
}

/// Resolve the keys; the error names the key relative to `[arm.whisper]`.
pub fn resolve(d: &RealtimeDecl) -> Result<(RequestMode, IdlePolicy, Vec<u64>), FieldError> {
    let mode = match (d.request_mode, d.chunk_ms) {
        (RequestModeName::File, Some(_)) => {
            return Err(FieldError::new(
                "chunk_ms",
                "chunk_ms needs request_mode = \"realtime\"",
            ));
        }
        (RequestModeName::File, None) => RequestMode::File,
        (RequestModeName::Realtime, chunk) => {
            let chunk_ms = chunk.unwrap_or(DEFAULT_CHUNK_MS);
            CHUNK_MS.check("chunk_ms", u64::from(chunk_ms))?;
            RequestMode::Realtime { chunk_ms }
        }
    };
    let policy = match (d.idle_policy, d.unload_after_idle_s) {
        (IdlePolicyName::UnloadAfterIdle, Some(s)) => IdlePolicy::UnloadAfterIdle {
            after_ms: seconds_to_ms(UNLOAD_AFTER_IDLE_S.check("unload_after_idle_s", s)?),
        },
        (IdlePolicyName::UnloadAfterIdle, None) => {
            return Err(FieldError::new(
                "unload_after_idle_s",
                "idle_policy = \"unload_after_idle\" needs unload_after_idle_s (seconds without speech before the release)",
            ));
        }
        (_, Some(_)) => {
            return Err(FieldError::new(
                "unload_after_idle_s",
                "unload_after_idle_s needs idle_policy = \"unload_after_idle\"",
            ));
        }
        (IdlePolicyName::Resident, None) => IdlePolicy::Resident,
        (IdlePolicyName::LoadOnSpeech, None) => IdlePolicy::LoadOnSpeech,
    };
    GAPS.check("gaps_s", d.gaps_s.len() as u64).map_err(|_| {
        FieldError::new(
            "gaps_s",
            format!("gaps_s holds {} entries: {}", d.gaps_s.len(), GAPS),
        )
    })?;
    let gaps_ms = d
        .gaps_s
        .iter()
        .enumerate()
        .map(|(i, s)| GAP_S.check(&format!("gaps_s[{i}]"), *s).map(seconds_to_ms))
        .collect::<Result<Vec<u64>, FieldError>>()?;
    Ok((mode, policy, gaps_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(gaps: &[f64]) -> RealtimeDecl<'_> {
        RealtimeDecl {
            request_mode: RequestModeName::File,
            chunk_ms: None,
            idle_policy: IdlePolicyName::Resident,
            unload_after_idle_s: None,
            gaps_s: gaps,
        }
    }

    #[test]
    fn defaults_are_file_and_resident() {
        assert_eq!(
            resolve(&decl(&[])).unwrap(),
            (RequestMode::File, IdlePolicy::Resident, vec![])
        );
    }

    #[test]
    fn realtime_and_policies_resolve_to_the_worker_units() {
        let mut d = decl(&[2.0, 0.25, 60.0]);
        d.request_mode = RequestModeName::Realtime;
        d.idle_policy = IdlePolicyName::UnloadAfterIdle;
        d.unload_after_idle_s = Some(10.0);
        assert_eq!(
            resolve(&d).unwrap(),
            (
                RequestMode::Realtime { chunk_ms: 100 },
                IdlePolicy::UnloadAfterIdle { after_ms: 10_000 },
                vec![2_000, 250, 60_000]
            )
        );
        d.chunk_ms = Some(20);
        d.idle_policy = IdlePolicyName::LoadOnSpeech;
        d.unload_after_idle_s = None;
        assert_eq!(
            resolve(&d).unwrap().0,
            RequestMode::Realtime { chunk_ms: 20 }
        );
    }

    #[test]
    fn the_accepted_edges_resolve() {
        let gaps = [0.0, 3600.0];
        let d = RealtimeDecl {
            request_mode: RequestModeName::Realtime,
            chunk_ms: Some(1000),
            idle_policy: IdlePolicyName::UnloadAfterIdle,
            unload_after_idle_s: Some(0.0),
            gaps_s: &gaps,
        };
        assert_eq!(
            resolve(&d).unwrap(),
            (
                RequestMode::Realtime { chunk_ms: 1000 },
                IdlePolicy::UnloadAfterIdle { after_ms: 0 },
                vec![0, 3_600_000]
            )
        );
        let d = RealtimeDecl {
            chunk_ms: Some(10),
            ..d
        };
        assert!(resolve(&d).is_ok());
        assert!(resolve(&decl(&[0.0; 64])).is_ok());
    }

    #[test]
    fn mismatched_or_out_of_range_keys_are_named() {
        let gaps = [1.0, f64::NAN];
        let cases: Vec<(RealtimeDecl, &str)> = vec![
            (
                RealtimeDecl {
                    chunk_ms: Some(100),
                    ..decl(&[])
                },
                "chunk_ms",
            ),
            (
                RealtimeDecl {
                    request_mode: RequestModeName::Realtime,
                    chunk_ms: Some(5),
                    ..decl(&[])
                },
                "chunk_ms",
            ),
            (
                RealtimeDecl {
                    idle_policy: IdlePolicyName::UnloadAfterIdle,
                    ..decl(&[])
                },
                "unload_after_idle_s",
            ),
            (
                RealtimeDecl {
                    unload_after_idle_s: Some(3.0),
                    ..decl(&[])
                },
                "unload_after_idle_s",
            ),
            (
                RealtimeDecl {
                    idle_policy: IdlePolicyName::UnloadAfterIdle,
                    unload_after_idle_s: Some(-1.0),
                    ..decl(&[])
                },
                "unload_after_idle_s",
            ),
            (decl(&gaps), "gaps_s[1]"),
            (decl(&[0.0; 65]), "gaps_s"),
        ];
        for (d, key) in cases {
            assert_eq!(resolve(&d).unwrap_err().key, key);
        }
    }
}
