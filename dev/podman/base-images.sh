#!/usr/bin/env bash
# Local stand-ins for the public base images the Dockerfile names, for machines that reach
# Debian's packages but no container registry. Each is built from Debian's packages (the release
# the public image is built from) and tagged with the public name, so the Dockerfile builds
# unchanged with `podman build --pull=never`:
#
#   docker.io/library/rust:<RUST_VERSION>-slim-bookworm   Debian + gcc + this machine's Rust toolchain
#   gcr.io/distroless/static-debian12:nonroot            CA certificates, tzdata, /etc/passwd with
#                                                         nonroot (65532), no shell, no libc; like the
#                                                         public one, a manifest list of linux/amd64
#                                                         and linux/arm64 (the same files: no programs)
#                                                         with the per-platform tags nonroot-<arch>
#   docker.io/library/debian:sid-slim                     Debian unstable with apt (the arm64 cross
#                                                         builder's base; only for platform builds)
#
# Usage: base-images.sh RUST_VERSION   (podman is run as `$PODMAN`, default `podman`; WITH_SID=1
# adds debian:sid-slim).
# An image that exists already is kept; `podman rmi` it to rebuild.
set -euo pipefail
rust_version=${1:?usage: base-images.sh RUST_VERSION}
podman=(${PODMAN:-podman})
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

exists() { "${podman[@]}" image exists "$1"; }

rust_image="docker.io/library/rust:${rust_version}-slim-bookworm"
if exists "$rust_image"; then
  echo "$rust_image: present"
else
  started=$SECONDS
  toolchain=$(rustc +"$rust_version" --print sysroot 2>/dev/null || rustc --print sysroot)
  have=$("$toolchain/bin/rustc" --version)
  case "$have" in
    "rustc $rust_version"*) ;;
    *) echo "the Dockerfile asks for Rust $rust_version, this machine has $have" >&2; exit 1 ;;
  esac
  mmdebstrap --quiet --variant=apt --include=gcc,libc6-dev,ca-certificates --format=directory \
    bookworm "$work/rust"
  # As the official image: toolchain under /usr/local/cargo (CARGO_HOME), its bin on PATH. Only
  # rustc, cargo and the host's standard library: no docs, no other targets.
  mkdir -p "$work/rust/usr/local/cargo"
  cp -a "$toolchain/bin" "$toolchain/lib" "$work/rust/usr/local/cargo/"
  # The build reaches crates.io the way this machine does, through any CA it added locally (an
  # egress proxy's, say).
  if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$work/rust/usr/local/share/ca-certificates/"
    TMPDIR=/tmp chroot "$work/rust" update-ca-certificates >/dev/null
  fi
  tar -C "$work/rust" -c . | "${podman[@]}" import --quiet \
    --change 'ENV CARGO_HOME=/usr/local/cargo' \
    --change 'ENV RUSTUP_HOME=/usr/local/rustup' \
    --change 'ENV PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "ENV RUST_VERSION=$rust_version" \
    --change 'CMD ["bash"]' \
    - "$rust_image" >/dev/null
  echo "$rust_image: built from Debian bookworm and $have in $((SECONDS - started)) s"
fi

static_image="gcr.io/distroless/static-debian12:nonroot"
# A manifest list, so that `podman build --platform linux/arm64` finds an arm64 image under the
# public name. Before platforms were built it was a plain (amd64) image: that image is kept as the
# amd64 entry (the same image ID, so the amd64 build cache stays valid).
if "${podman[@]}" manifest exists "$static_image" 2>/dev/null; then
  echo "$static_image: present"
else
  started=$SECONDS
  root="$work/static"
  mkdir -p "$root" "$work/debs"
  (cd "$work/debs" && apt-get download -q ca-certificates tzdata netbase base-files >/dev/null)
  for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$root"; done
  # What update-ca-certificates would write at install time.
  mkdir -p "$root/etc/ssl/certs"
  cat "$root"/usr/share/ca-certificates/mozilla/*.crt > "$root/etc/ssl/certs/ca-certificates.crt"
  # distroless keeps data, not programs or docs.
  rm -rf "$root"/usr/share/{doc,man,lintian,ca-certificates,base-files,common-licenses,info} \
    "$root"/usr/sbin "$root"/usr/bin "$root"/usr/lib/tmpfiles.d "$root"/var/lib/dpkg
  cat > "$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
PASSWD
  cat > "$root/etc/group" <<'GROUP'
root:x:0:
nobody:x:65534:
nonroot:x:65532:
GROUP
  printf 'hosts: files dns\n' > "$root/etc/nsswitch.conf"
  mkdir -p "$root/home/nonroot" "$root/tmp" "$root/root"
  chmod 1777 "$root/tmp"
  chown 65532:65532 "$root/home/nonroot"
  if exists "$static_image"; then
    "${podman[@]}" tag "$static_image" "${static_image}-amd64"
    "${podman[@]}" untag "$static_image" "$static_image"
  fi
  for arch in amd64 arm64; do
    exists "${static_image}-$arch" && continue
    tar -C "$root" -c . | "${podman[@]}" import --quiet --arch "$arch" \
      --change 'USER 65532' \
      --change 'WORKDIR /home/nonroot' \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
      - "${static_image}-$arch" >/dev/null
  done
  "${podman[@]}" manifest create "$static_image" >/dev/null
  for arch in amd64 arm64; do
    "${podman[@]}" manifest add --arch "$arch" --os linux "$static_image" \
      "containers-storage:${static_image}-$arch" >/dev/null
  done
  echo "$static_image: built from Debian bookworm packages for amd64 and arm64 in $((SECONDS - started)) s"
fi

# Only the platform builds (`cargo xtask release`) use it: the stand-ins above are all `images` needs.
if [ "${WITH_SID:-}" = 1 ]; then
  sid_image="docker.io/library/debian:sid-slim"
  if exists "$sid_image"; then
    echo "$sid_image: present"
  else
    started=$SECONDS
    # Our Debian mirror may serve a snapshot of unstable whose Release file is past its Valid-Until
    # (a week): apt in the image accepts it, as it does here.
    mmdebstrap --quiet --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' \
      --format=directory unstable "$work/sid"
    if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
      mkdir -p "$work/sid/usr/local/share/ca-certificates"
      cp /usr/local/share/ca-certificates/*.crt "$work/sid/usr/local/share/ca-certificates/"
    fi
    rm -rf "$work/sid/var/lib/apt/lists/"* "$work/sid/var/cache/apt/"*.bin
    tar -C "$work/sid" -c . | "${podman[@]}" import --quiet \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["bash"]' \
      - "$sid_image" >/dev/null
    echo "$sid_image: built from Debian unstable in $((SECONDS - started)) s"
  fi
fi
