//! Shadow mode's Kubernetes side (`--dry-run`; the cloud side is in cloud-client's transport).
//!
//! Every write the controller sends (POST, PUT, PATCH, DELETE) goes with `dryRun=All`: the
//! apiserver runs admission, validation and RBAC, answers with what it would have stored, and
//! stores nothing, so the controller goes on exactly as after a real write while no object
//! changes. Each such write is planned ([`cloud_client::shadow`]), except:
//! - Events: sent dry too (none is stored), but not planned: they report, they change nothing;
//! - Leases: sent for real. The shadow takes a Lease of its own (`<name>-dry-run`), and holding it
//!   is what keeps two shadows from planning twice.

use std::sync::Arc;

use cloud_client::shadow::{Api, PlannedWrites};
use http::{Method, Request};
use kube::client::Body;

/// `client`, with every write sent dry and recorded in `planned_writes`.
pub fn client(client: kube::Client, planned_writes: Arc<PlannedWrites>) -> kube::Client {
    let namespace = client.default_namespace().to_owned();
    let service = tower::service_fn(move |request: Request<Body>| {
        let client = client.clone();
        let planned_writes = planned_writes.clone();
        async move {
            let Some(write) = Write::of(&request) else {
                return client.send(request).await;
            };
            let response = client.send(dry(request).await?).await?;
            if write.planned && response.status().is_success() {
                planned_writes.record(Api::Kubernetes, write.operation, write.object, None);
            }
            Ok(response)
        }
    });
    kube::Client::new(service, namespace)
}

/// A write to the apiserver, as the plan names it.
#[derive(Debug, PartialEq, Eq)]
struct Write {
    /// `PATCH nodes`, `DELETE nodes`, `PATCH services/status`.
    operation: String,
    /// `nodes node-1`, `services default/web`.
    object: String,
    /// False for Events (sent dry, not planned).
    planned: bool,
}

impl Write {
    /// The write `request` makes, or `None` for a read or a Lease (sent as it is).
    fn of<B>(request: &Request<B>) -> Option<Write> {
        let method = request.method();
        if !matches!(
            *method,
            Method::POST | Method::PUT | Method::PATCH | Method::DELETE
        ) {
            return None;
        }
        let path = request.uri().path();
        let (group, rest) = if let Some(rest) = path.strip_prefix("/api/v1/") {
            ("", rest)
        } else {
            let rest = path.strip_prefix("/apis/")?;
            let mut parts = rest.splitn(3, '/');
            let group = parts.next()?;
            parts.next()?;
            (group, parts.next()?)
        };
        if group == "coordination.k8s.io" {
            return None;
        }
        let mut segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        let namespace = match segments.as_slice() {
            ["namespaces", ns, _, ..] => {
                let ns = ns.to_string();
                segments.drain(..2);
                Some(ns)
            }
            _ => None,
        };
        let resource = segments.first().copied().unwrap_or("");
        let name = segments.get(1).copied();
        let subresource = segments.get(2).map(|s| format!("/{s}")).unwrap_or_default();
        let object = match (&namespace, name) {
            (Some(ns), Some(name)) => format!("{resource} {ns}/{name}"),
            (None, Some(name)) => format!("{resource} {name}"),
            (Some(ns), None) => format!("{resource} in {ns}"),
            (None, None) => resource.to_string(),
        };
        Some(Write {
            operation: format!("{method} {resource}{subresource}"),
            object,
            planned: resource != "events",
        })
    }
}

/// `request` sent dry: `dryRun=All` in its query, and in a DELETE's body too (the apiserver reads
/// a DELETE's options from its body alone when it has one, and kube sends `DeleteOptions` there).
async fn dry(request: Request<Body>) -> Result<Request<Body>, kube::Error> {
    let (parts, body) = request.into_parts();
    let body = if parts.method == Method::DELETE {
        let bytes = body.collect_bytes().await?;
        match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(serde_json::Value::Object(mut options)) => {
                options.insert("dryRun".into(), serde_json::json!(["All"]));
                Body::from(serde_json::to_vec(&options).unwrap_or_default())
            }
            _ => Body::from(bytes),
        }
    } else {
        body
    };
    Ok(with_dry_run_query(Request::from_parts(parts, body)))
}

/// `request` with `dryRun=All` added to its query.
fn with_dry_run_query(mut request: Request<Body>) -> Request<Body> {
    let uri = request.uri();
    let path_and_query = match uri.query() {
        Some(q) => format!("{}?{q}&dryRun=All", uri.path()),
        None => format!("{}?dryRun=All", uri.path()),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = path_and_query.parse().ok();
    if let Ok(new) = http::Uri::from_parts(parts) {
        *request.uri_mut() = new;
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(method: Method, path: &str) -> Option<Write> {
        Write::of(
            &Request::builder()
                .method(method)
                .uri(path)
                .body(())
                .unwrap(),
        )
    }

    #[test]
    fn writes_are_named_by_resource_and_object_and_reads_and_leases_pass() {
        assert_eq!(write(Method::GET, "/api/v1/nodes"), None);
        assert_eq!(
            write(
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x"
            ),
            None
        );
        let w = write(
            Method::PATCH,
            "/api/v1/namespaces/default/services/web/status",
        )
        .unwrap();
        assert_eq!(w.operation, "PATCH services/status");
        assert_eq!(w.object, "services default/web");
        assert!(w.planned);
        let w = write(Method::DELETE, "/api/v1/nodes/node-1").unwrap();
        assert_eq!(
            (w.operation.as_str(), w.object.as_str()),
            ("DELETE nodes", "nodes node-1")
        );
        let e = write(
            Method::POST,
            "/apis/events.k8s.io/v1/namespaces/default/events",
        )
        .unwrap();
        assert!(!e.planned, "Events are sent dry, not planned");
    }

    #[test]
    fn dry_run_is_added_to_the_query() {
        let r = Request::builder()
            .uri("/api/v1/nodes/n?fieldManager=x")
            .body(Body::empty())
            .unwrap();
        assert_eq!(
            with_dry_run_query(r).uri().to_string(),
            "/api/v1/nodes/n?fieldManager=x&dryRun=All"
        );
        let r = Request::builder()
            .uri("/api/v1/nodes/n")
            .body(Body::empty())
            .unwrap();
        assert_eq!(
            with_dry_run_query(r).uri().to_string(),
            "/api/v1/nodes/n?dryRun=All"
        );
    }

    #[tokio::test]
    async fn a_delete_carries_dry_run_in_its_options_body() {
        let r = Request::builder()
            .method(Method::DELETE)
            .uri("/api/v1/nodes/n")
            .body(Body::from(br#"{"preconditions":{"uid":"u"}}"#.to_vec()))
            .unwrap();
        let dry = dry(r).await.unwrap();
        assert_eq!(dry.uri().to_string(), "/api/v1/nodes/n?dryRun=All");
        let body = dry.into_body().collect_bytes().await.unwrap();
        let options: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(options["dryRun"], serde_json::json!(["All"]));
        assert_eq!(options["preconditions"]["uid"], "u");
    }
}
