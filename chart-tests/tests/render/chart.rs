//! helm lint and helm template over the defaults and every `ci/` values file, what the default
//! install is made of, and the chart's versions.

use std::collections::{BTreeMap, BTreeSet};

use chart_tests::{Render, chart, ci_values, component, describe, helm, kind, name, run, tool};
use serde_json::Value;

fn rel(p: &std::path::Path) -> String {
    p.strip_prefix(chart_tests::repo())
        .unwrap_or(p)
        .display()
        .to_string()
}

#[test]
fn helm_lint_passes_for_the_defaults_and_every_ci_values_file() {
    let mut files = vec![None];
    files.extend(ci_values().into_iter().map(Some));
    for file in files {
        let mut cmd = tool(helm());
        cmd.args(["lint", "--strict", "--namespace", "kube-system"])
            .arg(chart());
        if let Some(f) = &file {
            cmd.arg("--values").arg(f);
        }
        let out = run(cmd);
        let text = String::from_utf8_lossy(&out.stdout);
        let what = file.as_deref().map(rel).unwrap_or("defaults".into());
        assert!(
            out.status.success(),
            "helm lint {what}:\n{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !text.contains("[ERROR]") && !text.contains("[WARNING]"),
            "{what}:\n{text}"
        );
        eprintln!(
            "helm lint --strict ({what}): {}",
            text.lines().last().unwrap_or("")
        );
    }
}

#[test]
fn helm_template_renders_the_defaults_and_every_ci_values_file() {
    let mut files = vec![None];
    files.extend(ci_values().into_iter().map(Some));
    for file in files {
        let render = match &file {
            Some(f) => Render::default().values(f),
            None => Render::default(),
        };
        let objects = render.objects();
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for o in &objects {
            *kinds.entry(kind(o)).or_default() += 1;
        }
        let what = file.as_deref().map(rel).unwrap_or("defaults".into());
        eprintln!(
            "helm template ({what}): {} objects {kinds:?}",
            objects.len()
        );
        assert!(!objects.is_empty());
        // Every object carries the release's labels and a name.
        for o in &objects {
            assert!(!name(o).is_empty(), "{o}");
            assert_eq!(
                o["metadata"]["labels"]["app.kubernetes.io/instance"],
                "cloud-controllers",
                "{}",
                describe(o)
            );
        }
    }
}

#[test]
fn the_default_install_has_three_controllers_each_with_its_own_objects() {
    let objects = Render::default().objects();
    let mut per_component: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for o in &objects {
        per_component
            .entry(component(o).unwrap_or("-").to_owned())
            .or_default()
            .insert(format!("{} {}", kind(o), name(o)));
    }
    for (c, objs) in &per_component {
        eprintln!("{c}:");
        for o in objs {
            eprintln!("  {o}");
        }
    }
    let expected = |c: &str| -> BTreeSet<String> {
        [
            format!("ClusterRole cloud-controllers:{c}"),
            format!("ClusterRoleBinding cloud-controllers:{c}"),
            format!("Deployment cloud-controllers-{c}"),
            format!("Lease cloud-controller-manager-{c}"),
            format!("PodDisruptionBudget cloud-controllers-{c}"),
            format!("Role cloud-controllers:{c}:leader-election"),
            format!("RoleBinding cloud-controllers:{c}:leader-election"),
            format!("ServiceAccount cloud-controllers-{c}"),
        ]
        .into()
    };
    let mut want: BTreeMap<String, BTreeSet<String>> = [
        "node-controller",
        "lifecycle-controller",
        "service-controller",
    ]
    .iter()
    .map(|c| (c.to_string(), expected(c)))
    .collect();
    // The service-controller's admission policies for its annotations (admission_policy.rs)
    // and for source ranges (source_ranges_policy.rs).
    for kind in [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ] {
        for policy in ["annotations", "source-ranges"] {
            want.get_mut("service-controller").unwrap().insert(format!(
                "{kind} cloud-controllers-service-controller-{policy}"
            ));
        }
    }
    assert_eq!(per_component, want);
}

#[test]
fn chart_version_and_app_version_are_the_workspace_version() {
    let chart_yaml: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(chart().join("Chart.yaml")).unwrap())
            .unwrap();
    let cargo = std::fs::read_to_string(chart_tests::repo().join("Cargo.toml")).unwrap();
    let workspace_version = cargo
        .split("[workspace.package]")
        .nth(1)
        .and_then(|s| s.lines().find(|l| l.starts_with("version = ")))
        .and_then(|l| l.split('"').nth(1))
        .expect("workspace version");
    assert_eq!(chart_yaml["apiVersion"], "v2");
    assert_eq!(chart_yaml["version"], workspace_version);
    assert_eq!(chart_yaml["appVersion"], workspace_version);
}
