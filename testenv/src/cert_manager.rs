//! cert-manager's CRDs for the tests that run its controllers ([`crate::cert_manager`]): the
//! `deploy/crds/*.yaml` of the same module version (plain YAML, no templating), installed as they
//! are.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};

use crate::binaries::{CERT_MANAGER_VERSION, cache_dir, tail};
use crate::error::{Error, Result};

/// The directory of cert-manager's CRDs, copied from the Go module cache (`go mod download`,
/// through the proxy when the module is not there yet) into
/// `<cache>/cert-manager-crds-<version>/` on first use.
pub fn cert_manager_crds() -> Result<PathBuf> {
    let dir = cache_dir().join(format!("cert-manager-crds-{CERT_MANAGER_VERSION}"));
    let done = dir.join(".complete");
    if done.exists() {
        return Ok(dir);
    }
    fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    let lock_path = dir.join(".lock");
    let lock =
        File::create(&lock_path).map_err(Error::io(format!("creating {}", lock_path.display())))?;
    lock.lock()
        .map_err(Error::io(format!("locking {}", lock_path.display())))?;
    if done.exists() {
        return Ok(dir);
    }
    let crds = module_dir()?.join("deploy/crds");
    let entries = fs::read_dir(&crds).map_err(Error::io(format!("reading {}", crds.display())))?;
    for entry in entries {
        let path = entry
            .map_err(Error::io(format!("reading {}", crds.display())))?
            .path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let to = dir.join(path.file_name().unwrap_or_default());
            fs::copy(&path, &to).map_err(Error::io(format!("copying {}", path.display())))?;
        }
    }
    fs::write(&done, "").map_err(Error::io(format!("writing {}", done.display())))?;
    Ok(dir)
}

/// Where `go mod download` put the module's source.
fn module_dir() -> Result<PathBuf> {
    let module = format!("github.com/cert-manager/cert-manager@{CERT_MANAGER_VERSION}");
    let output = Command::new("go")
        .args(["mod", "download", "-json", &module])
        .current_dir(std::env::temp_dir())
        .env("GOTOOLCHAIN", "local")
        .output()
        .map_err(Error::io(format!("running go mod download {module}")))?;
    let downloaded: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    if let Some(dir) = downloaded["Dir"].as_str() {
        return Ok(PathBuf::from(dir));
    }
    let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stdout));
    Err(Error::GoBuild {
        component: "cert-manager CRDs",
        version: CERT_MANAGER_VERSION,
        step: "go mod download",
        goproxy: std::env::var("GOPROXY").unwrap_or_else(|_| "default".into()),
        output: tail(&text, 30),
    })
}

/// Applies every CRD of [`cert_manager_crds`] (server-side, so a second test binary's apply is a
/// no-op) and waits until the apiserver serves them all (`Established`, at most 30 s).
pub async fn install_cert_manager_crds(client: &Client) -> Result<()> {
    let dir = tokio::task::spawn_blocking(cert_manager_crds)
        .await
        .map_err(|e| Error::io("finding cert-manager's CRDs")(std::io::Error::other(e)))??;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply("cloud-controllers-testenv").force();
    let mut names = Vec::new();
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .map_err(Error::io(format!("reading {}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for path in files {
        for crd in read_crds(&path)? {
            let name = crd.name_any();
            api.patch(&name, &pp, &Patch::Apply(&crd)).await?;
            names.push(name);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for name in names {
        loop {
            let crd = api.get(&name).await?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            if Instant::now() > deadline {
                return Err(Error::Manifest {
                    path: dir.clone(),
                    message: format!("CRD {name} not Established within 30 s"),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

fn read_crds(path: &Path) -> Result<Vec<CustomResourceDefinition>> {
    let manifest = |message: String| Error::Manifest {
        path: path.to_path_buf(),
        message,
    };
    let text =
        fs::read_to_string(path).map_err(Error::io(format!("reading {}", path.display())))?;
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| manifest(e.to_string()))?;
    docs.into_iter()
        .filter(|d| !d.is_null())
        .map(|d| serde_json::from_value(d).map_err(|e| manifest(e.to_string())))
        .collect()
}
