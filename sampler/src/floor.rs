//! The floor a Linux tick is measured against: `pread` of exactly the files a
//! tick reads, on descriptors kept open, into one buffer, nothing parsed. What
//! a tick costs above this is the sampler's own work (parsing, filling the
//! row); the floor itself is the kernel producing and copying the text.
//!
//! Used by the `tick_floor` bench; the sampler never calls it.

use crate::ProcessProbe;
use crate::platform::SYSTEM_FILES;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// The open files of one tick and a read buffer as large as the probes' first one.
pub struct Floor {
    process: Vec<File>,
    system: Vec<File>,
    buf: Vec<u8>,
}

impl Floor {
    /// Open the process files of `pid` and the system files a tick reads
    /// (`/proc/pressure/memory` is skipped where the kernel has no PSI, as the probe skips it).
    pub fn open(pid: i32) -> std::io::Result<Floor> {
        let process = ProcessProbe::files(pid)
            .iter()
            .map(File::open)
            .collect::<std::io::Result<_>>()?;
        let system = SYSTEM_FILES
            .iter()
            .filter_map(|p| File::open(p).ok())
            .collect();
        Ok(Floor {
            process,
            system,
            buf: vec![0; 16 << 10],
        })
    }

    /// Read the process files whole; returns the bytes read.
    pub fn read_process(&mut self) -> std::io::Result<usize> {
        read_all(&self.process, &mut self.buf)
    }

    /// Read the system files whole; returns the bytes read.
    pub fn read_system(&mut self) -> std::io::Result<usize> {
        read_all(&self.system, &mut self.buf)
    }
}

/// `pread` each file from offset 0 until it returns 0, as the probes do.
fn read_all(files: &[File], buf: &mut [u8]) -> std::io::Result<usize> {
    let mut total = 0;
    for f in files {
        let mut len = 0;
        loop {
            match f.read_at(&mut buf[len..], len as u64)? {
                0 => break,
                n => len += n,
            }
            if len == buf.len() {
                return Err(std::io::Error::other("a /proc file over 16 KiB"));
            }
        }
        total += len;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_reads_as_many_bytes_as_the_files_hold() {
        let pid = std::process::id() as i32;
        let mut floor = Floor::open(pid).unwrap();
        let statm = std::fs::read(format!("/proc/{pid}/statm")).unwrap();
        // status changes size with the process; statm and meminfo are stable enough to bound.
        assert!(floor.read_process().unwrap() > statm.len() + 500);
        let meminfo = std::fs::read("/proc/meminfo").unwrap();
        let vmstat = std::fs::read("/proc/vmstat").unwrap();
        let sys = floor.read_system().unwrap();
        assert!(sys >= meminfo.len() + vmstat.len() - 200, "{sys}");
    }
}
