//! Where the repository is, for the files the tests read from it.

/// The repository root. Read at run time from `CARGO_MANIFEST_DIR`, which cargo sets for the test
/// or binary it runs, before the path compiled in: a library built in another checkout and reused
/// from a shared target directory (CI's clone and a working tree share `$HOME`'s) would name that
/// other checkout.
pub fn workspace_root() -> std::path::PathBuf {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    // Every package is one directory below the root.
    dir.parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or(dir)
}
