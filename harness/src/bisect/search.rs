//! The search itself, apart from running anything: which value to probe
//! next, given what the probes so far said.
//!
//! The verdict is assumed to flip once along the list (monotone). The first
//! value is the reference and the last is probed next, to confirm the list
//! flips at all; then each probe halves the values between the last one
//! known to agree with the reference and the first known to differ. A value
//! that cannot be judged (a skip) is set aside and the untested value
//! nearest the middle is probed instead, as `git bisect skip` does, so a
//! skip costs one probe and never decides anything.

/// What one probe said, relative to the first value's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Said {
    /// The same verdict as the first value.
    Same,
    /// A different verdict.
    Differs,
    /// No verdict (see [`crate::probe_verdict::Judged::Skip`]).
    Skip,
}

/// Where the search ended (positions are 0-based indexes into the list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The first value that differs, with the last one that agrees before it.
    Found {
        /// The last position known to agree with the first value.
        last_same: usize,
        /// The first position that differs.
        first_differs: usize,
    },
    /// The first value could not be judged, so there is nothing to differ from.
    ReferenceSkipped,
    /// The last value agrees with the first: the list does not flip (or
    /// flips back, which a bisection cannot see).
    NoFlip,
    /// Skipped values hide where the flip is: it is one of `candidates`
    /// (the skipped positions after `last_same`, then the first known to
    /// differ, if any).
    Ambiguous {
        /// The last position known to agree with the first value.
        last_same: usize,
        /// Every position the first differing value may be at.
        candidates: Vec<usize>,
    },
    /// The probe function asked to stop (an interrupt).
    Stopped,
}

/// The search over `n` values: call [`Search::next`] for the position to
/// probe and [`Search::record`] with what it said, until `next` is `None`;
/// then [`Search::ending`].
#[derive(Debug, Clone)]
pub struct Search {
    said: Vec<Option<Said>>,
}

impl Search {
    /// A search over `n` values (at least 2).
    pub fn new(n: usize) -> Search {
        Search {
            said: vec![None; n],
        }
    }

    fn last_same(&self) -> usize {
        (0..self.said.len())
            .rev()
            .find(|&i| self.said[i] == Some(Said::Same))
            .unwrap_or(0)
    }

    fn first_differs(&self) -> Option<usize> {
        (0..self.said.len()).find(|&i| self.said[i] == Some(Said::Differs))
    }

    /// The next position to probe, or `None` when the search is over.
    pub fn next(&self) -> Option<usize> {
        let n = self.said.len();
        match (self.said[0], self.said[n - 1]) {
            (None, _) => return Some(0),
            (Some(Said::Skip), _) => return None,
            (_, None) => return Some(n - 1),
            (_, Some(Said::Same)) => return None,
            _ => {}
        }
        let lo = self.last_same();
        let hi = self.first_differs().unwrap_or(n);
        // Halve the interval; past a skip, the untested value nearest the
        // middle (the lower one on a tie).
        let mid = (lo + hi) / 2;
        (lo + 1..hi)
            .filter(|&i| self.said[i].is_none())
            .min_by_key(|&i| (i.abs_diff(mid), i))
    }

    /// Record what the probe at `position` said.
    pub fn record(&mut self, position: usize, said: Said) {
        self.said[position] = Some(said);
    }

    /// How the search ended (call once [`Search::next`] is `None`).
    pub fn ending(&self) -> Ending {
        let n = self.said.len();
        if self.said[0] == Some(Said::Skip) {
            return Ending::ReferenceSkipped;
        }
        if self.said[0].is_none() || self.next().is_some() {
            return Ending::Stopped;
        }
        if self.said[n - 1] == Some(Said::Same) {
            return Ending::NoFlip;
        }
        let last_same = self.last_same();
        let first = self.first_differs();
        let skipped: Vec<usize> = (last_same + 1..first.unwrap_or(n))
            .filter(|&i| self.said[i] == Some(Said::Skip))
            .collect();
        match first {
            Some(first_differs) if skipped.is_empty() => Ending::Found {
                last_same,
                first_differs,
            },
            _ => Ending::Ambiguous {
                last_same,
                candidates: skipped.into_iter().chain(first).collect(),
            },
        }
    }

