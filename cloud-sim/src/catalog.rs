//! Seed fixtures that never change at runtime: locations, server types, load balancer types
//! and images. Figures follow the public price list closely enough to look real.

use serde_json::{Value, json};

#[derive(Debug)]
pub struct Location {
    pub id: u64,
    pub name: &'static str,
    pub description: &'static str,
    pub country: &'static str,
    pub city: &'static str,
    pub latitude: f64,
    pub longitude: f64,
    pub network_zone: &'static str,
    /// Legacy datacenter name; only the metadata service's `availability-zone` still shows it.
    pub datacenter: &'static str,
}

pub const LOCATIONS: &[Location] = &[
    Location {
        id: 1,
        name: "fsn1",
        description: "Falkenstein DC Park 1",
        country: "DE",
        city: "Falkenstein",
        latitude: 50.47612,
        longitude: 12.370071,
        network_zone: "eu-central",
        datacenter: "fsn1-dc14",
    },
    Location {
        id: 2,
        name: "nbg1",
        description: "Nuremberg DC Park 1",
        country: "DE",
        city: "Nuremberg",
        latitude: 49.452102,
        longitude: 11.076665,
        network_zone: "eu-central",
        datacenter: "nbg1-dc3",
    },
    Location {
        id: 3,
        name: "hel1",
        description: "Helsinki DC Park 1",
        country: "FI",
        city: "Helsinki",
        latitude: 60.169855,
        longitude: 24.938379,
        network_zone: "eu-central",
        datacenter: "hel1-dc2",
    },
    Location {
        id: 4,
        name: "ash",
        description: "Ashburn, VA",
        country: "US",
        city: "Ashburn, VA",
        latitude: 39.045821,
        longitude: -77.487073,
        network_zone: "us-east",
        datacenter: "ash-dc1",
    },
    Location {
        id: 5,
        name: "hil",
        description: "Hillsboro, OR",
        country: "US",
        city: "Hillsboro, OR",
        latitude: 45.54222,
        longitude: -122.951924,
        network_zone: "us-west",
        datacenter: "hil-dc1",
    },
    Location {
        id: 6,
        name: "sin",
        description: "Singapore",
        country: "SG",
        city: "Singapore",
        latitude: 1.283333,
        longitude: 103.833333,
        network_zone: "ap-southeast",
        datacenter: "sin-dc1",
    },
];

pub const NETWORK_ZONES: &[&str] = &["eu-central", "us-east", "us-west", "ap-southeast"];

const EU: &[&str] = &["fsn1", "nbg1", "hel1"];
const ALL: &[&str] = &["fsn1", "nbg1", "hel1", "ash", "hil", "sin"];

#[derive(Debug)]
pub struct Deprecation {
    pub announced: &'static str,
    pub unavailable_after: &'static str,
}

#[derive(Debug)]
pub struct ServerType {
    pub id: u64,
    pub name: &'static str,
    pub description: &'static str,
    pub category: &'static str,
    pub cores: u32,
    pub memory: f64,
    pub disk: u32,
    pub cpu_type: &'static str,
    pub architecture: &'static str,
    pub locations: &'static [&'static str],
    pub monthly_eur: f64,
    pub deprecation: Option<Deprecation>,
}

