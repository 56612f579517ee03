//! `memqual-whisper-patched`: `memqual-whisper` linked against memqual's
//! whisper.cpp patch set. It runs the same arms as the stock worker, plus
//! those that need what the set adds (`--capabilities` lists it), and serves
//! as its own external encoder process (`--external-encoder`).

fn main() -> std::process::ExitCode {
    runners::whisper::worker_main()
}