    /// What each position said so far (`None`: not probed).
    pub fn said(&self) -> &[Option<Said>] {
        &self.said
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run the search over `n` values whose verdict flips at `flip`
    /// (`None`: never), with the positions in `skips` unjudgeable; the
    /// probes in order and the ending.
    fn bisect(n: usize, flip: Option<usize>, skips: &[usize]) -> (Vec<usize>, Ending) {
        let mut search = Search::new(n);
        let mut probes = Vec::new();
        while let Some(i) = search.next() {
            assert!(!probes.contains(&i), "{i} probed twice: {probes:?}");
            probes.push(i);
            let said = if skips.contains(&i) {
                Said::Skip
            } else if flip.is_some_and(|f| i >= f) {
                Said::Differs
            } else {
                Said::Same
            };
            search.record(i, said);
        }
        (probes, search.ending())
    }

    #[test]
    fn nine_values_take_the_two_ends_and_three_halvings_wherever_they_flip() {
        for flip in 1..9 {
            let (probes, ending) = bisect(9, Some(flip), &[]);
            assert_eq!(
                ending,
                Ending::Found {
                    last_same: flip - 1,
                    first_differs: flip
                }
            );
            // 8 places the flip can be after both ends: 3 halvings.
            assert_eq!(probes.len(), 5, "flip at {flip}: {probes:?}");
            assert_eq!(&probes[..2], [0, 8]);
        }
        assert_eq!(bisect(9, Some(5), &[]).0, [0, 8, 4, 6, 5]);
    }

    #[test]
    fn probes_grow_with_the_logarithm_of_the_list() {
        for n in [2usize, 3, 17, 100, 1000] {
            let bound = 2 + (usize::BITS - (n - 2).max(1).leading_zeros()) as usize;
            for flip in [1, n / 2, n - 1] {
                let (probes, ending) = bisect(n, Some(flip), &[]);
                assert!(
                    matches!(ending, Ending::Found { first_differs, .. } if first_differs == flip)
                );
                assert!(probes.len() <= bound, "n {n} flip {flip}: {probes:?}");
            }
        }
        assert_eq!(bisect(2, Some(1), &[]).0, [0, 1]);
    }

    #[test]
    fn a_list_that_never_flips_stops_after_its_two_ends() {
        assert_eq!(bisect(9, None, &[]), (vec![0, 8], Ending::NoFlip));
    }

    #[test]
    fn an_unjudgeable_reference_stops_at_once() {
        assert_eq!(
            bisect(9, Some(3), &[0]),
            (vec![0], Ending::ReferenceSkipped)
        );
    }

    #[test]
    fn a_skip_probes_a_neighbour_and_is_counted() {
        // The middle (4) cannot be judged: its neighbour 3 is probed instead.
        let (probes, ending) = bisect(9, Some(6), &[4]);
        assert_eq!(&probes[..4], [0, 8, 4, 3]);
        assert_eq!(
            ending,
            Ending::Found {
                last_same: 5,
                first_differs: 6
            }
        );
        // Skips right before the flip leave it ambiguous, like git bisect.
        let (_, ending) = bisect(9, Some(5), &[3, 4]);
        assert_eq!(
            ending,
            Ending::Ambiguous {
                last_same: 2,
                candidates: vec![3, 4, 5]
            }
        );
        // A last value that cannot be judged: a differing value found inside
        // the list still ends the search.
        let (probes, ending) = bisect(9, Some(4), &[8]);
        assert_eq!(&probes[..2], [0, 8]);
        assert_eq!(
            ending,
            Ending::Found {
                last_same: 3,
                first_differs: 4
            }
        );
        // …and without one, the skipped end is all there is.
        let (_, ending) = bisect(4, None, &[3]);
        assert_eq!(
            ending,
            Ending::Ambiguous {
                last_same: 2,
                candidates: vec![3]
            }
        );
    }
}
