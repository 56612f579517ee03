//! Commands on a finished run directory: `report` (rebuild derived files
//! over raw data that still matches its source seal), `verify`, `sign`,
//! `keygen` and `compare`. Every read goes through [`run_dir::RunDir`].
//! `verify` also checks a fleet directory (`memqual merge`).

use crate::exit::{self, Failure, failed, harness, usage};
use crate::{calibrate, console, run};
use anyhow::{Context, anyhow};
use reports::record::files;
use run_dir::raw_seal::{Change, RawCheck};
use run_dir::{Access, Rel, RunDir, RunDirError, limits};
use std::path::Path;

/// Open `dir` as a run directory; a path that is no directory is a usage
/// error, one held by another memqual process is memqual's.
fn open(dir: &Path, access: Access) -> Result<RunDir, Failure> {
    if !dir.is_dir() {
        return Err(usage(anyhow!(
            "{} is not a directory: give the run directory that holds receipt.json",
            dir.display()
        )));
    }
    RunDir::open(dir, access).map_err(|e| match e {
        RunDirError::Busy { .. } => harness(e),
        other => usage(other),
    })
}

fn describe(c: &Change) -> String {
    let digest = |d: &Option<run_dir::raw_seal::FileDigest>| {
        d.as_ref().map_or("absent".to_string(), |d| {
            format!("{} bytes, sha256 {}", d.bytes, d.sha256)
        })
    };
    format!(
        "{}: sealed as {}; now {}",
        c.path,
        digest(&c.before),
        digest(&c.after)
    )
}

/// `raw-seal.json` as it is now against the digest `manifest.json` holds
/// for it, when both exist and differ. (A manifest deleted or garbled
/// along with the seal hides the edit from this check; `verify` of the
/// sealed run before the report names both.)
fn edited_raw_seal(run: &RunDir) -> anyhow::Result<Option<Change>> {
    let seal = Rel::file(run_dir::names::RAW_SEAL);
    // A manifest that is gone or does not parse is derived, and rebuilt
    // like any other: it then holds nothing to compare with.
    let Ok(Some(manifest)) = run.read_json_limited::<reports::seal::Manifest>(
        &Rel::file(files::MANIFEST),
        limits::SEAL_RECORD,
    ) else {
        return Ok(None);
    };
    let Some(listed) = manifest
        .files
        .iter()
        .find(|f| f.path == run_dir::names::RAW_SEAL)
    else {
        return Ok(None);
    };
    if !run.has_file(&seal)? {
        return Ok(None); // a missing seal is refused by itself
    }
    let (bytes, sha256) = run.digest(&seal)?;
    if bytes == listed.bytes && sha256 == listed.sha256 {
        return Ok(None);
    }
    let digest = |bytes, sha256| Some(run_dir::raw_seal::FileDigest { bytes, sha256 });
    Ok(Some(Change {
        path: run_dir::names::RAW_SEAL.to_string(),
        before: digest(listed.bytes, listed.sha256.clone()),
        after: digest(bytes, sha256),
    }))
}

/// Why `report` will not rebuild, or `None`.
fn refusal(dir: &Path, check: &RawCheck, reseal: bool) -> Option<String> {
    if !check.irregular.is_empty() {
        let list: Vec<String> = check
            .irregular
            .iter()
            .map(|i| format!("  {} is a {}", i.path, i.what))
            .collect();
        return Some(format!(
            "{} holds entries that are not regular files or folders a run writes; memqual never \
             reads or writes through them. Remove them (they are not part of the run) and run \
             report again:\n{}",
            dir.display(),
            list.join("\n")
        ));
    }
    if check.holds() || reseal {
        return None;
    }
    let mut list: Vec<String> = check
        .changed
        .iter()
        .map(|c| format!("  CHANGED {}", describe(c)))
        .collect();
    list.extend(
        check
            .missing
            .iter()
            .map(|c| format!("  MISSING {}", describe(c))),
    );
    list.extend(check.added.iter().map(|c| {
        format!(
            "  ADDED {}: not written by the run (it sealed everything there before)",
            describe(c)
        )
    }));
    if check.seal_missing {
        return Some(format!(
            "{} has no raw-seal.json: the digests the run recorded of its raw data are gone, so \
             memqual cannot tell whether any raw file was changed since. `memqual report` will \
             not seal the raw data as it finds it. To accept it anyway, run `memqual report \
             --reseal {}`: the seal is rebuilt from the files as found and says so, and the \
             receipt, summary.md, report.html and `memqual verify` all report the run as resealed.",
            dir.display(),
            dir.display()
        ));
    }
    Some(format!(
        "raw data in {} no longer matches what the run sealed (raw-seal.json):\n{}\n\
         `memqual report` rebuilds only derived files from the raw data the run recorded. To \
         accept the changed data anyway, run `memqual report --reseal {}`: the seal keeps the \
         old digests, the receipt says the run was resealed, and `memqual verify` reports it.",
        dir.display(),
        list.join("\n"),
        dir.display()
    ))
}

