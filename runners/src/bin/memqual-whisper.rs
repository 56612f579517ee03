//! `memqual-whisper`: the whisper.cpp worker. Started by `memqual run`; reads
//! its arm spec on stdin and writes contract messages to fd 3. Every error
//! goes to memqual over fd 3 (when it is open) and to stderr, and sets the
//! exit code; a failed write to stderr or stdout never ends the worker.
//! `memqual-whisper --capabilities` prints what this build can do, as JSON:
//! its version, whisper.cpp's, the backend features and the capabilities.

fn main() -> std::process::ExitCode {
    runners::whisper::worker_main()
}
