//! Which load balancer types, locations and network zones exist, so a typo in `type`, `location`
//! or `network-zone` is refused with the accepted values before the create (or `change_type`)
//! that the API would refuse after we already wrote.
//!
//! The values Hetzner has today are built in and cost no call; anything else is looked up in the
//! project's catalog (`GET /locations`, `GET /load_balancer_types`) so a location or type added
//! later works without a release. The fetched catalog is cached; a miss refreshes it at most every
//! [`MISS_REFRESH`].

use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use serde::Deserialize;
use tokio::time::Instant;

use super::annotations as a;
use super::plan::{DEFAULT_LB_TYPE, type_change};
use super::spec::LbSpec;
use crate::error::CloudError;
use crate::hcloud::pagination::{Page, list_all};
use crate::hcloud::transport::{Req, Transport};
use crate::hcloud::wire::{LoadBalancer, Meta};

/// Hetzner's locations and their network zones as of 2026-08.
const KNOWN_LOCATIONS: &[(&str, &str)] = &[
    ("fsn1", "eu-central"),
    ("nbg1", "eu-central"),
    ("hel1", "eu-central"),
    ("ash", "us-east"),
    ("hil", "us-west"),
    ("sin", "ap-southeast"),
];
/// Hetzner's load balancer types as of 2026-08.
const KNOWN_LB_TYPES: &[&str] = &["lb11", "lb21", "lb31"];

/// The built-in entries, made once.
static BUILTIN: LazyLock<Entries> = LazyLock::new(Entries::builtin);

/// The network zone of `location` among the locations Hetzner has today; `None` for another.
pub(crate) fn known_zone(location: &str) -> Option<&'static str> {
    BUILTIN.zone_of(location)
}

/// A value missing from the cached catalog refetches it only when the cache is older than this,
/// so a Service with a typo costs no call per reconcile.
const MISS_REFRESH: Duration = Duration::from_secs(300);

/// Locations (with their zone) and load balancer type names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entries {
    pub locations: Vec<(String, String)>,
    pub lb_types: Vec<String>,
}

impl Entries {
    fn builtin() -> Self {
        Self {
            locations: KNOWN_LOCATIONS
                .iter()
                .map(|(l, z)| (l.to_string(), z.to_string()))
                .collect(),
            lb_types: KNOWN_LB_TYPES.iter().map(|t| t.to_string()).collect(),
        }
    }

    /// The network zone of `location`, if it exists.
    pub fn zone_of(&self, location: &str) -> Option<&str> {
        self.locations
            .iter()
            .find(|(l, _)| l == location)
            .map(|(_, z)| z.as_str())
    }

    pub fn has_zone(&self, zone: &str) -> bool {
        self.locations.iter().any(|(_, z)| z == zone)
    }

    pub fn has_lb_type(&self, t: &str) -> bool {
        self.lb_types.iter().any(|x| x == t)
    }

