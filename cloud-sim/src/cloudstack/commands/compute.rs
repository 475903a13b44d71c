//! `listVirtualMachines`, `listZones`, `listServiceOfferings`, `listNetworks`, `listProjects`,
//! `listCapabilities`, `listManagementServersMetrics` and `queryAsyncJobResult`.

use serde_json::{Value, json};

use super::{Ctx, like};
use crate::cloudstack::access::Scope;
use crate::cloudstack::error::CsError;
use crate::cloudstack::jobs::job_json;
use crate::cloudstack::model::{Network, Owner, VmState};
use crate::cloudstack::params::paged;
use crate::cloudstack::render::{self, cs_date, stable_id};

/// VMs by `id`/`ids`, `name` (a case-insensitive substring, as CloudStack matches it; clients
/// look for the exact name among the matches), `displayname`, `keyword`, `state`, `zoneid`,
/// `networkid`, in the scope of `projectid`/`listall` (`access`). `Destroyed`/`Expunging` VMs
/// only for admins (or with `allow.user.view.destroyed.vm`); expunged VMs never, though asking
/// for one by id answers an empty list rather than an unknown-id error.
pub fn list_virtual_machines(ctx: &mut Ctx) -> Result<Value, CsError> {
    let (w, caller, params) = (&*ctx.world, &ctx.caller, ctx.params);
    let scope = Scope::of(w, caller, params)?;
    let id = params.get("id");
    if let Some(id) = id
        && w.vm(id).is_none()
    {
        return Err(params.unknown_id("id", id));
    }
    let ids = params.list("ids");
    if let Some(unknown) = ids.iter().find(|i| w.vm(i).is_none()) {
        return Err(params.unknown_id("ids", unknown));
    }
    let zone = zone_param(ctx)?;
    let network = params.get("networkid");
    if let Some(n) = network
        && w.network(n).is_none()
    {
        return Err(params.unknown_id("networkid", n));
    }
    let state = params.get("state");
    let show_gone = caller.admin || w.settings.allow_user_view_destroyed_vm;
    let vms: Vec<_> = w
        .vms
        .iter()
        .filter(|v| !v.expunged && (show_gone || !v.state.gone()))
        .filter(|v| scope.covers(w, caller, &v.owner))
        .filter(|v| id.is_none_or(|id| v.id == id))
        .filter(|v| ids.is_empty() || ids.contains(&v.id))
        .filter(|v| params.get("name").is_none_or(|n| like(&v.name, n)))
        .filter(|v| {
            params
                .get("displayname")
                .is_none_or(|n| like(&v.display_name, n))
        })
        .filter(|v| {
            params
                .get("keyword")
                .is_none_or(|k| like(&v.name, k) || like(&v.display_name, k))
        })
        .filter(|v| state.is_none_or(|s| state_matches(v.state, s)))
        .filter(|v| zone.as_deref().is_none_or(|z| v.zone_id == z))
        .filter(|v| network.is_none_or(|n| v.nics.iter().any(|nic| nic.network_id == n)))
        .collect();
    paged(
        params,
        w.settings.default_page_size,
        "virtualmachine",
        &vms,
        |v| render::vm(w, caller, v),
    )
}

/// `state=Present` is every state but `Destroyed` and `Expunging`.
fn state_matches(state: VmState, asked: &str) -> bool {
    if asked.eq_ignore_ascii_case("present") {
        !state.gone()
    } else {
        state.as_str().eq_ignore_ascii_case(asked)
    }
}

fn zone_param(ctx: &Ctx) -> Result<Option<String>, CsError> {
    match ctx.params.get("zoneid") {
        Some(z) if ctx.world.zone(z).is_none() => Err(ctx.params.unknown_id("zoneid", z)),
        z => Ok(z.map(str::to_owned)),
    }
}

