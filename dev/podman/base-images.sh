#!/usr/bin/env bash
# Local stand-ins for the two public base images the Dockerfile names, for machines that reach
# Debian's packages but no container registry. Each is built from Debian bookworm packages (the
# release both public images are built from) and tagged with the public name, so the Dockerfile
# builds unchanged with `podman build --pull=never`:
#
#   docker.io/library/rust:<RUST_VERSION>-slim-bookworm   Debian + gcc + this machine's Rust toolchain
#   gcr.io/distroless/static-debian12:nonroot            CA certificates, tzdata, /etc/passwd with
#                                                         nonroot (65532), no shell, no libc
#
# Usage: base-images.sh RUST_VERSION   (podman is run as `$PODMAN`, default `podman`).
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
if exists "$static_image"; then
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
  tar -C "$root" -c . | "${podman[@]}" import --quiet \
    --change 'USER 65532' \
    --change 'WORKDIR /home/nonroot' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
    - "$static_image" >/dev/null
  echo "$static_image: built from Debian bookworm packages in $((SECONDS - started)) s"
fi
