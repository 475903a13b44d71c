//! Certificates for https services: ids pass through, names are looked up, a managed
//! certificate is found by label or ordered.

use std::collections::BTreeMap;

use serde_json::json;

use super::annotations;
use super::ownership::{SERVICE_UID_LABEL, service_uid_selector};
use super::secret_certificates::SecretCertificates;
use super::spec::{CertificateType, LbProtocol, LbSpec};
use crate::capabilities::{ServiceRef, Warning};
use crate::error::CloudError;
use crate::hcloud::actions::ActionWaiter;
use crate::hcloud::pagination::list_all;
use crate::hcloud::transport::{Req, Transport};
use crate::hcloud::wire::{CertificateResponse, CertificatesPage, LoadBalancer};

#[derive(Debug)]
pub(super) struct Certificates {
    transport: Transport,
    actions: ActionWaiter,
    secrets: SecretCertificates,
}

impl Certificates {
    pub(super) fn new(transport: Transport, actions: ActionWaiter) -> Self {
        Self {
            transport,
            actions,
            secrets: SecretCertificates::default(),
        }
    }

    /// Certificate ids for https: ids pass through, names are looked up, a managed certificate is
    /// found by label or created (and waited for), a Secret's is uploaded once.
    pub(super) async fn ids(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
        lb: Option<&LoadBalancer>,
        warnings: &mut Vec<Warning>,
    ) -> Result<Vec<i64>, CloudError> {
        if spec.protocol != LbProtocol::Https {
            return Ok(Vec::new());
        }
        if let Some(name) = &spec.http.certificate_secret {
            return self
                .secrets
                .ids(&self.transport, svc, name, lb, warnings)
                .await;
        }
        if spec.http.certificate_type == CertificateType::Managed {
            return Ok(vec![self.managed_certificate(svc, spec).await?]);
        }
        self.uploaded_certificates(spec, lb).await
    }

    /// The Service's managed certificate, found by its `hcloud-ccm/service-uid` label as HCCM's
    /// `GetCertificateByLabel` does (so a changed name annotation does not order a second one), else
    /// created with that label.
    async fn managed_certificate(
        &self,
        svc: &ServiceRef,
        spec: &LbSpec,
    ) -> Result<i64, CloudError> {
        if let Some(id) = self.certificate_by_label(&svc.uid).await? {
            return Ok(id);
        }
        let name = spec
            .http
            .managed_certificate_name
            .clone()
            .unwrap_or_default();
        let mut labels = BTreeMap::from([(SERVICE_UID_LABEL.to_string(), svc.uid.clone())]);
        if spec.http.managed_certificate_acme_staging {
            labels.insert("HC-Use-Staging-CA".to_string(), "true".to_string());
        }
        let body = json!({
            "name": name, "type": "managed",
            "domain_names": spec.http.managed_certificate_domains, "labels": labels,
        });
        let r: CertificateResponse = match self
            .transport
            .call(&Req::post("/certificates", "/certificates", body))
            .await
        {
            Ok(r) => r,
            // Created concurrently (or by an earlier attempt) it carries our label; otherwise the
            // name belongs to a certificate that is not ours.
            Err(e) if e.code() == Some("uniqueness_error") => {
                return self.certificate_by_label(&svc.uid).await?.ok_or_else(|| {
                    CloudError::invalid_input(
                        format!("annotation {}", annotations::HTTP_MANAGED_CERTIFICATE_NAME),
                        name.clone(),
                        format!(
                            "a name no other certificate uses: certificate {name:?} exists but is \
                             not labelled {}",
                            service_uid_selector(&svc.uid)
                        ),
                    )
                });
            }
            Err(e) => return Err(e),
        };
        if let Some(a) = &r.action {
            self.actions.wait(a).await?;
        }
        Ok(r.certificate.id)
    }

