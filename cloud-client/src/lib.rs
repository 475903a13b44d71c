//! Cloud-agnostic provider traits the four controllers consume, and their Hetzner Cloud implementation.
//!
//! This crate knows nothing about Kubernetes controllers: it speaks plain Rust types.
