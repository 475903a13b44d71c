# syntax=docker/dockerfile:1.7
#
# One Dockerfile for the four controller images and cloud-sim, for linux/amd64 and linux/arm64. The
# workspace is built once per platform (stage `build`); each final stage copies one binary onto
# distroless/static (CA certificates, nonroot, no libc: the binaries are linked statically against
# glibc). Pick the image with --target:
#
#   docker buildx build --target node-controller -t node-controller:dev .
#   docker buildx build --target cloud-sim --build-arg CARGO_PROFILE=release \
#     --build-arg VERSION=0.1.0 --build-arg REVISION="$(git rev-parse HEAD)" -t cloud-sim:0.1.0 .
#
# CARGO_PROFILE: dev-image (default; release without LTO, quick to rebuild) or release (fat LTO,
# one codegen unit, stripped: the published images). Dependencies are cached by BuildKit cache
# mounts (cargo registry, git and target dir), so a source change recompiles only the crates that
# changed; skaffold's targets share the one build stage.
#
# arm64 is cross-compiled on the build machine, never emulated: the `build` stage runs on the
# build platform and compiles for TARGETARCH. Built on amd64 for arm64, its image is BUILDER=the
# `cross-arm64` stage below (Debian's rustc with the arm64 standard library and gcc-aarch64-linux-gnu):
#
#   docker buildx build --platform linux/arm64 --build-arg BUILDER=cross-arm64 --target node-controller .
#
# `cargo xtask release` does that for both platforms with podman (which takes BUILDER as an image:
# it builds --target cross-arm64 first and passes its tag).

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm
# The image the workspace is built in: the official Rust image (native builds), or the cross
# builder for arm64 on amd64.
ARG BUILDER=rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE}

