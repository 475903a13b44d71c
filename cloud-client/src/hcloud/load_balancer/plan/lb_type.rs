//! What the load balancer's type allows: which type it has once the plan ran, and how many
//! services and targets that type holds.

use crate::hcloud::load_balancer::spec::LbSpec;
use crate::hcloud::wire::LoadBalancer;

/// Load balancer type used when neither annotation nor env names one (HCCM's fallback).
pub const DEFAULT_LB_TYPE: &str = "lb11";

/// The type a reconcile will switch `lb` to, if any: only an explicit type is enforced
/// ([`LbSpec::type_explicit`]).
pub fn type_change<'a>(lb: &LoadBalancer, spec: &'a LbSpec) -> Option<&'a str> {
    let want = spec.lb_type.as_deref().filter(|_| spec.type_explicit())?;
    (lb.load_balancer_type.as_ref().map(|t| t.name.as_str()) != Some(want)).then_some(want)
}

/// The type the load balancer will have once the plan ran: the `change_type` target, else what
/// it has now; for a new one (`lb` is `None`) the spec's type or the default.
pub(super) fn type_after(lb: Option<&LoadBalancer>, spec: &LbSpec) -> String {
    match lb {
        None => spec
            .lb_type
            .as_deref()
            .unwrap_or(DEFAULT_LB_TYPE)
            .to_string(),
        Some(lb) => type_change(lb, spec)
            .map(str::to_string)
            .or_else(|| lb.load_balancer_type.as_ref().map(|t| t.name.clone()))
            .unwrap_or_else(|| DEFAULT_LB_TYPE.to_string()),
    }
}

/// `max_services` of the known types, like
/// [`known_max_targets`].
pub fn known_max_services(lb_type: &str) -> u32 {
    match lb_type {
        "lb21" => 15,
        "lb31" => 30,
        _ => 5,
    }
}

/// `max_services` of the type after the plan: the load balancer's own (as the API reports it)
/// unless it changes type; the known figure for a new type.
pub(super) fn max_services_after(lb: Option<&LoadBalancer>, spec: &LbSpec) -> u32 {
    let current = lb
        .filter(|lb| type_change(lb, spec).is_none())
        .and_then(|lb| lb.load_balancer_type.as_ref())
        .and_then(|t| t.max_services);
    current.unwrap_or_else(|| known_max_services(&type_after(lb, spec)))
}

/// `max_targets` of the known types, for types we have not read from the API (a new load balancer,
/// or the type a `change_type` is about to switch to).
pub fn known_max_targets(lb_type: &str) -> u32 {
    match lb_type {
        "lb21" => 75,
        "lb31" => 150,
        _ => 25,
    }
}

/// `max_targets` of the type after the plan (see
/// [`max_services_after`]).
pub fn max_targets_after(lb: &LoadBalancer, spec: &LbSpec) -> u32 {
    match type_change(lb, spec) {
        Some(t) => known_max_targets(t),
        None => lb
            .load_balancer_type
            .as_ref()
            .and_then(|t| t.max_targets)
            .unwrap_or_else(|| known_max_targets(&type_after(Some(lb), spec))),
    }
}
