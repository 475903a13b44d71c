//! Rules every named, labelled resource shares: what a name may be, which labels are valid, and
//! renaming or relabelling one in place.

use std::collections::BTreeMap;

use crate::error::ApiError;
use crate::label_selector::{Labels, validate_labels};
use crate::state::{Certificate, LoadBalancer, Network, Server};

/// A resource renamed and relabelled by `PUT /<things>/{id}` with `{name?, labels?}`; names are unique
/// per kind.
pub trait Updatable {
    /// The `not_found` resource name, e.g. `load_balancer`.
    const KIND: &'static str;
    /// Whether names must be valid hostnames (servers).
    const HOSTNAME: bool = false;
    fn name_and_labels(&mut self) -> (&mut String, &mut Labels);
}

/// Validates a new name and labels against the other resources of its kind, then applies them to
/// `map[id]`. Nothing is changed when anything is invalid. Returns the previous name.
pub fn apply_update<T: Updatable>(
    map: &mut BTreeMap<u64, T>,
    id: u64,
    new_name: Option<String>,
    new_labels: Option<Labels>,
) -> Result<String, ApiError> {
    if !map.contains_key(&id) {
        return Err(ApiError::not_found(T::KIND));
    }
    if let Some(name) = &new_name {
        validate_name(name, T::HOSTNAME)?;
        let taken = map
            .iter_mut()
            .any(|(other, r)| *other != id && r.name_and_labels().0 == name);
        if taken {
            return Err(ApiError::uniqueness("name"));
        }
    }
    if let Some(labels) = &new_labels {
        check_labels(labels)?;
    }
    let (name, labels) = map.get_mut(&id).expect("checked above").name_and_labels();
    let previous = name.clone();
    if let Some(new) = new_name {
        *name = new;
    }
    if let Some(new) = new_labels {
        *labels = new;
    }
    Ok(previous)
}

/// Names must be non-empty, at most 63 characters, and hostname-like for servers; other
/// resources allow a wider set, but nothing with whitespace or control characters.
pub fn validate_name(name: &str, hostname: bool) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && if hostname {
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
                && !name.starts_with('-')
                && !name.ends_with('-')
        } else {
            name.bytes().all(|b| b.is_ascii_graphic())
        };
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid_input(
            "name",
            format!("invalid name '{name}'"),
        ))
    }
}

pub fn check_labels(labels: &Labels) -> Result<(), ApiError> {
    validate_labels(labels).map_err(|e| ApiError::invalid_input("labels", e))
}

impl Updatable for Server {
    const KIND: &'static str = "server";
    const HOSTNAME: bool = true;
    fn name_and_labels(&mut self) -> (&mut String, &mut Labels) {
        (&mut self.name, &mut self.labels)
    }
}

impl Updatable for LoadBalancer {
    const KIND: &'static str = "load_balancer";
    fn name_and_labels(&mut self) -> (&mut String, &mut Labels) {
        (&mut self.name, &mut self.labels)
    }
}

impl Updatable for Network {
    const KIND: &'static str = "network";
    fn name_and_labels(&mut self) -> (&mut String, &mut Labels) {
        (&mut self.name, &mut self.labels)
    }
}

impl Updatable for Certificate {
    const KIND: &'static str = "certificate";
    fn name_and_labels(&mut self) -> (&mut String, &mut Labels) {
        (&mut self.name, &mut self.labels)
    }
}