# The arm64 cross builder, from Debian unstable's packages only: its rustc (>= 1.89, the workspace's
# rust-version) comes with the arm64 standard library as a package (libstd-rust-dev:arm64), and
# gcc-aarch64-linux-gnu links the binaries and compiles aws-lc's C for arm64 (static glibc from
# libc6-dev-arm64-cross). Unused (never built) for native builds.
FROM --platform=$BUILDPLATFORM debian:sid-slim AS cross-arm64
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Unstable moves daily, so versions are not pinned: the layer is rebuilt only when this line changes.
# hadolint ignore=DL3008
RUN dpkg --add-architecture arm64 \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates rustc cargo libstd-rust-dev:arm64 gcc gcc-aarch64-linux-gnu libc6-dev libc6-dev-arm64-cross \
 && rm -rf /var/lib/apt/lists/*
ENV CARGO_HOME=/usr/local/cargo \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
    AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar

FROM --platform=$BUILDPLATFORM ${BUILDER} AS build
ARG CARGO_PROFILE=dev-image
# linux/amd64 or linux/arm64 (set by the builder from --platform; the build machine's without it).
ARG TARGETARCH
# A failing command in a pipe fails the step.
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src
# The whole workspace: cargo loads every member's manifest. .dockerignore keeps tests, docs,
# charts and target/ out.
COPY Cargo.toml Cargo.lock ./
COPY .cargo/ .cargo/
COPY cloud-client/ cloud-client/
COPY cloud-sim/ cloud-sim/
COPY controller-kit/ controller-kit/
COPY node-controller/ node-controller/
COPY lifecycle-controller/ lifecycle-controller/
COPY service-controller/ service-controller/
COPY route-controller/ route-controller/
COPY testenv/ testenv/
COPY test-support/ test-support/
COPY xtask/ xtask/
COPY chart-tests/ chart-tests/
# One cargo invocation for all five binaries; they are copied out of the cache-mounted target dir in
# the same step (the mount is not part of the image). A target dir per profile and platform, and
# cargo's registry per platform: a `locked` cache is held for the whole step, so with shared ones an
# amd64 build waited for a whole arm64 compile (another compiler, another target) to end. `crt-static` links glibc into the binaries, so
# the runtime base needs no libc (distroless/static: ~2 MB instead of distroless/cc's ~23 MB). It
# needs an explicit --target, or it would apply to proc-macros and build scripts too. glibc ≥ 2.34
# has the `files` and `dns` name services built in, so name lookups need no shared NSS modules.
RUN --mount=type=cache,id=cloud-controllers-cargo-registry-${TARGETARCH},target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,id=cloud-controllers-cargo-git-${TARGETARCH},target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,id=cloud-controllers-target-${CARGO_PROFILE}-${TARGETARCH},target=/src/target,sharing=locked \
    case "${TARGETARCH:-}" in \
      amd64) target=x86_64-unknown-linux-gnu ;; \
      arm64) target=aarch64-unknown-linux-gnu ;; \
      "") target="$(rustc -vV | sed -n 's/^host: //p')" ;; \
      *) echo "unsupported TARGETARCH ${TARGETARCH}: linux/amd64 and linux/arm64 are built" >&2; exit 1 ;; \
    esac \
 && RUSTFLAGS="-C target-feature=+crt-static" cargo build --locked --profile "${CARGO_PROFILE}" --target "${target}" \
      -p node-controller -p lifecycle-controller -p service-controller -p route-controller -p cloud-sim --bins \
 && dir="${CARGO_PROFILE}" && if [ "${dir}" = dev ]; then dir=debug; fi \
 && mkdir -p /out \
 && for bin in node-controller lifecycle-controller service-controller route-controller cloud-sim; do \
      cp -p "target/${target}/${dir}/${bin}" /out/; \
    done

# Shared by the final stages: CA certificates, tzdata, user 65532, no shell, no libc.
FROM gcr.io/distroless/static-debian12:nonroot AS runtime
# The platform is in an instruction so that it is in the layer cache's key: buildah (podman 4.3)
# reuses a cached layer when its parent layer and instruction match, whatever the platform, and the
# base's amd64 and arm64 images share their one layer (the same files). Without this line, an
# arm64 build reused an amd64 build's runtime stage, or the reverse, and its image claimed the
# other platform in its config.
ARG TARGETARCH
LABEL io.cloud-controllers.platform="linux/${TARGETARCH}"
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=https://github.com/cloud-controllers/cloud-controllers
LABEL org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="cloud-controllers"
USER 65532:65532

FROM runtime AS node-controller
LABEL org.opencontainers.image.title="node-controller" \
      org.opencontainers.image.description="Initializes Nodes from Hetzner Cloud (upstream cloud-node-controller)"
COPY --from=build /out/node-controller /usr/local/bin/node-controller
EXPOSE 10271
ENTRYPOINT ["/usr/local/bin/node-controller"]

FROM runtime AS lifecycle-controller
LABEL org.opencontainers.image.title="lifecycle-controller" \
      org.opencontainers.image.description="Deletes Nodes whose server is gone (upstream cloud-node-lifecycle-controller)"
COPY --from=build /out/lifecycle-controller /usr/local/bin/lifecycle-controller
EXPOSE 10272
ENTRYPOINT ["/usr/local/bin/lifecycle-controller"]

FROM runtime AS service-controller
LABEL org.opencontainers.image.title="service-controller" \
      org.opencontainers.image.description="LoadBalancer Services on Hetzner Cloud load balancers (upstream service-lb-controller)"
COPY --from=build /out/service-controller /usr/local/bin/service-controller
EXPOSE 10273
ENTRYPOINT ["/usr/local/bin/service-controller"]

FROM runtime AS route-controller
LABEL org.opencontainers.image.title="route-controller" \
      org.opencontainers.image.description="Pod-CIDR routes in a Hetzner Cloud network (upstream node-route-controller)"
COPY --from=build /out/route-controller /usr/local/bin/route-controller
EXPOSE 10274
ENTRYPOINT ["/usr/local/bin/route-controller"]

FROM runtime AS cloud-sim
LABEL org.opencontainers.image.title="cloud-sim" \
      org.opencontainers.image.description="Simulator of the Hetzner Cloud API subset the controllers use (development only)"
COPY --from=build /out/cloud-sim /usr/local/bin/cloud-sim
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/cloud-sim"]
CMD ["--listen", "0.0.0.0:8080"]
