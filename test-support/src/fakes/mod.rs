//! Stand-ins for the cloud and the apiserver, for the fast suites: milliseconds, no process.

pub mod memory_cloud;
pub mod mock_kube;
