//! `/certificates`: uploaded certificates (checked as Hetzner checks them, `certs`) and managed
//! ones, whose issuance is an action that ends in `completed` or, with an injected action error,
//! `failed`. A certificate a load balancer's service uses cannot be deleted.

use axum::Router;
use axum::extract::State as AppState;
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::collection::{list, update};
use super::{ApiResult, Body, Id, action, check_labels, created, no_content, ok, validate_name};
use crate::actions::{Effect, ResourceRef};
use crate::app::App;
use crate::certs;
use crate::clock::now_ms;
use crate::error::ApiError;
use crate::pagination::{Query, SortKey};
use crate::resource::{Resource, resource_accessors};
use crate::state::PrivateKeyPem;
use crate::state::{Certificate, State};
use crate::wire::{self, CreateCertificateReq};

pub fn routes() -> Router<App> {
    Router::new()
        .route("/v1/certificates", get(list::<Certificate>).post(create))
        .route(
            "/v1/certificates/{id}",
            get(get_one).put(update::<Certificate>).delete(delete),
        )
        .route("/v1/certificates/{id}/actions/retry", post(retry))
}

impl Resource for Certificate {
    const KIND: &'static str = "certificate";
    const COLLECTION: &'static str = "certificates";
    resource_accessors!(certificates);

    fn render(&self, st: &State) -> Value {
        wire::certificate(st, self)
    }

    fn own_sort_key(&self, field: &str) -> Option<SortKey> {
        (field == "type").then(|| SortKey::Str(self.kind.clone()))
    }

    /// `type=` (repeatable): `uploaded` and/or `managed`.
    fn list_filter(query: &Query) -> Result<impl Fn(&Certificate) -> bool, ApiError> {
        let types: Vec<&str> = query.all("type").collect();
        Ok(move |c: &Certificate| types.is_empty() || types.contains(&c.kind.as_str()))
    }
}

async fn get_one(AppState(app): AppState<App>, Id(id): Id) -> ApiResult {
    let st = app.read();
    let c = st
        .certificates
        .get(&id)
        .ok_or_else(|| ApiError::not_found("certificate"))?;
    ok(json!({"certificate": wire::certificate(&st, c)}))
}

fn valid_domain(d: &str) -> bool {
    let d = d.strip_prefix("*.").unwrap_or(d);
    d.contains('.')
        && d.len() <= 253
        && d.split('.').all(|p| {
            !p.is_empty()
                && p.len() <= 63
                && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

async fn create(AppState(app): AppState<App>, Body(req): Body<CreateCertificateReq>) -> ApiResult {
    validate_name(&req.name, false)?;
    let labels = req.labels.clone().unwrap_or_default();
    check_labels(&labels)?;
    let kind = req.kind.clone().unwrap_or_else(|| "uploaded".to_owned());
    let domains = req.domain_names.clone().unwrap_or_default();
    if let Some(bad) = domains.iter().find(|d| !valid_domain(d)) {
        return Err(ApiError::invalid_input(
            "domain_names",
            format!("'{bad}' is not a domain name"),
        ));
    }
    let now = now_ms();
    let mut cert = Certificate {
        id: 0,
        name: req.name.clone(),
        labels,
        kind: kind.clone(),
        certificate: None,
        private_key: None,
        created_ms: now,
        not_valid_before_ms: None,
        not_valid_after_ms: None,
        domain_names: domains.clone(),
        fingerprint: None,
        issuance: None,
        error: None,
    };
    match kind.as_str() {
        "uploaded" => {
            let pem = req.certificate.as_deref().unwrap_or_default();
            let key = req.private_key.as_ref().map_or("", PrivateKeyPem::expose);
            let facts = certs::check_upload(pem, key)?;
            cert.fingerprint = Some(facts.fingerprint);
            cert.certificate = Some(pem.to_owned());
            cert.private_key = Some(PrivateKeyPem::new(key));
            cert.not_valid_before_ms = Some(facts.not_valid_before_ms);
            cert.not_valid_after_ms = Some(facts.not_valid_after_ms);
            // The API lists the certificate's own names; `domain_names` in the request is for
            // managed ones only.
            cert.domain_names = facts.domain_names;
        }
        "managed" => {
            if domains.is_empty() {
                return Err(ApiError::invalid_input(
                    "domain_names",
                    "a managed certificate needs domain_names",
                ));
            }
            cert.issuance = Some("pending".to_owned());
        }
        _ => {
            return Err(ApiError::invalid_input(
                "type",
                "must be uploaded or managed",
            ));
        }
    }
    let mut st = app.write();
    if st.certificates.values().any(|c| c.name == req.name) {
        return Err(ApiError::uniqueness("name"));
    }
    cert.id = State::next_id(&mut st.next.certificate);
    let id = cert.id;
    st.certificates.insert(id, cert);
    let action = (kind == "managed").then(|| {
        st.start_action(
            "create_certificate",
            vec![ResourceRef::new("certificate", id)],
            Effect::CertificateIssued { certificate: id },
        )
    });
    created(json!({
        "certificate": wire::certificate(&st, &st.certificates[&id]),
        "action": action.map(|a| st.action_json(a)),
    }))
}

async fn delete(AppState(app): AppState<App>, Id(id): Id) -> ApiResult {
    let mut st = app.write();
    if !st.certificates.contains_key(&id) {
        return Err(ApiError::not_found("certificate"));
    }
    st.ensure_unlocked("certificate", id)?;
    // Hetzner refuses it ("certificate still in use", terraform-provider-hcloud#1141): the
    // services must let go of it first, so rotating means adding the new one before deleting.
    let used = st.load_balancers.values().any(|lb| {
        lb.services.iter().any(|s| {
            s.http
                .as_ref()
                .is_some_and(|h| h.certificates.contains(&id))
        })
    });
    if used {
        return Err(ApiError::unprocessable(
            "resource_in_use",
            "certificate still in use",
        ));
    }
    st.certificates.remove(&id);
    no_content()
}

async fn retry(AppState(app): AppState<App>, Id(id): Id) -> ApiResult {
    let mut st = app.write();
    let c = st
        .certificates
        .get_mut(&id)
        .ok_or_else(|| ApiError::not_found("certificate"))?;
    if c.issuance.as_deref() != Some("failed") {
        return Err(ApiError::invalid_input(
            "certificate",
            "only a managed certificate whose issuance failed can be retried",
        ));
    }
    c.issuance = Some("pending".to_owned());
    c.error = None;
    st.ensure_unlocked("certificate", id)?;
    let a = st.start_action(
        "issue_certificate",
        vec![ResourceRef::new("certificate", id)],
        Effect::CertificateIssued { certificate: id },
    );
    action(&st, a)
}
