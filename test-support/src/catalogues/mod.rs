//! Catalogues of cases and accepted values, with the checks that run them against a built binary
//! (which stops before it reaches Kubernetes) or that the chart's admission policy is held to.

pub mod bad_config;
pub mod bad_input;
pub mod hccm_flags;