/// `memqual report DIR [--reseal]`.
pub fn report(dir: &Path, reseal: bool) -> Result<u8, Failure> {
    let run = open(dir, Access::Rebuild)?;
    if ::fleet::fleet::is_fleet(&run) {
        return Err(usage(anyhow!(
            "{} is a fleet directory (memqual merge), not a run directory: nothing to rebuild; \
             `memqual verify {}` checks its seal",
            dir.display(),
            dir.display()
        )));
    }
    // A folder that is not a run (no run.json) is refused before anything
    // is walked or written: report used to seal whatever it found there
    // (and walk a whole file system for `report /`) before it refused.
    let is_run = run
        .has_file(&Rel::file(run_dir::names::RUN))
        .with_context(|| format!("cannot read {}", dir.display()))
        .map_err(usage)?;
    if !is_run {
        return Err(usage(anyhow!(
            "{} is not a memqual run directory: it has no run.json, so there is nothing to \
             rebuild, and nothing was written. Give the folder `memqual run`, `soak` or \
             `calibrate` wrote (it holds run.json, raw-seal.json and arms/)",
            dir.display()
        )));
    }
    // The raw data is checked before anything is assembled: assembling a
    // long soak writes its `phase-rows.jsonl`, and a refused report must
    // leave the run as it was. (Hashing runs at over 1 GB/s: 0.4 s of a
    // 24-hour run's 8 s report.)
    let check = run
        .check_raw()
        .with_context(|| format!("cannot check the raw data of {}", dir.display()))
        .map_err(usage)?;
    if let Some(why) = refusal(dir, &check, reseal) {
        return Err(failed(anyhow!(why)));
    }
    // raw-seal.json itself, against the digest the last seal's manifest
    // holds: every command that changes it writes a new manifest at once,
    // so a difference is an edit (an accident, or digests rewritten to
    // match edited data), refused like one.
    let seal_edit = edited_raw_seal(&run)
        .with_context(|| format!("cannot check the raw seal of {}", dir.display()))
        .map_err(usage)?;
    if let (Some(c), false) = (&seal_edit, reseal) {
        return Err(failed(anyhow!(
            "{} changed after the run was last sealed: {}. memqual cannot tell which raw \
             digests were rewritten, so it does not rebuild over them. `memqual verify {}` names \
             the difference; to accept it anyway, run `memqual report --reseal {}`, which the \
             receipt, summary.md, report.html and verify then report.",
            run.display(&Rel::file(run_dir::names::RAW_SEAL)).display(),
            describe(c),
            dir.display(),
            dir.display()
        )));
    }
    // The new raw seal is planned, not written: it replaces raw-seal.json
    // only once the run has been re-derived from the data it accepts and
    // every derived file is written. A reseal over data that makes no
    // receipt (a CSV that does not parse) leaves the old seal, and so the
    // evidence of what the run recorded, as it was.
    let now = chrono::Utc::now().to_rfc3339();
    let before = run.raw_seal().map_err(usage)?.reseals.len();
    let (mut planned, rewrite) = run
        .plan_raw_seal(
            &check,
            reseal.then_some((now.as_str(), env!("CARGO_PKG_VERSION"))),
        )
        .map_err(harness)?;
    let seal_edited = seal_edit.is_some();
    if let Some(c) = seal_edit {
        // Accepted by --reseal (refused above otherwise): recorded with it.
        if planned.reseals.len() > before {
            if let Some(last) = planned.reseals.last_mut() {
                last.changes.push(c);
            }
        } else {
            planned.reseals.push(run_dir::raw_seal::Reseal {
                at_utc: now.clone(),
                memqual_version: env!("CARGO_PKG_VERSION").to_string(),
                changes: vec![c],
                seal_was_missing: false,
            });
        }
    }
    // Raw data that does not make a receipt (a record that does not parse,
    // resealed on purpose) is the input's fault: exit 2, not 3. A write
    // that failed (a long soak's phase-rows.jsonl on a full disk) is not.
    let (mut receipt, series) = run::assemble(&run).map_err(|e| {
        let wrote = e.chain().any(|c| {
            matches!(
                c.downcast_ref::<reports::ReportError>(),
                Some(reports::ReportError::RunDir(run_dir::RunDirError::Io {
                    op: "write",
                    ..
                }))
            )
        });
        let e = if rewrite {
            e.context(format!(
                "{} was left as it was: nothing was resealed",
                run.display(&Rel::file(run_dir::names::RAW_SEAL)).display()
            ))
        } else {
            e
        };
        if wrote { harness(e) } else { usage(e) }
    })?;
    reports::reassess_integrity_over(&run, planned.clone(), &mut receipt)
        .with_context(|| format!("cannot assemble the receipt of {}", dir.display()))
        .map_err(usage)?;
    let receipt = run::publish(&run, (receipt, series), |run, receipt| {
        // Calibration runs keep their expected-vs-measured table, rebuilt too.
        if run.has_file(&Rel::file(files::CALIBRATION))? {
            let table = calibrate::evaluate(&dir.display().to_string(), receipt);
            run.write_json(&Rel::file(files::CALIBRATION), &table)?;
        }
        // Last before the manifest, which lists it: every derived file is
        // written from the data this seal accepts.
        if rewrite {
            run.commit_raw_seal(&planned)?;
        }
        Ok(())
    })
    .map_err(harness)?;
    console::outln(format_args!(
        "{}: raw data {}; receipt, report.html, summary.md, phases.csv and trace.json rebuilt and sealed",
        dir.display(),
        if check.seal_missing {
            "RESEALED (raw-seal.json was missing: the seal was rebuilt from the files as found)"
                .to_string()
        } else if seal_edited {
            "RESEALED (raw-seal.json itself had changed after the run was last sealed)".to_string()
        } else if check.holds() {
            "matches its seal".to_string()
        } else {
            format!(
                "RESEALED ({} file(s) changed, removed or added after the run)",
                check.changed.len() + check.missing.len() + check.added.len()
            )
        }
    ));
    if !receipt.integrity.complete {
        console::outln(format_args!("the receipt is marked incomplete:"));
        for note in &receipt.integrity.notes {
            console::outln(format_args!("  {note}"));
        }
    }
    Ok(exit::PASS)
}