pub const SERVER_TYPES: &[ServerType] = &[
    ServerType {
        id: 1,
        name: "cx11",
        description: "CX11",
        category: "shared",
        cores: 1,
        memory: 2.0,
        disk: 20,
        cpu_type: "shared",
        architecture: "x86",
        locations: EU,
        monthly_eur: 3.29,
        deprecation: Some(Deprecation {
            announced: "2024-06-06T00:00:00+00:00",
            unavailable_after: "2024-09-06T00:00:00+00:00",
        }),
    },
    ServerType {
        id: 22,
        name: "cpx11",
        description: "CPX 11",
        category: "shared",
        cores: 2,
        memory: 2.0,
        disk: 40,
        cpu_type: "shared",
        architecture: "x86",
        locations: ALL,
        monthly_eur: 4.35,
        deprecation: None,
    },
    ServerType {
        id: 23,
        name: "cpx21",
        description: "CPX 21",
        category: "shared",
        cores: 3,
        memory: 4.0,
        disk: 80,
        cpu_type: "shared",
        architecture: "x86",
        locations: ALL,
        monthly_eur: 7.55,
        deprecation: None,
    },
    ServerType {
        id: 24,
        name: "cpx31",
        description: "CPX 31",
        category: "shared",
        cores: 4,
        memory: 8.0,
        disk: 160,
        cpu_type: "shared",
        architecture: "x86",
        locations: ALL,
        monthly_eur: 13.60,
        deprecation: None,
    },
    ServerType {
        id: 45,
        name: "cax11",
        description: "CAX11",
        category: "shared",
        cores: 2,
        memory: 4.0,
        disk: 40,
        cpu_type: "shared",
        architecture: "arm",
        locations: EU,
        monthly_eur: 3.79,
        deprecation: None,
    },
    ServerType {
        id: 96,
        name: "ccx13",
        description: "CCX13 Dedicated CPU",
        category: "dedicated",
        cores: 2,
        memory: 8.0,
        disk: 80,
        cpu_type: "dedicated",
        architecture: "x86",
        locations: ALL,
        monthly_eur: 12.49,
        deprecation: None,
    },
    ServerType {
        id: 97,
        name: "ccx23",
        description: "CCX23 Dedicated CPU",
        category: "dedicated",
        cores: 4,
        memory: 16.0,
        disk: 160,
        cpu_type: "dedicated",
        architecture: "x86",
        locations: ALL,
        monthly_eur: 24.49,
        deprecation: None,
    },
    ServerType {
        id: 104,
        name: "cx22",
        description: "CX22",
        category: "shared",
        cores: 2,
        memory: 4.0,
        disk: 40,
        cpu_type: "shared",
        architecture: "x86",
        locations: EU,
        monthly_eur: 3.79,
        deprecation: None,
    },
    ServerType {
        id: 105,
        name: "cx32",
        description: "CX32",
        category: "shared",
        cores: 4,
        memory: 8.0,
        disk: 80,
        cpu_type: "shared",
        architecture: "x86",
        locations: EU,
        monthly_eur: 6.80,
        deprecation: None,
    },
    ServerType {
        id: 106,
        name: "cx42",
        description: "CX42",
        category: "shared",
        cores: 8,
        memory: 16.0,
        disk: 160,
        cpu_type: "shared",
        architecture: "x86",
        locations: EU,
        monthly_eur: 16.40,
        deprecation: None,
    },
];

#[derive(Debug)]
pub struct LbType {
    pub id: u64,
    pub name: &'static str,
    pub description: &'static str,
    pub max_connections: u32,
    pub max_services: usize,
    pub max_targets: usize,
    pub max_assigned_certificates: usize,
    pub monthly_eur: f64,
    pub deprecation: Option<Deprecation>,
}

pub const LB_TYPES: &[LbType] = &[
    LbType {
        id: 1,
        name: "lb11",
        description: "LB11",
        max_connections: 10_000,
        max_services: 5,
        max_targets: 25,
        max_assigned_certificates: 10,
        monthly_eur: 5.39,
        deprecation: None,
    },
    LbType {
        id: 2,
        name: "lb21",
        description: "LB21",
        max_connections: 20_000,
        max_services: 15,
        max_targets: 75,
        max_assigned_certificates: 25,
        monthly_eur: 16.40,
        deprecation: None,
    },
    LbType {
        id: 3,
        name: "lb31",
        description: "LB31",
        max_connections: 40_000,
        max_services: 30,
        max_targets: 150,
        max_assigned_certificates: 50,
        monthly_eur: 32.90,
        deprecation: None,
    },
    // Deprecated but still orderable: exercises the CCM's `LoadBalancerTypeDeprecated` warning.
    LbType {
        id: 4,
        name: "lb01",
        description: "LB01 (deprecated)",
        max_connections: 5_000,
        max_services: 3,
        max_targets: 10,
        max_assigned_certificates: 5,
        monthly_eur: 4.90,
        deprecation: Some(Deprecation {
            announced: "2026-03-01T00:00:00+00:00",
            unavailable_after: "2099-12-31T00:00:00+00:00",
        }),
    },
];

#[derive(Debug)]
pub struct Image {
    pub id: u64,
    pub name: &'static str,
    pub description: &'static str,
    pub os_flavor: &'static str,
    pub os_version: &'static str,
}

pub const IMAGES: &[Image] = &[
    Image {
        id: 67_794_396,
        name: "ubuntu-22.04",
        description: "Ubuntu 22.04",
        os_flavor: "ubuntu",
        os_version: "22.04",
    },
    Image {
        id: 161_547_269,
        name: "ubuntu-24.04",
        description: "Ubuntu 24.04",
        os_flavor: "ubuntu",
        os_version: "24.04",
    },
    Image {
        id: 114_690_387,
        name: "debian-12",
        description: "Debian 12",
        os_flavor: "debian",
        os_version: "12",
    },
    Image {
        id: 69_726_282,
        name: "rocky-9",
        description: "Rocky Linux 9",
        os_flavor: "rocky",
        os_version: "9",
    },
];

