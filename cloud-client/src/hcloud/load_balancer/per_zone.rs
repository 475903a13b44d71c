//! Opt-in (annotation `one-per-network-zone`): one load balancer per network zone that has
//! eligible nodes. A Hetzner load balancer reaches only the servers of its own zone ([`zones`]),
//! so a cluster across zones that wants every node served needs one in each.
//!
//! The home load balancer is the one the Service has without the option (its name, its
//! placement), targeting its zone's nodes. Each other zone's is the Service seen under another
//! identity ([`in_zone`]: UID `<uid>-<zone>`, name `<name>-<zone>`, placed in the zone) and goes
//! through the same stages as the home one, so finding, ownership, tenancy, adoption and shadow
//! mode hold for each unchanged. The status lists the home load balancer's addresses first, then
//! each zone's, in zone order.
//!
//! A zone's load balancer leaves in two steps, so that a client's DNS can follow: while its
//! addresses are published, a reconcile leaves them out of the status; once they are not, the
//! next one (at the latest the drift check) deletes it. The zones' load balancers are the ones
//! the [`Finder`] remembers under `<uid>-<zone>`: a process lists the project's load balancers
//! before it first finds a Service's, so none is missed after a restart, and a Service without
//! the option pays no call for the check.

use std::collections::BTreeSet;

use super::*;
use crate::capabilities::{ReadOnce, TargetHealth};

/// The UID a zone's load balancer is labelled and remembered by.
fn zone_uid(uid: &str, zone: &str) -> String {
    format!("{uid}-{zone}")
}

/// The Service and its spec as `zone`'s load balancer sees them.
fn in_zone(svc: &ServiceRef, spec: &LbSpec, zone: &str) -> (ServiceRef, LbSpec) {
    let svc = ServiceRef {
        uid: zone_uid(&svc.uid, zone),
        read_once: ReadOnce::default(),
        ..svc.clone()
    };
    let mut spec = spec.clone();
    place(&mut spec, zone);
    for port in spec.ports.values_mut() {
        place(port, zone);
    }
    (svc, spec)
}

/// `spec` for the load balancer in `zone`: its own name, the zone as its placement, and no fixed
/// private IP (two load balancers cannot hold one).
fn place(spec: &mut LbSpec, zone: &str) {
    let suffix = format!("-{zone}");
    let mut cut = spec.name.len().min(63usize.saturating_sub(suffix.len()));
    while !spec.name.is_char_boundary(cut) {
        cut -= 1;
    }
    spec.name = format!("{}{suffix}", &spec.name[..cut]);
    spec.location = None;
    spec.network_zone = Some(zone.to_owned());
    spec.private_ipv4 = None;
    spec.one_per_zone = false;
}

/// Where the Service's nodes go when it asks for one load balancer per zone.
struct Split {
    home: Vec<LbNode>,
    /// Every other zone with eligible nodes.
    others: BTreeMap<String, Vec<LbNode>>,
}

impl HcloudLoadBalancers {
    /// The Service's nodes by the load balancer that serves them; `None` without the option, or
    /// while the home load balancer's zone is not known (the create refuses that anyway).
    async fn split(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        nodes: &[LbNode],
    ) -> Result<Option<Split>, CloudError> {
        if !spec.one_per_zone {
            return Ok(None);
        }
        let (catalog, t) = (&self.catalog, &self.transport);
        let Some(home) = zones::placement_zone(catalog, t, spec).await? else {
            return Ok(None);
        };
        let dcs = self.robot_targets(svc, spec, nodes).await?.dcs;
        let mut others = zones::by_zone(catalog, t, &self.servers, spec, nodes, &dcs).await?;
        let home = others.remove(&home).unwrap_or_default();
        Ok(Some(Split { home, others }))
    }

    /// The zones whose load balancer is remembered for the Service, with the UID of each.
    fn remembered_zones(&self, svc: &ServiceRef) -> BTreeMap<String, String> {
        let prefix = zone_uid(&svc.uid, "");
        self.finder
            .uids_starting(&prefix)
            .into_iter()
            .filter_map(|uid| Some((uid.strip_prefix(&prefix)?.to_owned(), uid)))
            .collect()
    }

    /// A full ensure: the home load balancer, each other zone's when asked for, and the
    /// retirement of those no longer wanted.
    pub(super) async fn ensure_zones(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        nodes: &[LbNode],
        fresh: Freshness,
    ) -> Result<EnsureOutcome, CloudError> {
        let split = self.split(svc, spec, nodes).await?;
        let home = split.as_ref().map_or(nodes, |s| &s.home);
        let mut outcome = self.ensure_one(svc, spec, home, fresh).await?;
        let mut wanted = BTreeSet::new();
        for (zone, nodes) in split.iter().flat_map(|s| &s.others) {
            let (zone_svc, zone_spec) = in_zone(svc, spec, zone);
            let o = self.ensure_one(&zone_svc, &zone_spec, nodes, fresh).await?;
            outcome.status.ingress.extend(o.status.ingress);
            outcome.warnings.extend(o.warnings);
            outcome.writes += o.writes;
            add_health(&mut outcome.target_health, o.target_health);
            wanted.insert(zone.clone());
        }
        let (writes, warnings) = self.retire(svc, &wanted).await?;
        outcome.writes += writes;
        outcome.warnings.extend(warnings);
        // Each load balancer's warnings are once each; the same one from two zones is said once.
        status::dedup(&mut outcome.warnings);
        dedup_ingress(&mut outcome.status);
        Ok(outcome)
    }

