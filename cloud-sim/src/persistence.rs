//! The `--state` file: the whole world as JSON, written atomically (temp file + rename) so a
//! crash mid-write never leaves a torn file behind.

use std::io;
use std::path::Path;

use crate::error::StartError;
use crate::state::State;

/// Loads the world; a missing file is an empty world (first start).
pub fn load(path: &Path) -> Result<State, StartError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(State::default()),
        Err(source) => {
            return Err(StartError::ReadState {
                path: path.to_owned(),
                source,
            });
        }
    };
    let mut state: State =
        serde_json::from_slice(&bytes).map_err(|source| StartError::ParseState {
            path: path.to_owned(),
            source,
        })?;
    state.rebuild_indexes();
    Ok(state)
}

pub fn save(path: &Path, state: &State) -> io::Result<()> {
    let json = serde_json::to_vec(state).map_err(io::Error::other)?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, json)?;
    std::fs::rename(&tmp, path)
}
