//! Which phase markers trigger a slow observation (a snapshot, a census):
//! the `at_phases` / `at_request_markers` / `every_n_requests` keys that
//! `[snapshots]` and `[census]` share, validated once.

/// Which phase markers trigger an observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkerFilter {
    /// Observe at phase markers at all.
    pub at_phases: bool,
    /// Observe the `request_begin`/`request_end` markers of every n-th
    /// measured request (the 1st, the n+1-th, …); `None`: of none.
    pub every_n_requests: Option<u64>,
}

impl MarkerFilter {
    /// Every phase marker and every request's markers.
    pub const ALL: MarkerFilter = MarkerFilter {
        at_phases: true,
        every_n_requests: Some(1),
    };

    /// From a protocol table's `at_request_markers` / `every_n_requests`;
    /// `table` names it in the error.
    pub fn from_plan(
        table: &str,
        at_phases: bool,
        at_request_markers: bool,
        every_n_requests: Option<u64>,
    ) -> Result<Self, worker_contract::FieldError> {
        let key = format!("{table}.every_n_requests");
        let every_n_requests = match (at_request_markers, every_n_requests) {
            (false, Some(n)) => {
                return Err(worker_contract::FieldError::new(
                    &key,
                    format!("{key} = {n} needs at_request_markers = true"),
                ));
            }
            (false, None) => None,
            (true, Some(n)) => Some(crate::limits::EVERY_N_REQUESTS.check(&key, n)?),
            (true, None) => Some(1),
        };
        Ok(MarkerFilter {
            at_phases,
            every_n_requests,
        })
    }
}
