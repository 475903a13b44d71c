//! The chart rendered by helm, no cluster: lint, every values file, the schema's refusals, the
//! template's own refusals, and what the objects say (RBAC = the files, security, scheduling,
//! probes, HCCM's Secret and variables, HCCM's chart options: networking, monitoring, extra
//! volumes, dnsConfig, strategy, tolerations, Robot), and an HCCM values file next to its
//! translation.
//!
//! One module per subject, all in this one test binary (one link instead of a dozen); what several
//! of them read from rendered objects lives in `support`.

mod chart;
mod cloudstack;
mod controllers;
mod hccm_values;
mod monitoring;
mod networking;
mod pod_options;
mod rbac;
mod robot;
mod schema;
mod secret_and_variables;
mod simulator;
mod support;
mod template_refusals;
