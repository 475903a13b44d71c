//! The node controller: see the crate README section in the repository README.