/// Matches a request's `id-or-name` field: a JSON number, a numeric string or a name.
fn id_or_name(v: &Value, id: u64, name: &str) -> bool {
    match v {
        Value::Number(n) => n.as_u64() == Some(id),
        Value::String(s) => s == name || s.parse::<u64>().ok() == Some(id),
        _ => false,
    }
}

pub fn location(id: u64) -> &'static Location {
    LOCATIONS
        .iter()
        .find(|l| l.id == id)
        .unwrap_or(&LOCATIONS[0])
}

pub fn find_location(v: &Value) -> Option<&'static Location> {
    LOCATIONS.iter().find(|l| id_or_name(v, l.id, l.name))
}

pub fn server_type(id: u64) -> &'static ServerType {
    SERVER_TYPES
        .iter()
        .find(|t| t.id == id)
        .unwrap_or(&SERVER_TYPES[0])
}

pub fn find_server_type(v: &Value) -> Option<&'static ServerType> {
    SERVER_TYPES.iter().find(|t| id_or_name(v, t.id, t.name))
}

pub fn lb_type(id: u64) -> &'static LbType {
    LB_TYPES.iter().find(|t| t.id == id).unwrap_or(&LB_TYPES[0])
}

pub fn find_lb_type(v: &Value) -> Option<&'static LbType> {
    LB_TYPES.iter().find(|t| id_or_name(v, t.id, t.name))
}

pub fn image(id: u64) -> &'static Image {
    IMAGES.iter().find(|i| i.id == id).unwrap_or(&IMAGES[0])
}

pub fn find_image(v: &Value) -> Option<&'static Image> {
    IMAGES.iter().find(|i| id_or_name(v, i.id, i.name))
}

fn deprecation_json(d: &Option<Deprecation>) -> Value {
    d.as_ref()
        .map(|d| json!({"announced": d.announced, "unavailable_after": d.unavailable_after}))
        .unwrap_or(Value::Null)
}

fn price(location: &str, monthly_eur: f64) -> Value {
    let hourly = monthly_eur / 730.0;
    json!({
        "location": location,
        "price_hourly": {"net": format!("{hourly:.4}"), "gross": format!("{:.4}", hourly * 1.19)},
        "price_monthly": {"net": format!("{monthly_eur:.4}"), "gross": format!("{:.4}", monthly_eur * 1.19)},
        "included_traffic": 21_990_232_555_520u64,
        "price_per_tb_traffic": {"net": "1.0000", "gross": "1.1900"},
    })
}

impl Location {
    pub fn json(&self) -> Value {
        json!({
            "id": self.id, "name": self.name, "description": self.description,
            "country": self.country, "city": self.city,
            "latitude": self.latitude, "longitude": self.longitude,
            "network_zone": self.network_zone,
        })
    }
}

impl ServerType {
    pub fn available_in(&self, location: &str) -> bool {
        self.locations.contains(&location)
    }

    pub fn json(&self) -> Value {
        let locations: Vec<Value> = LOCATIONS
            .iter()
            .map(|l| {
                json!({
                    "id": l.id, "name": l.name,
                    "available": self.available_in(l.name) && self.deprecation.is_none(),
                    "recommended": self.available_in(l.name) && self.deprecation.is_none(),
                    "deprecation": deprecation_json(&self.deprecation),
                })
            })
            .collect();
        json!({
            "id": self.id, "name": self.name, "description": self.description,
            "category": self.category, "cores": self.cores, "memory": self.memory,
            "disk": self.disk, "storage_type": "local", "cpu_type": self.cpu_type,
            "architecture": self.architecture,
            "deprecated": self.deprecation.is_some(),
            "deprecation": deprecation_json(&self.deprecation),
            "prices": self.locations.iter().map(|l| price(l, self.monthly_eur)).collect::<Vec<_>>(),
            "locations": locations,
        })
    }
}

impl LbType {
    pub fn json(&self) -> Value {
        json!({
            "id": self.id, "name": self.name, "description": self.description,
            "max_connections": self.max_connections, "max_services": self.max_services,
            "max_targets": self.max_targets,
            "max_assigned_certificates": self.max_assigned_certificates,
            "deprecation": deprecation_json(&self.deprecation),
            "prices": ALL.iter().map(|l| price(l, self.monthly_eur)).collect::<Vec<_>>(),
        })
    }
}

impl Image {
    pub fn json(&self) -> Value {
        json!({
            "id": self.id, "type": "system", "status": "available", "name": self.name,
            "description": self.description, "image_size": null, "disk_size": 5,
            "created": "2024-04-25T00:00:00+00:00", "created_from": null, "bound_to": null,
            "os_flavor": self.os_flavor, "os_version": self.os_version, "rapid_deploy": true,
            "protection": {"delete": false}, "deprecated": null, "deleted": null,
            "labels": {}, "architecture": "x86",
        })
    }
}
