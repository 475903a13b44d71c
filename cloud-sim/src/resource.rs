//! What every resource kind of the API is (servers, load balancers, networks, certificates): an id,
//! a name unique per kind, labels, a map in the `State`, a list filtered, sorted and paged the same
//! way, and `PUT /<collection>/{id}` to rename or relabel it. [`Resource`] says that once, so the
//! list and update endpoints (`handlers::collection`) are written once; the rules every kind shares
//! for names and labels live here too.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ApiError;
use crate::label_selector::{Labels, validate_labels};
use crate::pagination::{Listable, Query, SortKey};
use crate::state::State;

/// A resource kind with its own collection endpoint. Each kind implements it next to its handlers.
pub trait Resource: Sized {
    /// The singular name: the key of one resource in a response (`{"server": …}`) and the resource
    /// a `not_found` names.
    const KIND: &'static str;
    /// The plural name: the key of the list in a list response (`{"servers": […]}`).
    const COLLECTION: &'static str;
    /// Whether names must be valid hostnames (a server's name is its hostname).
    const HOSTNAME: bool = false;

    /// Where the world keeps this kind, by id.
    fn all(st: &State) -> &BTreeMap<u64, Self>;
    fn all_mut(st: &mut State) -> &mut BTreeMap<u64, Self>;

    fn id(&self) -> u64;
    fn name(&self) -> &str;
    fn labels(&self) -> &Labels;
    fn created_ms(&self) -> u64;
    /// Both at once, for an update: two `&mut self` accessors could not be held together.
    fn name_and_labels_mut(&mut self) -> (&mut String, &mut Labels);

    /// The resource as the API answers it.
    fn render(&self, st: &State) -> Value;

    /// Sort fields of the kind's own; `id`, `name` and `created` every kind has.
    fn own_sort_key(&self, _field: &str) -> Option<SortKey> {
        None
    }

    /// A list filter of the kind's own besides `name` and `label_selector`. It is read from the
    /// query before the world is locked, so a bad value is refused before any shared parameter
    /// is looked at, whatever the world holds.
    fn list_filter(_query: &Query) -> Result<impl Fn(&Self) -> bool, ApiError> {
        Ok(|_: &Self| true)
    }

    /// Called after `PUT` renamed resource `id`, for indexes kept by name.
    fn renamed(_st: &mut State, _id: u64, _previous: &str) {}
}

/// The accessors every kind writes the same way, for use inside its `impl Resource`: its map is
/// `st.<map>`, and its struct has `id`, `name`, `labels` and `created_ms` fields.
macro_rules! resource_accessors {
    ($map:ident) => {
        fn all(st: &$crate::state::State) -> &::std::collections::BTreeMap<u64, Self> {
            &st.$map
        }
        fn all_mut(st: &mut $crate::state::State) -> &mut ::std::collections::BTreeMap<u64, Self> {
            &mut st.$map
        }
        fn id(&self) -> u64 {
            self.id
        }
        fn name(&self) -> &str {
            &self.name
        }
        fn labels(&self) -> &$crate::label_selector::Labels {
            &self.labels
        }
        fn created_ms(&self) -> u64 {
            self.created_ms
        }
        fn name_and_labels_mut(&mut self) -> (&mut String, &mut $crate::label_selector::Labels) {
            (&mut self.name, &mut self.labels)
        }
    };
}
pub(crate) use resource_accessors;

/// Resources list through the same pipeline as the catalog and actions, which are listed but are
/// not resources (no labels, nothing to update) and implement [`Listable`] themselves.
impl<R: Resource> Listable for R {
    fn id(&self) -> u64 {
        Resource::id(self)
    }
    fn name(&self) -> Option<&str> {
        Some(Resource::name(self))
    }
    fn labels(&self) -> Option<&Labels> {
        Some(Resource::labels(self))
    }
    fn sort_key(&self, field: &str) -> Option<SortKey> {
        Some(match field {
            "id" => SortKey::Int(Resource::id(self) as i64),
            "name" => SortKey::Str(Resource::name(self).to_owned()),
            "created" => SortKey::Int(self.created_ms() as i64),
            _ => return self.own_sort_key(field),
        })
    }
}

/// `PUT /<collection>/{id}` with `{name?, labels?}`: validates a new name and labels against the
/// other resources of its kind, then applies them. Nothing is changed when anything is invalid.
pub fn apply_update<R: Resource>(
    st: &mut State,
    id: u64,
    new_name: Option<String>,
    new_labels: Option<Labels>,
) -> Result<(), ApiError> {
    let map = R::all_mut(st);
    if !map.contains_key(&id) {
        return Err(ApiError::not_found(R::KIND));
    }
    if let Some(name) = &new_name {
        validate_name(name, R::HOSTNAME)?;
        let taken = map
            .iter()
            .any(|(other, r)| *other != id && r.name() == name);
        if taken {
            return Err(ApiError::uniqueness("name"));
        }
    }
    if let Some(labels) = &new_labels {
        check_labels(labels)?;
    }
    let (name, labels) = map
        .get_mut(&id)
        .expect("checked above")
        .name_and_labels_mut();
    let previous = new_name.map(|new| std::mem::replace(name, new));
    if let Some(new) = new_labels {
        *labels = new;
    }
    if let Some(previous) = previous {
        R::renamed(st, id, &previous);
    }
    Ok(())
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
