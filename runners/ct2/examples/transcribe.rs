//! Transcribe WAV files with the pinned tiny.en CTranslate2 directory:
//! `cargo run -p runners-ct2 --example transcribe -- DIR COMPUTE_TYPE A.wav [B.wav …]`.
use ct2_convert::dir::{TINY_EN_FILES, validate};
use runners_ct2::engine::{Engine, Settings};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::Path::new(&args[1]);
    let checked = validate(dir, TINY_EN_FILES)?;
    let bytes: Vec<(String, Vec<u8>)> = checked
        .files
        .iter()
        .map(|f| Ok((f.name.clone(), std::fs::read(dir.join(&f.name))?)))
        .collect::<anyhow::Result<_>>()?;
    let files: Vec<(&str, &[u8])> = bytes
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let settings = Settings {
        compute_type: args[2].clone(),
        intra_threads: 2,
        beam_size: 1,
        max_length: 446,
        use_gpu: false,
    };
    let engine = Engine::load(&files, &settings)?;
    for wav in &args[3..] {
        let mut reader = hound::WavReader::open(wav)?;
        let samples: Vec<f32> = reader
            .samples::<i16>()
            .map(|s| s.map(|v| f32::from(v) / 32768.0))
            .collect::<Result<_, _>>()?;
        let t = std::time::Instant::now();
        let out = engine.transcribe(&samples)?;
        println!(
            "{wav}: {:?} {:?} in {:.0} ms",
            String::from_utf8_lossy(&out.text),
            out.segments,
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    Ok(())
}