    pub fn location_names(&self) -> String {
        self.locations
            .iter()
            .map(|(l, _)| l.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Locations of `zone`, for "expected a location in eu-central: fsn1, nbg1, hel1".
    pub fn locations_in(&self, zone: &str) -> String {
        self.locations
            .iter()
            .filter(|(_, z)| z == zone)
            .map(|(l, _)| l.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn zone_names(&self) -> String {
        let mut zones: Vec<&str> = Vec::new();
        for (_, z) in &self.locations {
            if !zones.contains(&z.as_str()) {
                zones.push(z);
            }
        }
        zones.join(", ")
    }

    pub fn lb_type_names(&self) -> String {
        self.lb_types.join(", ")
    }
}

/// What a reconcile needs the catalog to have: the type of a new load balancer, or the one a
/// `change_type` switches to, and for a new one its location and network zone; each with what to
/// name when it is missing (the annotation or env variable it came from).
#[derive(Debug)]
pub struct Wanted<'a> {
    lb_type: Option<&'a str>,
    location: Option<&'a str>,
    zone: Option<&'a str>,
    type_field: String,
    location_field: String,
    zone_field: String,
}

impl<'a> Wanted<'a> {
    /// `None` when there is nothing to look up: an existing load balancer that keeps its type.
    pub fn of(spec: &'a LbSpec, lb: Option<&LoadBalancer>) -> Option<Self> {
        let (lb_type, location, zone) = match lb {
            None => (
                spec.lb_type.as_deref().unwrap_or(DEFAULT_LB_TYPE),
                spec.location.as_deref(),
                spec.network_zone.as_deref(),
            ),
            Some(lb) => (type_change(lb, spec)?, None, None),
        };
        Some(Self {
            lb_type: Some(lb_type),
            location,
            zone,
            type_field: spec.set_by(a::TYPE),
            location_field: spec.set_by(a::LOCATION),
            zone_field: spec.set_by(a::NETWORK_ZONE),
        })
    }

    /// Every wanted value is in `e`, and a location lies in the zone when both are set.
    pub fn check(&self, e: &Entries) -> Result<(), CloudError> {
        if let Some(t) = self.lb_type
            && !e.has_lb_type(t)
        {
            return Err(CloudError::invalid_input(
                self.type_field.clone(),
                t,
                format!("a load balancer type: {}", e.lb_type_names()),
            ));
        }
        if let Some(z) = self.zone
            && !e.has_zone(z)
        {
            return Err(CloudError::invalid_input(
                self.zone_field.clone(),
                z,
                format!("a network zone: {}", e.zone_names()),
            ));
        }
        if let Some(l) = self.location {
            match (e.zone_of(l), self.zone) {
                (None, _) => {
                    return Err(CloudError::invalid_input(
                        self.location_field.clone(),
                        l,
                        format!("a location: {}", e.location_names()),
                    ));
                }
                (Some(lz), Some(z)) if lz != z => {
                    return Err(CloudError::invalid_input(
                        self.location_field.clone(),
                        l,
                        format!(
                            "a location in network zone {z} ({}): {}; or only one of the two \
                             ({l} is in {lz})",
                            self.zone_field,
                            e.locations_in(z)
                        ),
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// What a check needs to know: is every value present.
pub type Check<'a> = dyn Fn(&Entries) -> Result<(), CloudError> + Send + Sync + 'a;

/// The built-in catalog plus, once something was not in it, the project's own.
#[derive(Debug, Default)]
pub struct Catalog {
    fetched: Mutex<Option<(Instant, Entries)>>,
}

impl Catalog {
    /// Runs `check` against the built-in entries, then (only if it failed) against the fetched
    /// catalog, fetching it when there is none or it is older than [`MISS_REFRESH`]. Returns the
    /// check's error when the value is in neither.
    pub async fn check(&self, t: &Transport, check: &Check<'_>) -> Result<(), CloudError> {
        self.first_found(t, check).await
    }

    /// The network zone of `location` as the catalog reports it; `None` when no location of
    /// that name exists (a miss refetches the catalog as [`check`](Self::check) does).
    pub async fn zone_of(
        &self,
        t: &Transport,
        location: &str,
    ) -> Result<Option<String>, CloudError> {
        let found = self
            .first_found(t, &|e: &Entries| {
                e.zone_of(location)
                    .map(str::to_owned)
                    .ok_or_else(|| CloudError::NotFound {
                        what: format!("location {location}"),
                        tried: vec!["the catalog".into()],
                    })
            })
            .await;
        match found {
            Ok(zone) => Ok(Some(zone)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// What `find` answers from the built-in entries, else from the fetched catalog.
    async fn first_found<T>(
        &self,
        t: &Transport,
        find: &(dyn Fn(&Entries) -> Result<T, CloudError> + Send + Sync + '_),
    ) -> Result<T, CloudError> {
        let builtin = find(&BUILTIN);
        if builtin.is_ok() {
            return builtin;
        }
        let cached = self.cached();
        if let Some((at, entries)) = &cached {
            let r = find(entries);
            if r.is_ok() || at.elapsed() < MISS_REFRESH {
                return r;
            }
        }
        let entries = fetch(t).await?;
        let r = find(&entries);
        *self.fetched.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), entries));
        r
    }

    fn cached(&self) -> Option<(Instant, Entries)> {
        self.fetched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

async fn fetch(t: &Transport) -> Result<Entries, CloudError> {
    let locations = list_all::<LocationsPage>(t, Req::get("/locations", "/locations")).await?;
    let lb_types =
        list_all::<LbTypesPage>(t, Req::get("/load_balancer_types", "/load_balancer_types"))
            .await?;
    Ok(Entries {
        locations: locations
            .into_iter()
            .map(|l| (l.name, l.network_zone))
            .collect(),
        lb_types: lb_types.into_iter().map(|t| t.name).collect(),
    })
}

#[derive(Debug, Deserialize)]
struct Location {
    name: String,
    #[serde(default)]
    network_zone: String,
}

#[derive(Debug, Deserialize)]
struct LocationsPage {
    #[serde(default)]
    locations: Vec<Location>,
    #[serde(default)]
    meta: Option<Meta>,
}

#[derive(Debug, Deserialize)]
struct LbType {
    name: String,
}

#[derive(Debug, Deserialize)]
struct LbTypesPage {
    #[serde(default)]
    load_balancer_types: Vec<LbType>,
    #[serde(default)]
    meta: Option<Meta>,
}

impl Page for LocationsPage {
    type Item = Location;
    fn into_parts(self) -> (Vec<Location>, Option<Meta>) {
        (self.locations, self.meta)
    }
}

impl Page for LbTypesPage {
    type Item = LbType;
    fn into_parts(self) -> (Vec<LbType>, Option<Meta>) {
        (self.load_balancer_types, self.meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_entries_know_todays_values() {
        let e = Entries::builtin();
        assert_eq!(e.zone_of("ash"), Some("us-east"));
        assert_eq!(e.zone_of("mars1"), None);
        assert!(e.has_zone("eu-central") && !e.has_zone("eu-west"));
        assert!(e.has_lb_type("lb21") && !e.has_lb_type("lb99"));
        assert_eq!(e.locations_in("eu-central"), "fsn1, nbg1, hel1");
        assert_eq!(e.zone_names(), "eu-central, us-east, us-west, ap-southeast");
    }
}
