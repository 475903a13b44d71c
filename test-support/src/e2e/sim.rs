//! Building the cloud side of a test through cloud-sim's world client (over its public API).

/// What a test needs to know about a server.
#[derive(Debug, Clone)]
pub struct TestServer {
    pub id: u64,
    pub ipv4: String,
    pub server_type: String,
    pub location: String,
}

/// Creates a running `cx22` server in `fsn1` named `name`.
pub async fn create_server(sim: &cloud_sim::Sim, name: &str) -> TestServer {
    create_server_in(sim, name, "fsn1").await
}

/// Creates a running server in `location` named `name`: a `cx22` in eu-central, else a `cpx11`
/// (the CX line is sold in eu-central only).
pub async fn create_server_in(sim: &cloud_sim::Sim, name: &str, location: &str) -> TestServer {
    let client = sim.client();
    let server_type = if ["fsn1", "nbg1", "hel1"].contains(&location) {
        "cx22"
    } else {
        "cpx11"
    };
    let id = client
        .create_server(name, server_type, location)
        .await
        .expect("create server");
    let v = client.get_server(id).await.expect("get server");
    let s = if v.get("server").is_some() {
        &v["server"]
    } else {
        &v
    };
    TestServer {
        id,
        ipv4: s["public_net"]["ipv4"]["ip"]
            .as_str()
            .expect("server has an IPv4")
            .to_string(),
        server_type: s["server_type"]["name"]
            .as_str()
            .unwrap_or("cx22")
            .to_string(),
        location: s["location"]["name"].as_str().unwrap_or("fsn1").to_string(),
    }
}

/// Powers a server on or off.
pub async fn power(sim: &cloud_sim::Sim, id: u64, on: bool) {
    let client = sim.client();
    if on {
        client.poweron(id).await.expect("poweron");
    } else {
        client.poweroff(id).await.expect("poweroff");
    }
}

/// Deletes a server.
pub async fn delete_server(sim: &cloud_sim::Sim, id: u64) {
    sim.client().delete_server(id).await.expect("delete server");
}
