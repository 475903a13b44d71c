//! Binds a chart RBAC file (`charts/cloud-controllers/files/rbac/<controller>.yaml`: a ClusterRole
//! and a Lease Role) to a ServiceAccount, as the chart does, so tests and the demo run each
//! controller with exactly those rules (through impersonation).

use std::path::Path;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};

use crate::error::{Error, Result};

/// Creates namespace `ns` and ServiceAccount `ns/sa` if missing, applies the file's ClusterRole
/// (renamed `<name>:<ns>`, so runs in different namespaces do not share one) and Role (in `ns`),
/// and binds both to the ServiceAccount.
pub async fn bind_chart_rbac(client: &Client, file: &Path, ns: &str, sa: &str) -> Result<()> {
    let manifest = |message: String| Error::Manifest {
        path: file.to_path_buf(),
        message,
    };
    let text =
        std::fs::read_to_string(file).map_err(Error::io(format!("reading {}", file.display())))?;
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| manifest(e.to_string()))?;
    ensure_service_account(client, ns, sa).await?;
    let subject = Subject {
        kind: "ServiceAccount".into(),
        name: sa.into(),
        namespace: Some(ns.into()),
        ..Default::default()
    };
    let pp = PatchParams::apply("cloud-controllers-testenv").force();
    for doc in docs {
        let role_ref = |kind: &str, name: &str| RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: kind.into(),
            name: name.into(),
        };
        match doc["kind"].as_str() {
            Some("ClusterRole") => {
                let mut role: ClusterRole =
                    serde_json::from_value(doc).map_err(|e| manifest(e.to_string()))?;
                let name = format!("{}:{ns}", role.name_any());
                role.metadata.name = Some(name.clone());
                Api::<ClusterRole>::all(client.clone())
                    .patch(&name, &pp, &Patch::Apply(&role))
                    .await?;
                let mut binding = ClusterRoleBinding::default();
                binding.metadata.name = Some(name.clone());
                binding.role_ref = role_ref("ClusterRole", &name);
                binding.subjects = Some(vec![subject.clone()]);
                Api::<ClusterRoleBinding>::all(client.clone())
                    .patch(&name, &pp, &Patch::Apply(&binding))
                    .await?;
            }
            Some("Role") => {
                let mut role: Role =
                    serde_json::from_value(doc).map_err(|e| manifest(e.to_string()))?;
                let name = role.name_any();
                role.metadata.namespace = Some(ns.into());
                Api::<Role>::namespaced(client.clone(), ns)
                    .patch(&name, &pp, &Patch::Apply(&role))
                    .await?;
                let mut binding = RoleBinding::default();
                binding.metadata.name = Some(name.clone());
                binding.metadata.namespace = Some(ns.into());
                binding.role_ref = role_ref("Role", &name);
                binding.subjects = Some(vec![subject.clone()]);
                Api::<RoleBinding>::namespaced(client.clone(), ns)
                    .patch(&name, &pp, &Patch::Apply(&binding))
                    .await?;
            }
            other => return Err(manifest(format!("unexpected kind {other:?}"))),
        }
    }
    Ok(())
}

async fn ensure_service_account(client: &Client, ns: &str, sa: &str) -> Result<()> {
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(ns.into());
    let mut account = ServiceAccount::default();
    account.metadata.name = Some(sa.into());
    let created = Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .map(drop);
    already_exists_is_fine(created)?;
    let created = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &account)
        .await
        .map(drop);
    already_exists_is_fine(created)
}

fn already_exists_is_fine(r: std::result::Result<(), kube::Error>) -> Result<()> {
    match r {
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        r => Ok(r?),
    }
}