    /// Only the nodes changed: each load balancer's targets, when the zones that have one are
    /// the zones that should; otherwise (a zone gained its first node or lost its last) not
    /// found, so the controller runs a full ensure, which creates or retires and publishes.
    pub(super) async fn update_zones(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        nodes: &[LbNode],
    ) -> Result<UpdateOutcome, CloudError> {
        let split = self.split(svc, spec, nodes).await?;
        let home = split.as_ref().map_or(nodes, |s| &s.home);
        // First: finding the home load balancer is what makes the zones' remembered.
        let mut outcome = self.update_one(svc, spec, home).await?;
        let others = split.map(|s| s.others).unwrap_or_default();
        let remembered = self.remembered_zones(svc);
        if !outcome.found || !remembered.keys().eq(others.keys()) {
            return Ok(UpdateOutcome {
                found: false,
                ..outcome
            });
        }
        for (zone, nodes) in &others {
            let (zone_svc, zone_spec) = in_zone(svc, spec, zone);
            let o = self.update_one(&zone_svc, &zone_spec, nodes).await?;
            outcome.found &= o.found;
            outcome.warnings.extend(o.warnings);
            outcome.writes += o.writes;
            add_health(&mut outcome.target_health, o.target_health);
        }
        status::dedup(&mut outcome.warnings);
        Ok(outcome)
    }

    /// The zones' load balancers not in `wanted`: left out of the status while their addresses
    /// are published, deleted once they are not. Returns the writes made and any warnings.
    async fn retire(
        &self,
        svc: &ServiceRef,
        wanted: &BTreeSet<String>,
    ) -> Result<(u32, Vec<Warning>), CloudError> {
        let (mut writes, mut warnings) = (0, Vec::new());
        for (zone, uid) in self.remembered_zones(svc) {
            if wanted.contains(&zone) {
                continue;
            }
            let zone_svc = ServiceRef {
                uid,
                read_once: ReadOnce::default(),
                ..svc.clone()
            };
            let Some((lb, _)) = self
                .finder
                .find(&zone_svc, None, Freshness::Remembered)
                .await?
            else {
                continue;
            };
            if addresses(&lb).any(|ip| svc.ingress_ips.contains(&ip)) {
                tracing::info!(service = %svc.key(), lb = lb.id, %zone, "zone has no node left: its addresses leave the status before its load balancer goes");
                continue;
            }
            tracing::info!(service = %svc.key(), lb = lb.id, %zone, "deleting the load balancer of a zone without nodes");
            let deleted = self.delete_own(&zone_svc, &lb).await?;
            writes += u32::from(deleted.deleted);
            warnings.extend(deleted.warnings);
        }
        Ok((writes, warnings))
    }

    /// A deleted Service's zones' load balancers (after its home one: finding that is what makes
    /// them remembered).
    pub(super) async fn delete_zones(
        &self,
        svc: &ServiceRef,
        outcome: &mut DeleteOutcome,
    ) -> Result<(), CloudError> {
        for uid in self.remembered_zones(svc).into_values() {
            let zone_svc = ServiceRef {
                uid,
                read_once: ReadOnce::default(),
                ..svc.clone()
            };
            if let Some((lb, _)) = self.finder.find(&zone_svc, None, Freshness::Now).await? {
                let d = self.delete_own(&zone_svc, &lb).await?;
                outcome.deleted |= d.deleted;
                outcome.warnings.extend(d.warnings);
            }
        }
        Ok(())
    }
}

/// Every address `lb` can be published by (public and private).
fn addresses(lb: &LoadBalancer) -> impl Iterator<Item = String> + '_ {
    let public = lb.public_net.iter().flat_map(|p| {
        [p.ipv4.as_ref(), p.ipv6.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|ip| ip.ip.clone())
    });
    let private = lb.private_net.iter().filter_map(|p| p.ip.clone());
    public.chain(private)
}

fn add_health(sum: &mut Option<TargetHealth>, more: Option<TargetHealth>) {
    if let Some(more) = more {
        let s = sum.get_or_insert_with(TargetHealth::default);
        s.healthy += more.healthy;
        s.unhealthy += more.unhealthy;
        s.unknown += more.unknown;
    }
}

/// One hostname (the `hostname` annotation) names every zone's load balancer: listed once.
fn dedup_ingress(status: &mut LoadBalancerStatus) {
    let mut seen = BTreeSet::new();
    status
        .ingress
        .retain(|i| seen.insert((i.ip.clone(), i.hostname.clone())));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zone_load_balancer_has_its_own_uid_name_and_placement() {
        let svc = ServiceRef {
            uid: "6d1f0a52-0000-4000-8000-000000000001".into(),
            ..ServiceRef::default()
        };
        let mut spec = LbSpec {
            name: "web".into(),
            location: Some("fsn1".into()),
            private_ipv4: Some("10.0.0.9".parse().unwrap()),
            one_per_zone: true,
            ..LbSpec::default()
        };
        spec.ports.insert(443, spec.clone());
        let (zsvc, zspec) = in_zone(&svc, &spec, "us-east");
        assert_eq!(zsvc.uid, "6d1f0a52-0000-4000-8000-000000000001-us-east");
        for s in [&zspec, &zspec.ports[&443]] {
            assert_eq!(s.name, "web-us-east");
            assert_eq!(s.location, None);
            assert_eq!(s.network_zone.as_deref(), Some("us-east"));
            assert_eq!(s.private_ipv4, None);
            assert!(!s.one_per_zone);
        }
    }

    #[test]
    fn a_long_name_is_cut_to_leave_room_for_the_zone() {
        let mut spec = LbSpec {
            name: "é".repeat(40),
            ..LbSpec::default()
        };
        place(&mut spec, "ap-southeast");
        assert!(spec.name.len() <= 63, "{}", spec.name);
        assert!(spec.name.ends_with("é-ap-southeast"), "{}", spec.name);
    }
}