/// `memqual verify DIR [--pubkey FILE] [--json]`.
pub fn verify(dir: &Path, pubkey: Option<&Path>, json: bool) -> Result<u8, Failure> {
    let key = pubkey
        .map(reports::sign::read_public_key)
        .transpose()
        .map_err(usage)?;
    let run = open(dir, Access::Read)?;
    let fleet = ::fleet::fleet::is_fleet(&run);
    if fleet && key.is_some() {
        return Err(usage(anyhow!(
            "{} is a fleet directory (memqual merge), which carries no signature:              `memqual merge --pubkey` checked each run's",
            dir.display()
        )));
    }
    let v = if fleet {
        ::fleet::fleet::verify(&run)
    } else {
        reports::seal::verify(&run, key.as_ref())
    };
    if json {
        console::print_json(&v)?;
    } else {
        for p in &v.problems {
            console::outln(format_args!(
                "{} {}: {}",
                p.kind.to_uppercase(),
                p.path,
                p.detail
            ));
        }
        if v.holds() {
            console::outln(format_args!(
                "{}: seal verified ({} files)",
                dir.display(),
                v.files_checked
            ));
        } else {
            console::outln(format_args!(
                "{}: seal BROKEN ({} problems)",
                dir.display(),
                v.problems.len()
            ));
        }
        if !v.incomplete.is_empty() {
            console::outln(format_args!(
                "the run is INCOMPLETE (receipt.json integrity.complete = false):"
            ));
            for note in &v.incomplete {
                console::outln(format_args!("  {note}"));
            }
        }
        if !fleet {
            console::outln(format_args!("{}", signature_line(&v)));
        }
    }
    Ok(if v.holds() {
        exit::PASS
    } else {
        exit::ARM_FAILED
    })
}

