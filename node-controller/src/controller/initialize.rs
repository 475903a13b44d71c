//! A Node's initialization: its server looked up, its node IP checked against it, and the
//! addresses, labels and the removal of the uninitialized taint written in one patch.

use super::*;

impl NodeReconciler {
    /// Initializes `node` (see [`initialize`]).
    pub(super) async fn initialize(&self, node: &Node) -> Result<Action, Error> {
        initialize(node, self).await
    }
}

async fn initialize(node: &Node, ctx: &NodeReconciler) -> Result<Action, Error> {
    let name = node.name_any();
    info!("initializing node with cloud provider");
    let meta = lookup_for_init(node, ctx).await?;
    if meta.provider_id.is_empty() && provider_id(node).is_none() {
        ctx.events
            .warning(
                node,
                reasons::INITIALIZATION_BLOCKED,
                "InitializeNode",
                "Cannot initialize node: the cloud provider returned no provider ID and the node has none".into(),
            )
            .await;
        return Err(Error::NoProviderId { node: name });
    }

    // The node IP must be one of the cloud's addresses before the taint goes, as upstream (unless
    // accepted outside the cloud): once the node is initialized, a mismatch only makes the address
    // sync skip it.
    let outside = check_node_ip(node, ctx, &meta).await?;

    let patched = remove_taint_and_label(node, ctx, &meta).await?;
    if let Some(created) = node.metadata.creation_timestamp.as_ref() {
        ctx.metrics
            .taint_removal_delay
            .observe(seconds_since(created));
    }

    // Addresses right away, with the metadata already fetched, instead of at the next address sync.
    write_addresses(&patched, ctx, &meta.addresses).await;

    // Once per Node: not through the Recorder, whose cache would keep each of them for 6 minutes.
    ctx.events
        .once(
            node,
            reasons::SYNCED,
            "InitializeNode",
            "Node synced successfully".into(),
        )
        .await;
    say_node_ip_outside_cloud(node, ctx, &outside).await;
    if let Some(created) = node.metadata.creation_timestamp.as_ref() {
        ctx.metrics
            .initial_sync_delay
            .observe(seconds_since(created));
    }
    info!(provider_id = %meta.provider_id, "node initialized");
    Ok(Action::await_change())
}

/// The server's metadata for initializing `node`; a failed lookup, an invalid annotation of the
/// Node's or an address it states that another Node has is a Warning and keeps the taint.
async fn lookup_for_init(node: &Node, ctx: &NodeReconciler) -> Result<InstanceMetadata, Error> {
    let name = node.name_any();
    let meta = match ctx.instances.instance_metadata(&ctx.node_ref(node)).await {
        Ok(m) => m,
        Err(CloudError::InvalidNodeInput { reason, message }) => {
            let note = format!("Node stays uninitialized: {message}");
            warn_bad_input(node, ctx, reason, note).await;
            let source = CloudError::InvalidNodeInput { reason, message };
            return Err(Error::Cloud { node: name, source });
        }
        Err(source) => {
            warn_lookup_failed(node, ctx, &source).await;
            return Err(Error::Cloud { node: name, source });
        }
    };
    publish_provider_warnings(node, ctx, &meta).await;
    if let Some((address, other)) =
        addresses::held_by_another(&ctx.store, node, &meta.stated_by_node)
    {
        let note = format!(
            "Node stays uninitialized: its annotations state the address {address}, which is \
             Node {other}'s; two Nodes cannot have one address"
        );
        warn_bad_input(node, ctx, reasons::NODE_ADDRESS_CONFLICT, note).await;
        return Err(Error::AddressConflict {
            node: name,
            address,
            other,
        });
    }
    Ok(meta)
}

/// Checks kubelet's node IP against the server's addresses (upstream's rule); returns the ones
/// the server does not have that the flag or the Node's label accept. A refused one, one another
/// Node has, is a Warning and keeps the taint; the label where it changes nothing is a Warning.
async fn check_node_ip(
    node: &Node,
    ctx: &NodeReconciler,
    meta: &InstanceMetadata,
) -> Result<Vec<String>, Error> {
    let name = node.name_any();
    let mut outside = Vec::new();
    if let Some(v) = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_PROVIDED_NODE_IP))
    {
        let accept = ctx.accepts_node_ip_outside_cloud(node);
        let checked =
            nodeip::parse(v).and_then(|ips| nodeip::filter_with(&ips, &meta.addresses, accept));
        match checked {
            Ok(filtered) => outside = filtered.outside_cloud,
            Err(source) => {
                let reason = match source {
                    nodeip::NodeIpError::Invalid { .. } => reasons::INVALID_NODE_IP,
                    nodeip::NodeIpError::NotFound { .. } => reasons::NODE_IP_NOT_FOUND,
                };
                let mut note = format!("Node stays uninitialized: {source}");
                if matches!(source, nodeip::NodeIpError::NotFound { .. }) {
                    note.push_str(OUTSIDE_CLOUD_HINT);
                }
                warn_bad_input(node, ctx, reason, note).await;
                return Err(Error::NodeIp { node: name, source });
            }
        }
    }
    let outside: Vec<String> = outside.iter().map(ToString::to_string).collect();
    if let Some((address, other)) = addresses::held_by_another(&ctx.store, node, &outside) {
        let note = format!(
            "Node stays uninitialized: kubelet's node IP {address}, which its server does not \
             have, is Node {other}'s; two Nodes cannot have one address"
        );
        warn_bad_input(node, ctx, reasons::NODE_ADDRESS_CONFLICT, note).await;
        return Err(Error::AddressConflict {
            node: name,
            address,
            other,
        });
    }
    if outside.is_empty() && labelled_outside_cloud(node) && !ctx.accept_node_ip_outside_cloud {
        let note = format!(
            "label {LABEL_NODE_IP_OUTSIDE_CLOUD}=accept changes nothing: kubelet's node IP is \
             one of its server's addresses (or kubelet gave none); remove the label"
        );
        warn_bad_input(node, ctx, reasons::NODE_IP_OUTSIDE_CLOUD_UNNEEDED, note).await;
    }
    Ok(outside)
}

