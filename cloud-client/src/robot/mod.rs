//! Hetzner's dedicated servers (the Robot webservice), as HCCM supports them: `ROBOT_*` settings
//! ([`config`]) and the webservice client with its cached server list ([`client`]).

pub mod client;
pub mod config;

pub use client::{RobotClient, RobotServer};
pub use config::{DEFAULT_ROBOT_ENDPOINT, RobotConfig, RobotCredentials};
