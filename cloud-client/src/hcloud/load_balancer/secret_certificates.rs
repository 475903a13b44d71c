//! Certificates from Kubernetes TLS Secrets (`http-certificate-secret`): one upload per Secret
//! and content, found again by its labels, retired once nothing uses it.
//!
//! - **Uploaded once.** An upload is labelled with the Secret's UID and the content hash
//!   ([`secret_check`]), so every Service and port naming the Secret finds the same one; the
//!   process remembers the id per Secret, so an unchanged Secret costs no call on a resync.
//! - **Rotation.** A new hash is a new upload; the plan then switches every port that uses the
//!   Secret (the ports' `http.certificates`), and [`retire`](SecretCertificates::retire) deletes
//!   the Secret's other uploads once Hetzner lists no load balancer using them (`used_by`). Until
//!   the switch is applied the old upload serves, so a failed upload or switch changes nothing.
//! - **An unusable Secret** (missing, not TLS, a key that is not the certificate's, expired, over
//!   Hetzner's limits) keeps the port on the upload it has, with a Warning; a port with none is
//!   refused before any write.
//! - **The key** goes to Hetzner in the upload's body and nowhere else: the transport shows
//!   bodies without it, and an error the upload returns is scrubbed of it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::SystemTime;

use serde_json::json;

use super::annotations;
use super::secret_check::{self, Checked};
use crate::capabilities::{
    CERTIFICATE_SECRET_LABEL, CERTIFICATE_SECRET_UNUSABLE, SecretLookup, ServiceRef, TlsSecret,
    Warning,
};
use crate::error::CloudError;
use crate::hcloud::pagination::list_all;
use crate::hcloud::transport::{Req, Transport};
use crate::hcloud::wire::{Certificate, CertificateResponse, CertificatesPage, LoadBalancer};
use crate::scrub;
use crate::secret::Secret;

/// Labels of an upload: whose Secret, which content.
pub const SECRET_UID_LABEL: &str = "cloud-controllers.io/secret-uid";
pub const SECRET_NAMESPACE_LABEL: &str = "cloud-controllers.io/secret-namespace";
pub const SECRET_NAME_LABEL: &str = "cloud-controllers.io/secret-name";
pub const HASH_LABEL: &str = "cloud-controllers.io/certificate-sha256";

#[derive(Debug, Default)]
pub(super) struct SecretCertificates {
    /// Per Secret UID, the content hash and id of its current upload.
    current: Mutex<HashMap<String, (String, i64)>>,
    /// Secret UIDs whose other uploads are known to be gone (none after a start).
    swept: Mutex<HashSet<String>>,
    /// One upload or retirement at a time: Services naming the same Secret are reconciled
    /// concurrently, and the second must find the first's work done rather than repeat it.
    busy: tokio::sync::Mutex<()>,
}

impl SecretCertificates {
    /// The certificate ids port(s) of `svc` get from Secret `name`: its current upload, made if
    /// need be; or, when the Secret cannot be used, what `lb` serves from it now.
    pub(super) async fn ids(
        &self,
        t: &Transport,
        svc: &ServiceRef,
        name: &str,
        lb: Option<&LoadBalancer>,
        warnings: &mut Vec<Warning>,
    ) -> Result<Vec<i64>, CloudError> {
        let why = match svc.tls_secrets.get(name) {
            SecretLookup::Found(s) => match secret_check::check(&s, SystemTime::now()) {
                Ok(c) => return Ok(vec![self.upload_once(t, &s, &c).await?]),
                Err(why) => why,
            },
            SecretLookup::Missing => format!(
                "there is no Secret {name} labelled {CERTIFICATE_SECRET_LABEL}=true in namespace \
                 {}: create it, or label it (cert-manager: the Certificate's \
                 spec.secretTemplate.labels)",
                svc.namespace
            ),
            SecretLookup::NotTls(why) => why,
            SecretLookup::Disabled => "service-controller reads no Secrets: install the chart \
                                       with serviceController.certificateSecrets.enabled=true"
                .to_owned(),
        };
        let kept = self.serving_from(t, &svc.namespace, name, lb).await?;
        if kept.is_empty() {
            return Err(CloudError::invalid_input(
                format!("annotation {}", annotations::HTTP_CERTIFICATE_SECRET),
                name,
                format!("a usable kubernetes.io/tls Secret: {why}"),
            ));
        }
        warnings.push(Warning::new(
            CERTIFICATE_SECRET_UNUSABLE,
            format!(
                "Secret {name} cannot be used ({why}); the load balancer keeps serving the \
                 certificate it has from it"
            ),
        ));
        Ok(kept)
    }

