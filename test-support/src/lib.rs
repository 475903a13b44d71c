//! What the controllers' tests share, in three groups by what a test needs:
//!
//! - [`fakes`]: for the fast suites, neither apiserver nor cloud-sim: an in-memory provider
//!   ([`fakes::memory_cloud`]) and a `kube::Client` whose requests the test answers
//!   ([`fakes::mock_kube`]);
//! - [`e2e`]: the end-to-end harness: the testenv control plane, a cloud-sim per test, Nodes,
//!   the chart's RBAC, controllers in-process and as processes;
//! - [`catalogues`]: data held against a built binary or the chart: the bad configurations, the
//!   service-controller's bad-input catalogue with its accepted values, HCCM's flags.

pub mod catalogues;
pub mod e2e;
pub mod fakes;
