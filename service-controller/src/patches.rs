//! The controller's only Kubernetes writes to a Service: the cleanup finalizer,
//! `status.loadBalancer` and its condition ([`crate::condition`]), the annotations a provider
//! records ([`recorder`]), all through the
//! `services/status` subresource (as upstream, so the role needs no write access to Services
//! themselves). The finalizer patch is a strategic merge, which
//! adds or removes one entry of the list without clobbering other controllers' finalizers.

use k8s_openapi::api::core::v1::{LoadBalancerIngress, Service};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

/// Upstream's cleanup finalizer: the load balancer is deleted before the Service goes away.
pub const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

fn api(client: &kube::Client, svc: &Service) -> Api<Service> {
    Api::namespaced(client.clone(), &svc.namespace().unwrap_or_default())
}

/// Adds the cleanup finalizer.
pub async fn add_finalizer(client: &kube::Client, svc: &Service) -> Result<(), kube::Error> {
    let patch = json!({ "metadata": { "finalizers": [FINALIZER] } });
    api(client, svc)
        .patch_status(
            &svc.name_any(),
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await
        .map(drop)
}

/// The provider's [`Recorder`](cloud_client::Recorder) for `svc`: a merge patch of one
/// annotation. Through the status subresource, which keeps metadata changes, like the finalizer.
pub fn recorder(client: &kube::Client, svc: &Service) -> cloud_client::Recorder {
    let (api, name) = (api(client, svc), svc.name_any());
    cloud_client::Recorder::new(move |key, value| {
        let (api, name) = (api.clone(), name.clone());
        async move {
            let patch = json!({ "metadata": { "annotations": { key: value } } });
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        }
    })
}

/// Removes the cleanup finalizer; a Service already gone is fine.
pub async fn remove_finalizer(client: &kube::Client, svc: &Service) -> Result<(), kube::Error> {
    let patch = json!({ "metadata": { "$deleteFromPrimitiveList/finalizers": [FINALIZER] } });
    patch_status(client, svc, Patch::Strategic(patch)).await
}

/// Replaces `status.loadBalancer.ingress` (an empty list clears it); a Service already gone is fine.
pub async fn set_ingress(
    client: &kube::Client,
    svc: &Service,
    ingress: &[LoadBalancerIngress],
) -> Result<(), kube::Error> {
    let ingress = if ingress.is_empty() {
        serde_json::Value::Null
    } else {
        json!(ingress)
    };
    let patch = json!({ "status": { "loadBalancer": { "ingress": ingress } } });
    patch_status(client, svc, Patch::Merge(patch)).await
}

/// Patches the Service's status subresource with `patch`; a Service already gone is fine.
pub async fn patch_status(
    client: &kube::Client,
    svc: &Service,
    patch: Patch<serde_json::Value>,
) -> Result<(), kube::Error> {
    ignore_not_found(
        api(client, svc)
            .patch_status(&svc.name_any(), &PatchParams::default(), &patch)
            .await,
    )
}

fn ignore_not_found<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
