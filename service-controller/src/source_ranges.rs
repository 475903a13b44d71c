//! `spec.loadBalancerSourceRanges` (or upstream's older annotation
//! `service.beta.kubernetes.io/load-balancer-source-ranges`) on a provider whose load balancers
//! cannot enforce it. Upstream's controllers pass the ranges on and say nothing; users who limit an
//! admin endpoint to their office then believe they did. Here such a Service gets a Warning
//! ([`IGNORED`]), a `LoadBalancerReady` message that says so, and, with
//! `--refuse-unenforced-source-ranges`, is refused before any write instead of being served to
//! every address.
//!
//! Ranges that let every address in (`0.0.0.0/0`, `::/0`) restrict nothing and are no cause.

use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;

use cloud_client::CloudError;

/// Upstream's annotation, read when the spec field is empty (as upstream does).
pub const ANNOTATION: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";

/// Event reason and metric label of a Service whose ranges are not enforced.
pub const IGNORED: &str = "LoadBalancerSourceRangesIgnored";

/// The spec field's name in messages.
const FIELD: &str = "spec.loadBalancerSourceRanges";

/// Source ranges a Service restricts its load balancer to, and where it set them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranges {
    /// [`FIELD`] or the [`ANNOTATION`], for messages.
    pub set_by: &'static str,
    pub ranges: Vec<String>,
}

/// The ranges a Service asks for, as given: the spec field's, else the annotation's (what a
/// provider that enforces them gets in `ServiceRef::source_ranges`).
pub fn given(svc: &Service) -> Vec<String> {
    from(svc).1
}

/// The ranges a Service asks for that restrict who may connect: the spec field's, else the
/// annotation's; `None` when there are none, or when one of them lets everyone in.
pub fn restricting(svc: &Service) -> Option<Ranges> {
    let (set_by, ranges) = from(svc);
    (!ranges.is_empty() && !ranges.iter().any(|r| is_everyone(r)))
        .then_some(Ranges { set_by, ranges })
}

/// Where the ranges are set, and the ranges (empty entries left out).
fn from(svc: &Service) -> (&'static str, Vec<String>) {
    let from_spec: Vec<String> = svc
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_source_ranges.clone())
        .unwrap_or_default();
    let (set_by, ranges) = if from_spec.is_empty() {
        let from_annotation = svc
            .annotations()
            .get(ANNOTATION)
            .map(|v| v.split(',').map(|r| r.trim().to_owned()).collect())
            .unwrap_or_default();
        (ANNOTATION, from_annotation)
    } else {
        (FIELD, from_spec)
    };
    let ranges: Vec<String> = ranges.into_iter().filter(|r| !r.is_empty()).collect();
    (set_by, ranges)
}

fn is_everyone(range: &str) -> bool {
    matches!(range, "0.0.0.0/0" | "::/0")
}

/// The Warning's message (and the condition's note): which ranges, and `why` the provider cannot
/// enforce them.
pub fn not_enforced(r: &Ranges, why: &str) -> String {
    format!(
        "{} ({}) is not enforced: {why}. Set --refuse-unenforced-source-ranges \
         (chart value serviceController.sourceRanges: refuse) to refuse such Services instead",
        r.set_by,
        r.ranges.join(", ")
    )
}

/// The refusal under `--refuse-unenforced-source-ranges`: bad input, so nothing is written and
/// the Service waits for a change.
pub fn refusal(r: &Ranges, why: &str) -> CloudError {
    CloudError::InvalidInput {
        field: r.set_by.into(),
        value: r.ranges.join(","),
        expected: format!(
            "no source ranges, since the controller runs with --refuse-unenforced-source-ranges \
             and they would not be enforced: {why}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(spec: Option<&[&str]>, annotation: Option<&str>) -> Service {
        let mut s = Service::default();
        if let Some(a) = annotation {
            s.metadata.annotations = Some([(ANNOTATION.to_string(), a.to_string())].into());
        }
        s.spec = Some(Default::default());
        if let Some(r) = spec {
            s.spec.as_mut().unwrap().load_balancer_source_ranges =
                Some(r.iter().map(|r| r.to_string()).collect());
        }
        s
    }

    fn ranges(set_by: &'static str, r: &[&str]) -> Option<Ranges> {
        Some(Ranges {
            set_by,
            ranges: r.iter().map(|r| r.to_string()).collect(),
        })
    }

    #[test]
    fn the_spec_field_wins_and_open_ranges_restrict_nothing() {
        assert_eq!(restricting(&svc(None, None)), None);
        assert_eq!(
            restricting(&svc(Some(&["203.0.113.0/24"]), Some("10.0.0.0/8"))),
            ranges(FIELD, &["203.0.113.0/24"])
        );
        assert_eq!(
            restricting(&svc(None, Some(" 10.0.0.0/8, 192.0.2.1/32 ,"))),
            ranges(ANNOTATION, &["10.0.0.0/8", "192.0.2.1/32"])
        );
        assert_eq!(
            restricting(&svc(Some(&["10.0.0.0/8", "0.0.0.0/0"]), None)),
            None
        );
        assert_eq!(restricting(&svc(None, Some("::/0"))), None);
    }

    #[test]
    fn messages_name_the_field_the_ranges_and_the_way_out() {
        let r = ranges(FIELD, &["10.0.0.0/8"]).unwrap();
        let m = not_enforced(&r, "cannot filter");
        assert!(m.starts_with(
            "spec.loadBalancerSourceRanges (10.0.0.0/8) is not enforced: cannot filter."
        ));
        let e = refusal(&r, "cannot filter");
        assert_eq!(e.class(), cloud_client::ErrorClass::Permanent);
        assert!(
            e.to_string()
                .contains("invalid value \"10.0.0.0/8\" for spec.loadBalancerSourceRanges"),
            "{e}"
        );
    }
}