    /// The upload of `c`: remembered, found by its labels, or made.
    async fn upload_once(
        &self,
        t: &Transport,
        s: &TlsSecret,
        c: &Checked,
    ) -> Result<i64, CloudError> {
        let known = || {
            let current = self.current.lock().expect("poisoned");
            current
                .get(&s.uid)
                .filter(|(hash, _)| *hash == c.hash)
                .map(|(_, id)| *id)
        };
        if let Some(id) = known() {
            return Ok(id);
        }
        let _one_at_a_time = self.busy.lock().await;
        if let Some(id) = known() {
            return Ok(id);
        }
        let id = match self.find(t, &s.uid, Some(&c.hash)).await?.first() {
            Some(found) => found.id,
            None => match self.upload(t, s, c).await {
                Ok(id) => id,
                // Another reconcile uploaded it meanwhile: the name is the content's.
                Err(e) if e.code() == Some("uniqueness_error") => {
                    let found = self.find(t, &s.uid, Some(&c.hash)).await?;
                    found.first().map(|f| f.id).ok_or(e)?
                }
                Err(e) => return Err(e),
            },
        };
        self.current
            .lock()
            .expect("poisoned")
            .insert(s.uid.clone(), (c.hash.clone(), id));
        self.swept.lock().expect("poisoned").remove(&s.uid);
        Ok(id)
    }

    async fn upload(&self, t: &Transport, s: &TlsSecret, c: &Checked) -> Result<i64, CloudError> {
        tracing::info!(secret = %format!("{}/{}", s.namespace, s.name), serial = %c.serial,
            "uploading the certificate of a TLS Secret");
        let labels = BTreeMap::from([
            (SECRET_UID_LABEL, s.uid.as_str()),
            (SECRET_NAMESPACE_LABEL, s.namespace.as_str()),
            (SECRET_NAME_LABEL, s.name.as_str()),
            (HASH_LABEL, c.hash.as_str()),
        ]);
        let body = json!({
            "name": format!("{}-{}", s.uid, &c.hash[..12]),
            "type": "uploaded",
            "certificate": c.chain_pem,
            "private_key": c.key_pem.expose(),
            "labels": labels,
        });
        let made: Result<CertificateResponse, CloudError> = t
            .call(&Req::post("/certificates", "/certificates", body))
            .await;
        made.map(|r| r.certificate.id)
            .map_err(|e| without_key(e, &c.key_pem))
    }

    /// The Secret's uploads (of content `hash` only, if given), oldest first.
    async fn find(
        &self,
        t: &Transport,
        uid: &str,
        hash: Option<&str>,
    ) -> Result<Vec<Certificate>, CloudError> {
        let mut selector = format!("{SECRET_UID_LABEL}={uid}");
        if let Some(h) = hash {
            selector.push_str(&format!(",{HASH_LABEL}={h}"));
        }
        let req = Req::get("/certificates", "/certificates").query("label_selector", selector);
        let mut found = list_all::<CertificatesPage>(t, req).await?;
        found.sort_by_key(|c| c.id);
        Ok(found)
    }

    /// What `lb` serves now from Secret `namespace/name` (by the uploads' labels).
    async fn serving_from(
        &self,
        t: &Transport,
        namespace: &str,
        name: &str,
        lb: Option<&LoadBalancer>,
    ) -> Result<Vec<i64>, CloudError> {
        let in_use: Vec<i64> = lb
            .into_iter()
            .flat_map(|lb| &lb.services)
            .filter_map(|s| s.http.as_ref())
            .flat_map(|h| h.certificates.iter().copied())
            .collect();
        if in_use.is_empty() {
            return Ok(Vec::new());
        }
        let selector = format!("{SECRET_NAMESPACE_LABEL}={namespace},{SECRET_NAME_LABEL}={name}");
        let req = Req::get("/certificates", "/certificates").query("label_selector", selector);
        let theirs = list_all::<CertificatesPage>(t, req).await?;
        Ok(theirs
            .iter()
            .map(|c| c.id)
            .filter(|id| in_use.contains(id))
            .collect())
    }

