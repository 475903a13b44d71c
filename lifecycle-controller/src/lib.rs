//! The lifecycle controller: see the crate README section in the repository README.
