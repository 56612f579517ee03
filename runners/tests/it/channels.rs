//! The worker's two inherited descriptors, mapped as the harness maps them.

use command_fds::{CommandFdExt, FdMapping};
use std::io::{PipeReader, PipeWriter};
use std::process::Command;
use worker_contract::{LIFELINE_FD, MESSAGE_FD};

/// Map a fresh message pipe onto fd 3 and a fresh lifeline's read end onto
/// fd 4 of `cmd`. Returns the message reader and the lifeline's write end:
/// the worker lives while the caller holds it.
pub fn attach(cmd: &mut Command) -> (PipeReader, PipeWriter) {
    let (reader, writer) = std::io::pipe().unwrap();
    let (lifeline_reader, lifeline) = std::io::pipe().unwrap();
    cmd.fd_mappings(vec![
        FdMapping {
            parent_fd: writer.into(),
            child_fd: MESSAGE_FD,
        },
        FdMapping {
            parent_fd: lifeline_reader.into(),
            child_fd: LIFELINE_FD,
        },
    ])
    .unwrap();
    (reader, lifeline)
}
