use super::*;
use std::collections::HashMap;

const TOKEN: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ab";

fn cfg(pairs: &[(&str, &str)]) -> Result<HcloudConfig, CloudError> {
    let m: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    HcloudConfig::from_lookup(|k| m.get(k).cloned())
}

#[test]
fn defaults_match_hccm() {
    let c = cfg(&[("HCLOUD_TOKEN", TOKEN)]).unwrap();
    assert_eq!(c.client.endpoint, DEFAULT_ENDPOINT);
    assert_eq!(c.client.request_timeout, Duration::from_secs(15));
    assert_eq!(c.server_cache.max_age, Duration::from_secs(10));
    assert_eq!(c.instances.address_family, AddressFamily::Ipv4);
    assert!(c.instances.zone_label_enabled && c.load_balancers.enabled && c.routes.enabled);
    assert!(c.client.user_agent.starts_with("cloud-controllers/"));
}

#[test]
fn reports_all_problems_at_once() {
    let err = cfg(&[
        ("HCLOUD_INSTANCES_ADDRESS_FAMILY", "ipv5"),
        ("HCLOUD_SERVER_CACHE_MAX_AGE", "soon"),
        ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
        ("HCLOUD_LOAD_BALANCERS_NETWORK_ZONE", "eu-central"),
        ("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", "yes"),
        ("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "random"),
    ])
    .unwrap_err();
    let CloudError::InvalidConfig { problems } = &err else {
        panic!("{err}")
    };
    assert_eq!(problems.len(), 6, "one line per problem: {problems:#?}");
    for needle in [
        "HCLOUD_TOKEN",
        "ipv5",
        "soon",
        "mutually exclusive",
        "yes",
        "random",
    ] {
        assert!(
            err.to_string().contains(needle),
            "{needle} missing in {err}"
        );
    }
}

#[test]
fn token_file_is_trimmed_and_never_printed() {
    let dir = std::env::temp_dir().join(format!("cc-token-{}", std::process::id()));
    std::fs::write(&dir, format!("  {TOKEN}\n")).unwrap();
    let c = cfg(&[
        ("HCLOUD_TOKEN_FILE", dir.to_str().unwrap()),
        ("HCLOUD_ENDPOINT", "http://x/v1/"),
    ])
    .unwrap();
    std::fs::remove_file(&dir).ok();
    assert_eq!(c.client.token.expose(), TOKEN);
    assert_eq!(c.client.endpoint, "http://x/v1");
    let dbg = format!("{c:?} {} {:?}", c.client.token, c.client.token);
    assert!(!dbg.contains(TOKEN), "{dbg}");
    assert!(dbg.contains("<redacted>"));
}

#[test]
fn parses_lb_defaults_and_family() {
    let c = cfg(&[
        ("HCLOUD_TOKEN", TOKEN),
        ("HCLOUD_NETWORK", "k8s"),
        ("HCLOUD_INSTANCES_ADDRESS_FAMILY", "dualstack"),
        ("HCLOUD_INSTANCES_ZONE_LABEL_ENABLED", "false"),
        ("HCLOUD_SERVER_CACHE_MAX_AGE", "1m"),
        ("HCLOUD_LOAD_BALANCERS_TYPE", "lb21"),
        ("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", "1"),
        ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", "5"),
        ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT", "3s"),
        ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", "2"),
        ("HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL", "T"),
        ("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "Least_Connections"),
    ])
    .unwrap();
    assert_eq!(c.network.name_or_id.as_deref(), Some("k8s"));
    assert_eq!(c.instances.address_family, AddressFamily::DualStack);
    assert!(!c.instances.zone_label_enabled);
    assert_eq!(c.server_cache.max_age, Duration::from_secs(60));
    assert_eq!(c.load_balancers.defaults.lb_type.as_deref(), Some("lb21"));
    assert!(c.load_balancers.defaults.use_private_ip);
    assert_eq!(
        c.load_balancers.defaults.health_check_interval,
        Some(Duration::from_secs(5))
    );
    assert_eq!(
        c.load_balancers.defaults.health_check_timeout,
        Some(Duration::from_secs(3))
    );
    assert_eq!(c.load_balancers.defaults.health_check_retries, Some(2));
    assert_eq!(c.load_balancers.defaults.uses_proxyprotocol, Some(true));
    assert_eq!(
        c.load_balancers.defaults.algorithm.as_deref(),
        Some("least_connections")
    );
}

#[test]
fn an_endpoint_the_kubelet_could_not_expand_stops_startup_and_says_why() {
    let err = cfg(&[
        ("HCLOUD_TOKEN", TOKEN),
        (
            "HCLOUD_ENDPOINT",
            "http://$(CC_SIMULATOR_SERVICE_HOST):$(CC_SIMULATOR_SERVICE_PORT)/v1",
        ),
    ])
    .unwrap_err();
    let CloudError::InvalidConfig { problems } = &err else {
        panic!("{err}")
    };
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].contains("still holds $(CC_SIMULATOR_SERVICE_HOST)"),
        "{problems:#?}"
    );
}