/// Tells, once, that kubelet's node IP stands although the server does not have it.
async fn say_node_ip_outside_cloud(node: &Node, ctx: &NodeReconciler, outside: &[String]) {
    if outside.is_empty() {
        return;
    }
    let accepted_by = if ctx.accept_node_ip_outside_cloud {
        "--accept-node-ip-outside-cloud".to_owned()
    } else {
        format!("label {LABEL_NODE_IP_OUTSIDE_CLOUD}=accept")
    };
    let note = format!(
        "kubelet's node IP {} is not one of its server's addresses; kept as the Node's first \
         InternalIP ({accepted_by}), the server's addresses follow",
        outside.join(",")
    );
    info!(node_ip = %outside.join(","), "node IP outside the cloud accepted");
    ctx.events
        .once(node, reasons::NODE_IP_OUTSIDE_CLOUD, "InitializeNode", note)
        .await;
}

fn seconds_since(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> f64 {
    let now = k8s_openapi::jiff::Timestamp::now();
    let d = now.duration_since(t.0);
    d.as_secs_f64().max(0.0)
}

async fn warn_lookup_failed(node: &Node, ctx: &NodeReconciler, e: &CloudError) {
    let (reason, note) = match (e, e.class()) {
        (CloudError::InvalidInput { .. }, _) => (
            reasons::UNKNOWN_PROVIDER_ID,
            format!("Node stays uninitialized: its providerID is not valid: {e}"),
        ),
        (CloudError::Unsupported { .. }, _) => (
            reasons::UNKNOWN_PROVIDER_ID,
            format!("Node stays uninitialized: {e}"),
        ),
        (_, ErrorClass::NotFound) => (
            reasons::SERVER_NOT_FOUND,
            format!("Node stays uninitialized: no cloud server matches it: {e}"),
        ),
        _ => (
            reasons::INSTANCE_LOOKUP_FAILED,
            format!("Node stays uninitialized: the cloud lookup failed (will retry): {e}"),
        ),
    };
    if matches!(
        e,
        CloudError::InvalidInput { .. } | CloudError::Unsupported { .. }
    ) {
        warn_bad_input(node, ctx, reason, note).await;
    } else {
        ctx.events
            .warning(node, reason, "InitializeNode", note)
            .await;
    }
}

/// One optimistic-locked merge patch: labels, providerID (only when empty), taints without the
/// uninitialized one. Returns the patched node.
async fn remove_taint_and_label(
    node: &Node,
    ctx: &NodeReconciler,
    meta: &InstanceMetadata,
) -> Result<Node, Error> {
    let name = node.name_any();
    let existing: BTreeMap<String, String> = node.labels().clone();
    let l = labels::init_labels(meta, &existing);
    for k in &l.dropped {
        warn!(label = %k, "discarding additional cloud label in a Kubernetes-reserved domain");
    }
    for (k, node_v, cloud_v) in &l.conflicts {
        warn!(label = %k, node_value = %node_v, cloud_value = %cloud_v, "node already has the label with another value; keeping the node's");
    }
    let remaining: Vec<&Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|t| t.iter().filter(|t| t.key != TAINT_UNINITIALIZED).collect())
        .unwrap_or_default();

    let mut spec = serde_json::Map::new();
    spec.insert(
        "taints".into(),
        if remaining.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::to_value(&remaining).unwrap_or(serde_json::Value::Null)
        },
    );
    if provider_id(node).is_none() && !meta.provider_id.is_empty() {
        spec.insert("providerID".into(), meta.provider_id.clone().into());
    }
    let mut metadata = serde_json::Map::new();
    if let Some(rv) = node.resource_version() {
        metadata.insert("resourceVersion".into(), rv.into());
    }
    if !l.set.is_empty() {
        metadata.insert(
            "labels".into(),
            serde_json::to_value(&l.set).unwrap_or_default(),
        );
    }
    let patch = serde_json::json!({ "metadata": metadata, "spec": spec });
    ctx.nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::Kube {
            node: name,
            what: "patch node (labels, providerID, taints)",
            source,
        })
}