    /// Names are looked up; an id the load balancer does not use yet is checked to exist, since
    /// the API would refuse it only after the load balancer was created.
    async fn uploaded_certificates(
        &self,
        spec: &LbSpec,
        lb: Option<&LoadBalancer>,
    ) -> Result<Vec<i64>, CloudError> {
        let in_use: Vec<i64> = lb
            .map(|lb| {
                lb.services
                    .iter()
                    .filter_map(|s| s.http.as_ref())
                    .flat_map(|h| h.certificates.iter().copied())
                    .collect()
            })
            .unwrap_or_default();
        let mut ids = Vec::new();
        for c in &spec.http.certificates {
            match c.parse::<i64>() {
                Ok(id) if in_use.contains(&id) => ids.push(id),
                Ok(id) => {
                    let req = Req::get("/certificates/{id}", format!("/certificates/{id}"));
                    match self.transport.call::<CertificateResponse>(&req).await {
                        Ok(_) => ids.push(id),
                        Err(e) if e.is_not_found() => {
                            return Err(CloudError::invalid_input(
                                format!("annotation {}", annotations::HTTP_CERTIFICATES),
                                c.clone(),
                                format!(
                                    "ids or names of existing certificates (there is no \
                                     certificate {id})"
                                ),
                            ));
                        }
                        Err(e) => return Err(e),
                    }
                }
                Err(_) => match self.certificate_by_name(c).await? {
                    Some(id) => ids.push(id),
                    None => {
                        return Err(CloudError::invalid_input(
                            format!("annotation {}", annotations::HTTP_CERTIFICATES),
                            c.clone(),
                            "ids or names of existing certificates",
                        ));
                    }
                },
            }
        }
        Ok(ids)
    }

    /// After apply: the earlier uploads of the Secrets `spec` names that nothing uses any more
    /// are deleted (see [`SecretCertificates::retire`]), and so are the Secrets' uploads the load
    /// balancer stopped serving (`unserved`: the Service stopped naming the Secret, or the port
    /// went) once nothing uses them.
    pub(super) async fn retire(&self, svc: &ServiceRef, spec: &LbSpec, unserved: &[i64]) {
        let names: Vec<String> = std::iter::once(spec)
            .chain(spec.ports.values())
            .filter_map(|s| s.http.certificate_secret.clone())
            .collect();
        // The named Secrets' uploads first: one label search each covers the renewal's old
        // upload, which the unserved ones then need not read again.
        let mut settled = std::collections::HashSet::new();
        if !names.is_empty() {
            let t = &self.transport;
            self.secrets.retire(t, svc, &names, &mut settled).await;
        }
        let unserved: Vec<i64> = unserved
            .iter()
            .copied()
            .filter(|id| !settled.contains(id))
            .collect();
        if !unserved.is_empty() {
            self.secrets
                .drop_unserved(&self.transport, svc, &unserved)
                .await;
        }
    }

    /// At delete: the uploads of the Secrets the Service named that nothing uses any more go.
    pub(super) async fn release(&self, svc: &ServiceRef) {
        let names = secrets_named(svc);
        if !names.is_empty() {
            self.secrets.release(&self.transport, svc, &names).await;
        }
    }

    async fn certificate_by_label(&self, uid: &str) -> Result<Option<i64>, CloudError> {
        let found = list_all::<CertificatesPage>(
            &self.transport,
            Req::get("/certificates", "/certificates")
                .query("label_selector", service_uid_selector(uid)),
        )
        .await?;
        Ok(found.iter().map(|c| c.id).min())
    }

    async fn certificate_by_name(&self, name: &str) -> Result<Option<i64>, CloudError> {
        let found = list_all::<CertificatesPage>(
            &self.transport,
            Req::get("/certificates", "/certificates").query("name", name),
        )
        .await?;
        Ok(found.into_iter().find(|c| c.name == name).map(|c| c.id))
    }
}

/// The Secrets `svc` names in `http-certificate-secret`, Service-wide or for a port, read from
/// the annotations alone (so even a Service whose other annotations are invalid is followed).
pub(super) fn secrets_named(svc: &ServiceRef) -> Vec<String> {
    let mut names: Vec<String> = svc
        .annotations
        .iter()
        .filter(|(k, _)| {
            k.strip_prefix(annotations::HTTP_CERTIFICATE_SECRET)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        })
        .map(|(_, v)| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_names_its_secrets_service_wide_and_per_port() {
        let key = annotations::HTTP_CERTIFICATE_SECRET;
        let svc = ServiceRef {
            annotations: [
                (key.to_string(), "web-tls".to_string()),
                (format!("{key}.8443"), " admin-tls ".to_string()),
                (format!("{key}.443"), "web-tls".to_string()),
                (format!("{key}-other"), "no".to_string()),
                (format!("{key}.80"), " ".to_string()),
            ]
            .into(),
            ..Default::default()
        };
        assert_eq!(secrets_named(&svc), ["admin-tls", "web-tls"]);
    }
}