/// Zones by `id`, `name` (exact, case-insensitive) or `keyword`.
pub fn list_zones(ctx: &mut Ctx) -> Result<Value, CsError> {
    let (w, params) = (&*ctx.world, ctx.params);
    let id = zone_param_named(ctx, "id")?;
    let zones: Vec<_> = w
        .zones
        .iter()
        .filter(|z| id.as_deref().is_none_or(|id| z.id == id))
        .filter(|z| {
            params
                .get("name")
                .is_none_or(|n| z.name.eq_ignore_ascii_case(n))
        })
        .filter(|z| params.get("keyword").is_none_or(|k| like(&z.name, k)))
        .collect();
    paged(params, w.settings.default_page_size, "zone", &zones, |z| {
        render::zone(w, z)
    })
}

fn zone_param_named(ctx: &Ctx, name: &str) -> Result<Option<String>, CsError> {
    match ctx.params.get(name) {
        Some(z) if ctx.world.zone(z).is_none() => Err(ctx.params.unknown_id(name, z)),
        z => Ok(z.map(str::to_owned)),
    }
}

/// Offerings by `id`, `name` (exact, case-insensitive) or `keyword`.
pub fn list_service_offerings(ctx: &mut Ctx) -> Result<Value, CsError> {
    let (w, params) = (&*ctx.world, ctx.params);
    if let Some(id) = params.get("id")
        && w.offering(id).is_none()
    {
        return Err(params.unknown_id("id", id));
    }
    let offerings: Vec<_> = w
        .offerings
        .iter()
        .filter(|o| params.get("id").is_none_or(|id| o.id == id))
        .filter(|o| {
            params
                .get("name")
                .is_none_or(|n| o.name.eq_ignore_ascii_case(n))
        })
        .filter(|o| params.get("keyword").is_none_or(|k| like(&o.name, k)))
        .collect();
    paged(
        params,
        w.settings.default_page_size,
        "serviceoffering",
        &offerings,
        |o| render::offering(o),
    )
}

/// Networks by `id`, `zoneid`, `vpcid`, `type` (`Isolated`/`Shared`), `keyword` and
/// `supportedservices`, in the scope of `projectid`/`listall`; shared networks belong to no
/// account and are listed to everyone outside project scopes.
pub fn list_networks(ctx: &mut Ctx) -> Result<Value, CsError> {
    let (w, caller, params) = (&*ctx.world, &ctx.caller, ctx.params);
    let scope = Scope::of(w, caller, params)?;
    if let Some(id) = params.get("id")
        && w.network(id).is_none()
    {
        return Err(params.unknown_id("id", id));
    }
    let zone = zone_param(ctx)?;
    let services = params.list("supportedservices");
    let in_scope = |n: &Network| match &n.owner {
        Some(owner) => scope.covers(w, caller, owner),
        None => !matches!(scope, Scope::Project(_) | Scope::AllProjects),
    };
    let networks: Vec<_> = w
        .networks
        .iter()
        .filter(|n| in_scope(n))
        .filter(|n| params.get("id").is_none_or(|id| n.id == id))
        .filter(|n| zone.as_deref().is_none_or(|z| n.zone_id == z))
        .filter(|n| {
            params
                .get("vpcid")
                .is_none_or(|v| n.vpc_id.as_deref() == Some(v))
        })
        .filter(|n| params.get("keyword").is_none_or(|k| like(&n.name, k)))
        .filter(|n| {
            params.get("type").is_none_or(|t| {
                let shared = n.kind == crate::cloudstack::model::NetworkKind::Shared;
                t.eq_ignore_ascii_case(if shared { "Shared" } else { "Isolated" })
            })
        })
        .filter(|n| {
            services
                .iter()
                .all(|s| n.services.iter().any(|have| have.eq_ignore_ascii_case(s)))
        })
        .collect();
    paged(
        params,
        w.settings.default_page_size,
        "network",
        &networks,
        |n| render::network(w, n),
    )
}

