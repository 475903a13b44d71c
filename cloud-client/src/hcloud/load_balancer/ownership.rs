//! How a load balancer says which Service it belongs to: HCCM's ownership label, so a load balancer
//! HCCM made is found, and adopted, by the Service it was made for.

/// Label on a load balancer naming the Service UID it belongs to (HCCM's ownership label).
pub const SERVICE_UID_LABEL: &str = "hcloud-ccm/service-uid";

/// `hcloud-ccm/service-uid=<uid>`, the `label_selector` query that finds a Service's load balancer.
pub fn service_uid_selector(uid: &str) -> String {
    format!("{SERVICE_UID_LABEL}={uid}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_hccm_ownership_selector() {
        assert_eq!(
            service_uid_selector("1234-abcd"),
            "hcloud-ccm/service-uid=1234-abcd"
        );
    }
}