#[test]
fn empty_values_are_unset_as_in_hccm() {
    let c = cfg(&[
        ("HCLOUD_TOKEN", TOKEN),
        ("HCLOUD_ENDPOINT", ""),
        ("HCLOUD_NETWORK", " "),
        ("HCLOUD_INSTANCES_ADDRESS_FAMILY", ""),
        ("HCLOUD_SERVER_CACHE_MODE", ""),
    ])
    .unwrap();
    assert_eq!(c.client.endpoint, DEFAULT_ENDPOINT);
    assert_eq!(c.network.name_or_id, None);
    assert_eq!(c.server_cache.mode, ServerCacheMode::All);
    assert!(c.startup_warnings.is_empty());
}

#[test]
fn hccm_settings_that_used_to_stop_startup() {
    // Private-IP targets without a network: a per-Service matter now (see LbSpec).
    let c = cfg(&[
        ("HCLOUD_TOKEN", TOKEN),
        ("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", "true"),
        ("HCLOUD_SERVER_CACHE_MAX_AGE", "0"),
        ("HCLOUD_SERVER_CACHE_MODE", "off"),
        ("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", "true"),
    ])
    .unwrap();
    assert!(c.load_balancers.defaults.use_private_ip);
    assert_eq!(c.server_cache.max_age, Duration::ZERO);
    assert_eq!(c.server_cache.mode, ServerCacheMode::Off);
    assert_eq!(c.startup_warnings.len(), 1, "{:?}", c.startup_warnings);
    assert!(c.startup_warnings[0].contains("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK"));
    let err = cfg(&[
        ("HCLOUD_TOKEN", TOKEN),
        ("HCLOUD_SERVER_CACHE_MODE", "some"),
    ])
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("HCLOUD_SERVER_CACHE_MODE=\"some\": must be all, one or off"),
        "{err}"
    );
}

#[test]
fn the_variable_wins_over_the_file_with_a_warning() {
    let c = HcloudConfig::from_settings(Some(Token::new(TOKEN)), |k| {
        (k == "HCLOUD_TOKEN_FILE").then(|| "/nonexistent/token".to_string())
    })
    .unwrap();
    assert_eq!(c.client.token.expose(), TOKEN);
    assert_eq!(c.startup_warnings.len(), 1);
    assert!(
        c.startup_warnings[0].contains("using HCLOUD_TOKEN")
            && !c.startup_warnings[0].contains(TOKEN),
        "{:?}",
        c.startup_warnings
    );
}

#[test]
fn address_family_parsing() {
    assert_eq!(AddressFamily::parse("ipv4"), Some(AddressFamily::Ipv4));
    assert_eq!(AddressFamily::parse("ipv6"), Some(AddressFamily::Ipv6));
    assert_eq!(
        AddressFamily::parse("dualstack"),
        Some(AddressFamily::DualStack)
    );
    assert_eq!(AddressFamily::parse("IPv4"), None);
    assert!(AddressFamily::DualStack.has_v4() && AddressFamily::DualStack.has_v6());
    assert!(!AddressFamily::Ipv6.has_v4());
}

#[test]
fn every_credential_is_read_one_way_the_variable_winning_over_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "from-the-file\n").unwrap();
    let password = password.to_str().unwrap();
    let c = cfg(&[
        ("HCLOUD_TOKEN", TOKEN),
        ("ROBOT_ENABLED", "true"),
        ("ROBOT_USER", "robot-user"),
        ("ROBOT_PASSWORD", "from-the-variable"),
        ("ROBOT_PASSWORD_FILE", password),
    ])
    .unwrap();
    let credentials = c.robot.credentials.unwrap();
    assert_eq!(credentials.password.expose(), "from-the-variable");
    assert_eq!(c.startup_warnings.len(), 1, "{:?}", c.startup_warnings);
    assert!(
        c.startup_warnings[0].contains("ROBOT_PASSWORD and ROBOT_PASSWORD_FILE=")
            && !c.startup_warnings[0].contains("from-the"),
        "{:?}",
        c.startup_warnings
    );
    // The same words for an unreadable file, whichever credential it holds.
    let err = cfg(&[
        ("HCLOUD_TOKEN_FILE", "/nonexistent/token"),
        ("ROBOT_ENABLED", "true"),
        ("ROBOT_USER", "robot-user"),
        ("ROBOT_PASSWORD_FILE", "/nonexistent/password"),
    ])
    .unwrap_err()
    .to_string();
    for setting in ["HCLOUD_TOKEN_FILE", "ROBOT_PASSWORD_FILE"] {
        assert!(
            err.contains(&format!("{setting}=/nonexistent/")) && err.contains("cannot read"),
            "{err}"
        );
    }
}