/// Projects by `id`, `name` (exact, case-insensitive) or `keyword`: admins see every project,
/// other accounts those they are members of.
pub fn list_projects(ctx: &mut Ctx) -> Result<Value, CsError> {
    let (w, caller, params) = (&*ctx.world, &ctx.caller, ctx.params);
    if let Some(id) = params.get("id")
        && w.project(id).is_none()
    {
        return Err(params.unknown_id("id", id));
    }
    let projects: Vec<_> = w
        .projects
        .iter()
        .filter(|p| caller.may_use(w, &Owner::Project(p.id.clone())))
        .filter(|p| params.get("id").is_none_or(|id| p.id == id))
        .filter(|p| {
            params
                .get("name")
                .is_none_or(|n| p.name.eq_ignore_ascii_case(n))
        })
        .filter(|p| params.get("keyword").is_none_or(|k| like(&p.name, k)))
        .collect();
    paged(
        params,
        w.settings.default_page_size,
        "project",
        &projects,
        |p| render::project(w, p),
    )
}

/// `{"capability": {...}}`; `apilimitinterval`/`apilimitmax` only while throttling is on.
pub fn list_capabilities(ctx: &mut Ctx) -> Result<Value, CsError> {
    let s = &ctx.world.settings;
    let mut cap = json!({
        "securitygroupsenabled": false,
        "dynamicrolesenabled": true,
        "cloudstackversion": s.version,
        "userpublictemplateenabled": true,
        "supportELB": "false",
        "projectinviterequired": false,
        "allowusercreateprojects": true,
        "customdiskofferingminsize": 1,
        "customdiskofferingmaxsize": 1024,
        "regionsecondaryenabled": false,
        "kvmsnapshotenabled": false,
        "allowuserviewdestroyedvm": s.allow_user_view_destroyed_vm,
        "allowuserexpungerecovervm": false,
        "allowuserexpungerecovervolume": true,
        "allowuserviewalldomainaccounts": false,
        "kubernetesserviceenabled": true,
        "kubernetesclusterexperimentalfeaturesenabled": false,
        "defaultuipagesize": 20,
    });
    if let Some(t) = s.throttling {
        cap["apilimitinterval"] = json!(t.interval_ms.div_ceil(1000));
        cap["apilimitmax"] = json!(t.max);
    }
    Ok(json!({ "capability": cap }))
}

/// One management server, `Up`, reporting the configured version (what upstream's CCM reads at
/// start to pick its behaviour).
pub fn list_management_servers_metrics(ctx: &mut Ctx) -> Result<Value, CsError> {
    let w = &*ctx.world;
    let started = cs_date(ctx.now.saturating_sub(3_600_000));
    let server = json!({
        "id": stable_id(w, "management-server"),
        "name": "cloudsim-ms-1",
        "state": "Up",
        "version": w.settings.version,
        "ipaddress": "127.0.0.1",
        "serviceip": "127.0.0.1",
        "javaversion": "17.0.13",
        "javadistribution": "OpenJDK",
        "osdistribution": "Linux",
        "kernelversion": "6.1.0",
        "agentcount": 4,
        "sessions": 0,
        "availableprocessors": 2,
        "dbislocal": true,
        "usageislocal": true,
        "lastserverstart": started,
        "collectiontime": cs_date(ctx.now),
    });
    paged(
        ctx.params,
        w.settings.default_page_size,
        "managementserver",
        &[server],
        Value::clone,
    )
}

/// A job by `jobid`: the caller's own (admins: anyone's).
pub fn query_async_job_result(ctx: &mut Ctx) -> Result<Value, CsError> {
    let params = ctx.params;
    let id = params.required("jobid")?;
    let job = ctx
        .world
        .job(id)
        .ok_or_else(|| params.unknown_id("jobid", id))?;
    if !ctx.caller.admin && job.account_id != ctx.caller.account_id {
        return Err(CsError::denied(format!(
            "Account {} does not have permission to access job {id}",
            ctx.caller.name
        )));
    }
    Ok(job_json(ctx.world, job, ctx.now))
}
