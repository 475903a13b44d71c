//! `CloudStackClient`'s world building: zones, offerings, networks, projects, accounts, VMs and
//! their lifecycle, static NAT, settings, jobs and where a load-balancer rule listens, through `/_sim/cloudstack` (not counted,
//! untouched by faults).

use std::time::Instant;

use reqwest::Method;
use serde_json::{Value, json};

use super::client::{CloudStackClient, CsClientError, CsVmSpec};
use crate::data_plane::rules::RuleListenerInfo;

type Result<T, E = CsClientError> = std::result::Result<T, E>;

impl CloudStackClient {
    async fn control(&self, method: Method, path: &str, body: Option<Value>) -> Result<Value> {
        let mut req = self
            .http
            .request(method, format!("{}/_sim/cloudstack{path}", self.base));
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if (200..300).contains(&status) {
            Ok(body)
        } else {
            Err(CsClientError::Control { status, body })
        }
    }

    fn id_of(v: &Value, key: &str) -> Result<String> {
        v[key]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| CsClientError::Unexpected(format!("no {key} in {v}")))
    }

    pub async fn world(&self) -> Result<Value> {
        self.control(Method::GET, "/world", None).await
    }

    /// Changes live settings (`default_page_size`, `allow_user_view_destroyed_vm`,
    /// `throttling`, `unreachable`, `version`); returns them all.
    pub async fn set_config(&self, settings: Value) -> Result<Value> {
        self.control(Method::PUT, "/config", Some(settings)).await
    }

    pub async fn create_zone(&self, name: &str) -> Result<String> {
        let v = self
            .control(Method::POST, "/zones", Some(json!({"name": name})))
            .await?;
        Self::id_of(&v, "id")
    }

    pub async fn create_offering(
        &self,
        name: &str,
        cpu_number: u32,
        memory: u32,
    ) -> Result<String> {
        let body = json!({"name": name, "cpu_number": cpu_number, "memory": memory});
        let v = self.control(Method::POST, "/offerings", Some(body)).await?;
        Self::id_of(&v, "id")
    }

    /// `spec`: `{"name", "zone"?, "kind"? ("isolated" | "vpc_tier" | "shared"), "cidr"?,
    /// "account"?, "project"?, "vpc"?, "acl"?}`.
    pub async fn create_network(&self, spec: Value) -> Result<String> {
        let v = self.control(Method::POST, "/networks", Some(spec)).await?;
        Self::id_of(&v, "id")
    }

    pub async fn create_project(&self, name: &str, members: &[&str]) -> Result<String> {
        let body = json!({"name": name, "members": members});
        let v = self.control(Method::POST, "/projects", Some(body)).await?;
        Self::id_of(&v, "id")
    }

    /// An account (`role` `admin` or `user`) with a generated key pair: a client signing with
    /// it.
    pub async fn create_account(
        &self,
        name: &str,
        role: &str,
    ) -> Result<(String, CloudStackClient)> {
        let body = json!({"name": name, "role": role});
        let v = self.control(Method::POST, "/accounts", Some(body)).await?;
        let client = self.with_keys(
            &Self::id_of(&v, "api_key")?,
            &Self::id_of(&v, "secret_key")?,
        );
        Ok((Self::id_of(&v, "id")?, client))
    }

    pub async fn set_account_enabled(&self, account: &str, enabled: bool) -> Result<()> {
        let path = format!("/accounts/{account}");
        self.control(Method::PUT, &path, Some(json!({"enabled": enabled})))
            .await?;
        Ok(())
    }

    pub async fn create_vm(&self, spec: &CsVmSpec) -> Result<String> {
        let v = self
            .control(Method::POST, "/vms", Some(json!(spec)))
            .await?;
        v["ids"][0]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| CsClientError::Unexpected(format!("no id in {v}")))
    }

    /// `count` VMs `{prefix}-1` ... `{prefix}-{count}` in one request; `spec.name` is ignored.
    pub async fn create_vms(
        &self,
        count: usize,
        prefix: &str,
        spec: &CsVmSpec,
    ) -> Result<Vec<String>> {
        let mut body = json!(CsVmSpec {
            name: None,
            ..spec.clone()
        });
        body["count"] = json!(count);
        body["prefix"] = json!(prefix);
        let v = self.control(Method::POST, "/vms", Some(body)).await?;
        serde_json::from_value(v["ids"].clone())
            .map_err(|e| CsClientError::Unexpected(e.to_string()))
    }

    /// A VM as world building sees it (`{"id", "name", "state", "host", "ip", "public_ip", ...}`).
    pub async fn vm(&self, id: &str) -> Result<Value> {
        self.control(Method::GET, &format!("/vms/{id}"), None).await
    }

    /// Every VM, expunged ones included.
    pub async fn vms(&self) -> Result<Vec<Value>> {
        let v = self.control(Method::GET, "/vms", None).await?;
        Ok(v["vms"].as_array().cloned().unwrap_or_default())
    }

    async fn vm_op(&self, id: &str, op: &str) -> Result<Value> {
        self.control(Method::POST, &format!("/vms/{id}/{op}"), None)
            .await
    }

    /// `Starting`, then `Running` after the action duration.
    pub async fn start_vm(&self, id: &str) -> Result<Value> {
        self.vm_op(id, "start").await
    }

    /// `Stopping`, then `Stopped` after the action duration.
    pub async fn stop_vm(&self, id: &str) -> Result<Value> {
        self.vm_op(id, "stop").await
    }

    /// `Destroyed` at once.
    pub async fn destroy_vm(&self, id: &str) -> Result<Value> {
        self.vm_op(id, "destroy").await
    }

    /// `Expunging`, then gone after the action duration.
    pub async fn expunge_vm(&self, id: &str) -> Result<Value> {
        self.vm_op(id, "expunge").await
    }

    /// Straight into `state` (`Running`, `Stopped`, `Starting`, `Stopping`, `Migrating`,
    /// `Destroyed`, `Expunging`, `Error`).
    pub async fn set_vm_state(&self, id: &str, state: &str) -> Result<Value> {
        let path = format!("/vms/{id}");
        self.control(Method::PUT, &path, Some(json!({"state": state})))
            .await
    }

    /// Changes a VM's fields as world building allows (`name`, `display_name`, `host`).
    pub async fn update_vm(&self, id: &str, fields: Value) -> Result<Value> {
        self.control(Method::PUT, &format!("/vms/{id}"), Some(fields))
            .await
    }

    /// Polls until world building shows the VM in `state` (transitions settle after the
    /// action duration).
    pub async fn wait_vm_state(&self, id: &str, state: &str) -> Result<()> {
        let deadline = Instant::now() + self.job_deadline;
        loop {
            let vm = self.vm(id).await?;
            if vm["state"] == state {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(CsClientError::Unexpected(format!(
                    "VM {id} is {} , not {state}",
                    vm["state"]
                )));
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    /// Static NAT for a VM (the given address, else the zone's next free one): its public
    /// address.
    pub async fn set_static_nat(&self, vm: &str, ip: Option<&str>) -> Result<String> {
        let body = match ip {
            Some(ip) => json!({"ip": ip}),
            None => json!({}),
        };
        let v = self
            .control(Method::PUT, &format!("/vms/{vm}/static_nat"), Some(body))
            .await?;
        Self::id_of(&v, "ipaddress")
    }

    pub async fn clear_static_nat(&self, vm: &str) -> Result<()> {
        self.control(Method::DELETE, &format!("/vms/{vm}/static_nat"), None)
            .await?;
        Ok(())
    }

    /// A job that ends as told: `{"account"?, "command"?, "duration_ms"?, "never"?, "fail"?
    /// {"errorcode", "errortext"?}, "result"?}`.
    pub async fn create_job(&self, spec: Value) -> Result<String> {
        let v = self.control(Method::POST, "/jobs", Some(spec)).await?;
        Self::id_of(&v, "jobid")
    }

    /// `GET /_sim/cloudstack/load_balancer_rules/{id}/listeners`: where load-balancer rule `id`
    /// takes traffic, with its counts; `None` while it has no listener (data plane off, or not
    /// reconciled yet: poll).
    pub async fn rule_listener(&self, id: &str) -> Result<Option<RuleListenerInfo>> {
        let v = self
            .control(
                Method::GET,
                &format!("/load_balancer_rules/{id}/listeners"),
                None,
            )
            .await?;
        let listeners: Vec<RuleListenerInfo> = serde_json::from_value(v["listeners"].clone())
            .map_err(|e| CsClientError::Unexpected(format!("listeners: {e}: {v}")))?;
        Ok(listeners.into_iter().next())
    }
}
