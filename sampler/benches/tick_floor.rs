//! Tick cost against its floor, both after an idle gap (the sampler's real
//! cadence, which criterion's back-to-back loop cannot model) and warm.
//!
//! The floor is `pread` of exactly the files a tick reads on open descriptors,
//! nothing parsed ([`sampler::floor::Floor`]). Cold: one measurement per gap,
//! floor and tick alternating in ABBA order so drift and ordering cancel; each
//! measurement times the process part and then the system part in thread CPU
//! time. Warm: the same, back to back without a gap. Prints the medians and
//! tick / floor for the process part, the system part and the total, and
//! the average tick at the sampler's cadences (process files every 50 ms
//! tick, system files every `DEFAULT_SYSTEM_PERIOD`).
//!
//! `cargo bench -p sampler --bench tick_floor -- [--pid PID] [--gap-ms 50] [--ticks 400] [--warm 2000] [--load N]`
//! (the target defaults to a child holding 200 MiB resident, like a loaded worker).
//!
//! `--load N` runs N child processes that stream through 64 MiB of floats
//! each, multiply-adding, for the whole measurement: what the sampler meets
//! beside a worker that keeps the cores busy. Without it the host is idle
//! between measurements (docs/measurement.md compares the two).

#[cfg(target_os = "linux")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    linux::main()
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!(
        "tick_floor: the raw-read floor is a Linux measure; see the tickcost example elsewhere"
    );
}

#[cfg(target_os = "linux")]
mod linux {
    use sampler::floor::Floor;
    use sampler::{ProcessProbe, SeriesRow, SystemProbe, clock};
    use std::time::Duration;

    struct Args {
        pid: Option<i32>,
        gap_ms: u64,
        ticks: usize,
        warm: usize,
        load: usize,
    }

