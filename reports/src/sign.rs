//! Signatures: a minisign (Ed25519) signature of `receipt.json`'s bytes,
//! in `receipt.json.minisig`. Since the receipt seals the manifest and the
//! manifest every file, the signature covers the whole run directory. The
//! files are minisign's own formats, so `minisign -Vm receipt.json -p
//! KEY.pub` checks a memqual signature too.

use crate::record::files;
pub use minisign::PublicKey;
use run_dir::{Rel, RunDir, RunDirError, limits};
use serde::{Deserialize, Serialize};
use std::io::Cursor;
use std::path::Path;

/// Why signing or reading a key failed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// Reading or writing the run directory failed.
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// A key (or its file) could not be read or used.
    #[error("{path}: {reason}")]
    Key {
        /// The key file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Anything else: the receipt is missing, unsealed or not a receipt, or
    /// generating a key or signing failed; the message says which.
    #[error("{0}")]
    Other(String),
}

/// What a signature check found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignatureCheck {
    /// The signature verified with the given public key.
    pub valid: bool,
    /// The minisign key id of the signature, hex.
    pub key_id: String,
    /// The signed trusted comment.
    pub trusted_comment: String,
}

fn key_id_hex(id: &[u8]) -> String {
    // minisign prints key ids as the little-endian 64-bit number in hex.
    id.iter().rev().map(|b| format!("{b:02X}")).collect()
}

/// A public key from a minisign `.pub` file (or its one-line base64 form).
pub fn read_public_key(path: &Path) -> Result<minisign::PublicKey, SignError> {
    let text = run_dir::input::read_text(path, 64 * 1024)?;
    let key = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with("untrusted comment:"))
        .unwrap_or_default();
    minisign::PublicKey::from_base64(key).map_err(|e| SignError::Key {
        path: path.display().to_string(),
        reason: format!("not a minisign public key: {e}"),
    })
}

