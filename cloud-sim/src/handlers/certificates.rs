//! `/certificates`: uploaded certificates (stored as given) and managed ones, whose issuance
//! is an action that ends in `completed` or, with an injected action error, `failed`.

use axum::Router;
use axum::extract::State as AppState;
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::collection::{list, update};
use super::{ApiResult, Body, Id, action, check_labels, created, no_content, ok, validate_name};
use crate::actions::{Effect, ResourceRef};
use crate::app::App;
use crate::clock::now_ms;
use crate::error::ApiError;
use crate::pagination::{Query, SortKey};
use crate::resource::{Resource, resource_accessors};
use crate::state::{Certificate, NINETY_DAYS_MS, State, fingerprint};
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
            if !pem.contains("-----BEGIN CERTIFICATE-----")
                || !pem.contains("-----END CERTIFICATE-----")
            {
                return Err(ApiError::invalid_input(
                    "certificate",
                    "certificate must be a PEM encoded X.509 certificate",
                ));
            }
            let key = req.private_key.as_deref().unwrap_or_default();
            if !(key.contains("-----BEGIN") && key.contains("PRIVATE KEY-----")) {
                return Err(ApiError::invalid_input(
                    "private_key",
                    "private_key must be a PEM encoded private key",
                ));
            }
            cert.fingerprint = Some(fingerprint(pem));
            cert.certificate = Some(pem.to_owned());
            cert.not_valid_before_ms = Some(now);
            cert.not_valid_after_ms = Some(now + NINETY_DAYS_MS);
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