    fn args() -> Result<Args, String> {
        let mut a = Args {
            pid: None,
            gap_ms: 50,
            ticks: 400,
            warm: 2000,
            load: 0,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
            let bad = |name: &str, v: &str| format!("{name}: not a number: {v:?}");
            match flag.as_str() {
                "--pid" => {
                    let v = value("--pid")?;
                    a.pid = Some(v.parse().map_err(|_| bad("--pid", &v))?);
                }
                "--gap-ms" => {
                    let v = value("--gap-ms")?;
                    a.gap_ms = v.parse().map_err(|_| bad("--gap-ms", &v))?;
                }
                "--ticks" => {
                    let v = value("--ticks")?;
                    a.ticks = v.parse::<usize>().map_err(|_| bad("--ticks", &v))?.max(4);
                }
                "--warm" => {
                    let v = value("--warm")?;
                    a.warm = v.parse::<usize>().map_err(|_| bad("--warm", &v))?.max(4);
                }
                "--load" => {
                    let v = value("--load")?;
                    a.load = v.parse().map_err(|_| bad("--load", &v))?;
                    // 64 MiB each: a typo must not start a thousand of them.
                    if a.load > MAX_LOAD {
                        return Err(format!("--load {v}: at most {MAX_LOAD} load processes"));
                    }
                }
                // cargo bench passes --bench to harness = false targets.
                "--bench" => {}
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        Ok(a)
    }

    /// Process-part and system-part CPU nanoseconds of one measurement.
    #[derive(Default)]
    struct Parts {
        process: Vec<u64>,
        system: Vec<u64>,
    }

    impl Parts {
        fn push(&mut self, p: u64, s: u64) {
            self.process.push(p);
            self.system.push(s);
        }
        fn medians(&self) -> [f64; 3] {
            let total: Vec<u64> = self
                .process
                .iter()
                .zip(&self.system)
                .map(|(a, b)| a + b)
                .collect();
            [
                median_us(&self.process),
                median_us(&self.system),
                median_us(&total),
            ]
        }
    }

    fn median_us(v: &[u64]) -> f64 {
        let mut v = v.to_vec();
        v.sort_unstable();
        v[v.len() / 2] as f64 / 1e3
    }

    struct Probes {
        process: ProcessProbe,
        system: SystemProbe,
        floor: Floor,
    }

    impl Probes {
        fn tick(&mut self) -> (u64, u64) {
            let mut row = SeriesRow::default();
            let a = clock::thread_cpu_ns();
            let p = self.process.sample(&mut row);
            let b = clock::thread_cpu_ns();
            let s = self.system.sample(&mut row);
            let c = clock::thread_cpu_ns();
            std::hint::black_box((&row, p.is_ok(), s.is_ok()));
            (b - a, c - b)
        }
        fn floor(&mut self) -> (u64, u64) {
            let a = clock::thread_cpu_ns();
            let p = self.floor.read_process();
            let b = clock::thread_cpu_ns();
            let s = self.floor.read_system();
            let c = clock::thread_cpu_ns();
            std::hint::black_box((p.ok(), s.ok()));
            (b - a, c - b)
        }
    }

    /// ABBA: positions 0 and 3 of every four are the floor, 1 and 2 the tick.
    fn measure(p: &mut Probes, n: usize, gap: Duration) -> (Parts, Parts) {
        let (mut floor, mut tick) = (Parts::default(), Parts::default());
        for i in 0..n {
            if !gap.is_zero() {
                std::thread::sleep(gap);
            }
            if matches!(i % 4, 0 | 3) {
                let (a, b) = p.floor();
                floor.push(a, b);
            } else {
                let (a, b) = p.tick();
                tick.push(a, b);
            }
        }
        (floor, tick)
    }

    fn report(what: &str, floor: &Parts, tick: &Parts) {
        let (f, t) = (floor.medians(), tick.medians());
        println!(
            "{what}: {} floor and {} tick measurements, median thread CPU µs",
            floor.process.len(),
            tick.process.len()
        );
        println!(
            "  {:<8} {:>9} {:>9} {:>11}",
            "", "floor", "tick", "tick/floor"
        );
        for (i, part) in ["process", "system", "total"].iter().enumerate() {
            println!(
                "  {part:<8} {:>9.1} {:>9.1} {:>11.3}",
                f[i],
                t[i],
                t[i] / f[i]
            );
        }
        // The sampler reads the system files once per system period (1 s
        // by default), so its average tick at 50 ms is the process part plus
        // a twentieth of the system part; the floor is redefined the same way.
        let per = (sampler::DEFAULT_SYSTEM_PERIOD.as_millis() / 50).max(1) as f64;
        let (fa, ta) = (f[0] + f[1] / per, t[0] + t[1] / per);
        println!(
            "  {:<8} {fa:>9.1} {ta:>9.1} {:>11.3}   (average tick at 50 ms, system every {per} ticks)",
            "cadence",
            ta / fa
        );
    }

    /// A child that holds 200 MiB resident until killed, or until its
    /// parent is gone (as the load children do).
    fn spawn_target() -> std::io::Result<std::process::Child> {
        std::process::Command::new("python3")
            .args(["-c", "import os,sys,time\np=os.getppid()\nb=bytearray(200<<20)\nfor i in range(0,len(b),4096): b[i]=1\nsys.stdout.write('ready\\n'); sys.stdout.flush()\nwhile os.getppid()==p: time.sleep(0.5)"])
            .stdout(std::process::Stdio::piped())
            .spawn()
    }

    /// The flag a load child is started with; it never returns.
    const STREAM_FLAG: &str = "--stream-forever";
    /// The most load processes `--load` starts.
    const MAX_LOAD: usize = 64;

    /// A load child's work: multiply-add over 64 MiB of floats, again and
    /// again, so each pass evicts what the last one left in cache. It ends
    /// when its parent does (checked every pass), so a bench killed with
    /// SIGKILL leaves no load behind.
    fn stream_forever() -> ! {
        let parent = std::os::unix::process::parent_id();
        let mut v = vec![1.0f32; 16 << 20];
        let mut acc = 0.0f32;
        loop {
            if std::os::unix::process::parent_id() != parent {
                std::process::exit(0);
            }
            for x in v.iter_mut() {
                acc = acc.mul_add(0.999, *x);
                *x = acc * 1e-3 + 1.0;
            }
            std::hint::black_box(acc);
        }
    }

    /// The bench's children (the target and the load), killed and reaped
    /// when it drops: on every return, an error's included.
    #[derive(Default)]
    struct Children(Vec<std::process::Child>);

    impl Children {
        /// Start `n` load children; each enters the guard as it starts, so
        /// a failed spawn kills those before it.
        fn start_load(&mut self, n: usize) -> std::io::Result<()> {
            let exe = std::env::current_exe()?;
            for _ in 0..n {
                self.0
                    .push(std::process::Command::new(&exe).arg(STREAM_FLAG).spawn()?);
            }
            Ok(())
        }
    }

    impl Drop for Children {
        fn drop(&mut self) {
            for c in &mut self.0 {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    pub fn main() -> Result<(), Box<dyn std::error::Error>> {
        if std::env::args().nth(1).as_deref() == Some(STREAM_FLAG) {
            stream_forever();
        }
        let args = args()?;
        let mut children = Children::default();
        let pid = match args.pid {
            Some(pid) => pid,
            None => {
                children.0.push(spawn_target()?);
                let c = &mut children.0[0];
                let mut line = String::new();
                if let Some(out) = c.stdout.as_mut() {
                    std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line)?;
                }
                c.id() as i32
            }
        };
        let mut probes = Probes {
            process: ProcessProbe::new(pid)?,
            system: SystemProbe::new(),
            floor: Floor::open(pid)?,
        };
        children.start_load(args.load)?;
        println!(
            "target pid {pid}; cold: {} ms gap before each measurement; {} load process(es)",
            args.gap_ms, args.load
        );
        // Warm up the code paths once; then the cold run, then the warm one.
        measure(&mut probes, 40, Duration::ZERO);
        let (f, t) = measure(&mut probes, args.ticks, Duration::from_millis(args.gap_ms));
        report(&format!("cold ({} ms gap)", args.gap_ms), &f, &t);
        let (f, t) = measure(&mut probes, args.warm, Duration::ZERO);
        report("warm (back to back)", &f, &t);
        Ok(())
    }
}