/// A secret key from a minisign `.key` file; an encrypted one needs `password`.
pub fn read_secret_key(
    path: &Path,
    password: Option<String>,
) -> Result<minisign::SecretKey, SignError> {
    let text = run_dir::input::read_text(path, 64 * 1024)?;
    let key = |e: minisign::PError| SignError::Key {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let sk_box = minisign::SecretKeyBox::from_string(&text).map_err(key)?;
    match password {
        Some(p) => sk_box.into_secret_key(Some(p)).map_err(key),
        None => sk_box
            .into_unencrypted_secret_key()
            .map_err(|e| SignError::Key {
                path: path.display().to_string(),
                reason: format!(
                    "{e} (an encrypted key needs its password in MEMQUAL_SIGN_PASSWORD)"
                ),
            }),
    }
}

/// Write a new unencrypted key pair in minisign's formats: `secret` (mode
/// 0600) and `public`. Neither may exist yet, not even as a dangling link,
/// and both are checked before either is written; the two must differ. A
/// half pair is never left behind: when the public key cannot be written,
/// the secret key just written is removed again.
pub fn generate(secret: &Path, public: &Path) -> Result<String, SignError> {
    let key_error = |path: &Path, reason: String| SignError::Key {
        path: path.display().to_string(),
        reason,
    };
    if secret == public {
        return Err(key_error(
            secret,
            "--secret and --public name the same file: give two paths".into(),
        ));
    }
    for path in [secret, public] {
        match std::fs::symlink_metadata(path) {
            Ok(_) => {
                return Err(key_error(
                    path,
                    "already exists (a key is never overwritten): choose a new path, or \
                     remove the old key if you mean to replace it"
                        .into(),
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(key_error(path, format!("cannot inspect: {e}"))),
        }
    }
    let other = |e: String| SignError::Other(e);
    let pair =
        minisign::KeyPair::generate_unencrypted_keypair().map_err(|e| other(e.to_string()))?;
    let pk_box = pair.pk.to_box().map_err(|e| other(e.to_string()))?;
    let sk_box = pair
        .sk
        .to_box(Some("memqual signing key (unencrypted)"))
        .map_err(|e| other(e.to_string()))?;
    write_new_key(secret, &sk_box.into_string(), 0o600)?;
    if let Err(e) = write_new_key(public, &pk_box.into_string(), 0o644) {
        return Err(match std::fs::remove_file(secret) {
            Ok(()) => e,
            Err(removing) => other(format!(
                "{e}; and the secret key {} written just before could not be removed \
                 ({removing}): remove it by hand",
                secret.display()
            )),
        });
    }
    Ok(key_id_hex(pair.pk.keynum()))
}

/// Create `path` (it must not exist; `O_EXCL` never follows a link) with
/// `mode` and write `text`; a file created but not fully written is removed.
fn write_new_key(path: &Path, text: &str, mode: u32) -> Result<(), SignError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let key_error = |reason: String| SignError::Key {
        path: path.display().to_string(),
        reason,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| key_error(format!("cannot create: {e}")))?;
    if let Err(e) = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
    {
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(key_error(format!("cannot write: {e}")));
    }
    Ok(())
}

/// Sign the sealed receipt of `run` with `key`; returns the key id.
pub fn sign(run: &RunDir, key: &minisign::SecretKey) -> Result<String, SignError> {
    let rel = Rel::file(files::RECEIPT);
    let bytes = run.read_bytes(&rel, limits::RECEIPT)?.ok_or_else(|| {
        SignError::Other(format!(
            "{} is missing: seal the run first",
            run.display(&rel).display()
        ))
    })?;
    let receipt: crate::Receipt = serde_json::from_slice(&bytes).map_err(|e| {
        SignError::Other(format!(
            "{}: not a receipt: {e}",
            run.display(&rel).display()
        ))
    })?;
    let seal = receipt.seal.as_ref().ok_or_else(|| {
        SignError::Other(format!(
            "{} is not sealed: run `memqual report` first",
            run.display(&rel).display()
        ))
    })?;
    let trusted = format!(
        "memqual receipt {} protocol {} receipt_sha256 {}",
        receipt.format_version, receipt.run.protocol_name, seal.receipt_sha256
    );
    let signature = minisign::sign(
        None,
        key,
        Cursor::new(&bytes),
        Some(&trusted),
        Some("signature of receipt.json by memqual"),
    )
    .map_err(|e| SignError::Other(format!("signing failed: {e}")))?;
    let key_id = key_id_hex(signature.keynum());
    run.write_bytes(
        &Rel::file(files::SIGNATURE),
        signature.into_string().as_bytes(),
    )?;
    Ok(key_id)
}

/// Check the signature of `receipt` (the bytes of `receipt.json`), if one is
/// present or a key is given. Problems go to `problem(path, detail)`.
pub fn check(
    run: &RunDir,
    receipt: &[u8],
    pubkey: Option<&minisign::PublicKey>,
    mut problem: impl FnMut(&str, String),
) -> Option<SignatureCheck> {
    let rel = Rel::file(files::SIGNATURE);
    let text = match run.read_bytes(&rel, 64 * 1024) {
        Ok(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
        Ok(None) => {
            if pubkey.is_some() {
                problem(
                    files::SIGNATURE,
                    "no signature, but a public key was given: sign the run with `memqual sign`"
                        .into(),
                );
            }
            return None;
        }
        Err(e) => {
            problem(files::SIGNATURE, e.to_string());
            return None;
        }
    };
    let signature = match minisign::SignatureBox::from_string(&text) {
        Ok(s) => s,
        Err(e) => {
            problem(files::SIGNATURE, format!("not a minisign signature: {e}"));
            return None;
        }
    };
    let key_id = key_id_hex(signature.keynum());
    let trusted_comment = signature.trusted_comment().unwrap_or_default();
    let Some(pubkey) = pubkey else {
        return Some(SignatureCheck {
            valid: false,
            key_id,
            trusted_comment,
        });
    };
    let valid =
        minisign::verify(pubkey, &signature, Cursor::new(receipt), true, false, false).is_ok();
    if !valid {
        problem(
            files::SIGNATURE,
            format!(
                "does not verify with the given public key (signature key id {key_id}, public key id {})",
                key_id_hex(pubkey.keynum())
            ),
        );
    }
    Some(SignatureCheck {
        valid,
        key_id,
        trusted_comment,
    })
}