    /// After the ports were switched: every upload of `svc`'s Secrets but the current one that
    /// no load balancer uses is deleted. Once per Secret and content per process: an unchanged
    /// Secret costs nothing here.
    /// `settled`: the earlier uploads it listed, each deleted here or found in use, so
    /// [`drop_unserved`](Self::drop_unserved) need not read them again.
    pub(super) async fn retire(
        &self,
        t: &Transport,
        svc: &ServiceRef,
        names: &[String],
        settled: &mut HashSet<i64>,
    ) {
        for name in names {
            let SecretLookup::Found(s) = svc.tls_secrets.get(name) else {
                continue;
            };
            let current = self.current.lock().expect("poisoned").get(&s.uid).cloned();
            let Some((hash, _)) = current else { continue };
            if self.swept.lock().expect("poisoned").contains(&s.uid) {
                continue;
            }
            let _one_at_a_time = self.busy.lock().await;
            if self.swept.lock().expect("poisoned").contains(&s.uid) {
                continue;
            }
            match self.retire_others(t, &s.uid, Some(&hash), settled).await {
                Ok(true) => {
                    self.swept.lock().expect("poisoned").insert(s.uid.clone());
                }
                // Still in use somewhere (another Service not switched yet): the next
                // reconcile tries again.
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, secret = %name,
                    "could not retire a Secret's earlier certificates; the next reconcile retries"),
            }
        }
    }

    /// At a Service's delete: every upload of the Secrets it named that nothing uses any more
    /// (another Service may still use one). A Secret already deleted is not known by its UID
    /// any more; its uploads stay (docs/annotations.md says so).
    pub(super) async fn release(&self, t: &Transport, svc: &ServiceRef, names: &[String]) {
        for name in names {
            let SecretLookup::Found(s) = svc.tls_secrets.get(name) else {
                continue;
            };
            match self
                .retire_others(t, &s.uid, None, &mut HashSet::new())
                .await
            {
                Ok(true) => {
                    self.current.lock().expect("poisoned").remove(&s.uid);
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, secret = %name,
                    "could not delete a Secret's certificates after its Service; the next \
                     reconcile of a Service naming it retries"),
            }
        }
    }

    /// Uploads the Service's load balancer stopped serving (the Service stopped naming the
    /// Secret, the port went, or the Secret was renewed, deleted or recreated): each deleted once
    /// no load balancer uses it, if its labels make it a Secret's upload of the Service's
    /// namespace. Any other certificate the load balancer stopped serving is left alone.
    pub(super) async fn drop_unserved(&self, t: &Transport, svc: &ServiceRef, ids: &[i64]) {
        for &id in ids {
            // Read under the lock, so a retirement running beside this one has deleted it
            // already (404) rather than both deleting it.
            let _one_at_a_time = self.busy.lock().await;
            let path = format!("/certificates/{id}");
            let found: Result<CertificateResponse, CloudError> =
                t.call(&Req::get("/certificates/{id}", path.clone())).await;
            let c = match found {
                Ok(r) => r.certificate,
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    tracing::warn!(error = %e, certificate = id,
                        "could not read a certificate the load balancer stopped serving");
                    continue;
                }
            };
            if !c.used_by.is_empty() || !of_a_secret_of_the_namespace(svc, &c) {
                continue;
            }
            tracing::info!(certificate = id, name = %c.name,
                "deleting a certificate of a Secret that no load balancer serves any more");
            match t.call_empty(&Req::delete("/certificates/{id}", path)).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                // In use again meanwhile (another Service switched to it): it stays.
                Err(e) => {
                    tracing::warn!(error = %e, certificate = id,
                        "could not delete a certificate the load balancer stopped serving");
                    continue;
                }
            }
            self.current
                .lock()
                .expect("poisoned")
                .retain(|_, (_, current)| *current != id);
        }
    }

    /// Deletes the Secret's uploads (other than content `keep`) that nothing uses; whether none
    /// is left. Each upload it deleted or found in use goes into `settled`.
    async fn retire_others(
        &self,
        t: &Transport,
        uid: &str,
        keep: Option<&str>,
        settled: &mut HashSet<i64>,
    ) -> Result<bool, CloudError> {
        let mut all_gone = true;
        for c in self.find(t, uid, None).await? {
            if keep.is_some() && c.labels.get(HASH_LABEL).map(String::as_str) == keep {
                continue;
            }
            settled.insert(c.id);
            if !c.used_by.is_empty() {
                all_gone = false;
                continue;
            }
            tracing::info!(certificate = c.id, name = %c.name, "deleting a Secret's earlier certificate");
            let req = Req::delete("/certificates/{id}", format!("/certificates/{}", c.id));
            match t.call_empty(&req).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(all_gone)
    }
}

/// Whether `c` is the upload of a Secret of `svc`'s namespace, by its labels. Asked only of an
/// upload the Service's own load balancer served until now, so it is this cluster's: the Secret
/// may since have been deleted, or recreated under a new UID (deleting a Secret is how one makes
/// cert-manager issue again), and its old upload must not stay behind.
fn of_a_secret_of_the_namespace(svc: &ServiceRef, c: &Certificate) -> bool {
    let label = |k: &str| c.labels.get(k).map(String::as_str);
    label(SECRET_NAMESPACE_LABEL) == Some(svc.namespace.as_str())
        && label(SECRET_NAME_LABEL).is_some()
        && label(SECRET_UID_LABEL).is_some()
}

/// `e` with no run of the key's characters in it, whatever the cloud echoed.
fn without_key(e: CloudError, key: &Secret) -> CloudError {
    let lines: Vec<Secret> = key
        .expose()
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .map(Secret::new)
        .collect();
    let clean = |s: &str| scrub::scrub(s, lines.iter());
    match e {
        CloudError::Api(mut a) => {
            a.message = clean(&a.message);
            a.code = clean(&a.code);
            CloudError::Api(a)
        }
        CloudError::Transport {
            method,
            endpoint,
            message,
        } => CloudError::Transport {
            method,
            endpoint,
            message: clean(&message),
        },
        other => other,
    }
}