fn signature_line(v: &reports::seal::Verification) -> String {
    match &v.signature {
        Some(s) if s.valid => format!(
            "signature valid: key id {}, trusted comment \"{}\"",
            s.key_id, s.trusted_comment
        ),
        Some(s) if v.problems.iter().any(|p| p.kind == "signature") => {
            format!("signature INVALID (key id {})", s.key_id)
        }
        Some(s) => format!(
            "signed with key id {}, not checked: give --pubkey FILE to check the signature",
            s.key_id
        ),
        None => "unsigned: the seal detects accidental changes, not forgery (anyone who can write \
                 the directory can recompute every digest); `memqual sign` adds a minisign signature"
            .into(),
    }
}

/// `memqual sign DIR --key FILE`: the seal must hold first.
pub fn sign(dir: &Path, key: &Path) -> Result<u8, Failure> {
    let password = std::env::var("MEMQUAL_SIGN_PASSWORD").ok();
    let secret = reports::sign::read_secret_key(key, password).map_err(usage)?;
    let run = open(dir, Access::Rebuild)?;
    let v = reports::seal::verify(&run, None);
    let broken: Vec<&reports::seal::Problem> = v
        .problems
        .iter()
        .filter(|p| p.kind != "signature")
        .collect();
    if !broken.is_empty() {
        let list: Vec<String> = broken
            .iter()
            .map(|p| format!("  {} {}: {}", p.kind.to_uppercase(), p.path, p.detail))
            .collect();
        return Err(failed(anyhow!(
            "the seal of {} does not hold, so it is not signed:\n{}",
            dir.display(),
            list.join("\n")
        )));
    }
    let key_id = reports::sign::sign(&run, &secret).map_err(harness)?;
    console::outln(format_args!(
        "{}: receipt.json signed with key id {key_id} ({}); check it with \
         `memqual verify {} --pubkey KEY.pub` or `minisign -Vm {} -p KEY.pub`",
        dir.display(),
        files::SIGNATURE,
        dir.display(),
        run.display(&Rel::file(files::RECEIPT)).display()
    ));
    Ok(exit::PASS)
}

/// `memqual keygen --secret FILE --public FILE`.
pub fn keygen(secret: &Path, public: &Path) -> Result<u8, Failure> {
    let id = reports::sign::generate(secret, public).map_err(usage)?;
    console::outln(format_args!(
        "key id {id}: secret key {} (unencrypted, mode 0600: keep it in your CI's secret store), \
         public key {}",
        secret.display(),
        public.display()
    ));
    Ok(exit::PASS)
}

/// The receipt of a run directory, read bounded, with what verifying the
/// run's seal found (as `memqual verify` checks it, without a signature):
/// the receipt's figures are the sealed ones only when that holds.
pub fn read_receipt(
    dir: &Path,
) -> Result<(reports::Receipt, reports::seal::Verification), Failure> {
    let run = open(dir, Access::Read)?;
    let seal = reports::seal::verify(&run, None);
    let receipt = run
        .read_json_limited(&Rel::file(files::RECEIPT), limits::RECEIPT)
        .map_err(usage)?
        .ok_or_else(|| {
            // `report` only rebuilds a run: advising it for a folder that is
            // not one (`compare / /`) would send the user somewhere useless.
            if run
                .has_file(&Rel::file(run_dir::names::RUN))
                .unwrap_or(false)
            {
                usage(anyhow!(
                    "{} has no receipt.json: run `memqual report {}` first",
                    dir.display(),
                    dir.display()
                ))
            } else {
                usage(anyhow!(
                    "{} has no receipt.json and no run.json: it is not a memqual run directory",
                    dir.display()
                ))
            }
        })?;
    Ok((receipt, seal))
}
