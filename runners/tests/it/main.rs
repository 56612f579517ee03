//! The workers' integration tests, one binary: the real `memqual-calibrate`
//! and `memqual-whisper` executables under the worker contract.

mod calibrate_worker;
mod channels;
mod worker_last_words;
