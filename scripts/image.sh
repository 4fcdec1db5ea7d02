#!/usr/bin/env bash
# Build slicectl's container image: a reproducible OCI image archive (an OCI
# image layout in a tar, what `podman load`, `skopeo copy oci-archive:…`,
# `ctr images import` and Docker 25+'s `docker load` read).
#
#   scripts/image.sh [--binary PATH] [--tag TAG] [--out FILE] [--name NAME]
#
# --binary  the slicectl binary to package; default: `cargo build --release
#           --locked --bin slicectl` (into $CARGO_TARGET_DIR or target/).
# --tag     the image tag (default: the crate version). The archive names the
#           image localhost/slicectl:TAG for containerd and TAG for OCI tools.
# --out     the archive (default: $CARGO_TARGET_DIR or target/, image/NAME-TAG.oci.tar).
# --name    the image and binary name (default slicectl). The real-kubelet test
#           packages its sandbox ("pause") image this way, with --binary.
#
# What is in it (one layer, no base image): the binary at
# /usr/local/bin/slicectl (the entrypoint), stripped, with the shared
# libraries it links (`ldd`: glibc's libc/libm, libgcc_s and the loader),
# Debian's CA bundle at /etc/ssl/certs/ca-certificates.crt (Google's APIs are
# reached over TLS; SSL_CERT_FILE points at it), /etc/passwd and /etc/group
# naming uid/gid 65532 (`nonroot`, the user deploy/deployment.yaml runs as,
# also the image's User), and nothing that is written at run time, so a
# read-only root filesystem works.
#
# Reproducible: the same binary, libraries and CA bundle give the same digest.
# Every file is owned 0:0 with a fixed mode and mtime ($SOURCE_DATE_EPOCH, 0
# by default), the tar is sorted by name with no atime/ctime, gzip stores no
# name or time, the config has no `created` and no history dates, and the
# JSON is written in one fixed form. tests/integration/image.rs builds it
# twice and compares.
#
# Needs only coreutils, GNU tar, gzip, binutils (strip) and jq: no container
# engine, no registry, no base image.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
binary="" tag="" out="" name=slicectl
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    -h|--help) sed -n '2,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "image.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
log() { printf '[image] %s\n' "$*" >&2; }
die() { printf '[image] ERROR: %s\n' "$*" >&2; exit 1; }
for tool in tar gzip strip jq sha256sum ldd; do
  command -v "$tool" >/dev/null || die "$tool is missing (Debian: apt-get install tar gzip binutils jq coreutils libc-bin)"
done
cabundle=/etc/ssl/certs/ca-certificates.crt
[ -s "$cabundle" ] || die "no CA bundle at $cabundle (Debian: apt-get install ca-certificates)"

target_dir=${CARGO_TARGET_DIR:-$root/target}
if [ -z "$tag" ]; then
  tag=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n1)
  [ -n "$tag" ] || die "no version in $root/Cargo.toml; pass --tag"
fi
[[ "$name" =~ ^[a-z0-9][a-z0-9_.-]{0,63}$ ]] || die "--name $name is not a valid image name"
[[ "$tag" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || die "--tag $tag is not a valid image tag"
if [ -z "$binary" ]; then
  log "cargo build --release --locked --bin slicectl"
  (cd "$root" && cargo build --release --locked --bin slicectl)
  binary=$target_dir/release/slicectl
fi
[ -x "$binary" ] || die "no executable slicectl at $binary"
out=${out:-$target_dir/image/$name-$tag.oci.tar}
epoch=${SOURCE_DATE_EPOCH:-0}

work=$(mktemp -d "${TMPDIR:-/tmp}/slicectl-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs blobs=$work/layout/blobs/sha256
mkdir -p "$rootfs"/{usr/local/bin,etc/ssl/certs,tmp} "$blobs"

# The binary, without its symbols (smaller; backtraces keep function names
# only from what is left), and every shared library it loads, at the path
# the dynamic loader looks for it (none for a static binary).
strip --strip-all -o "$rootfs/usr/local/bin/$name" "$binary"
libs=$(ldd "$binary" 2>/dev/null | awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}' || true)
for lib in $libs; do
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done
cp -L "$cabundle" "$rootfs$cabundle"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
find "$rootfs" -type d -exec chmod 0755 {} +
find "$rootfs" -type f -exec chmod 0644 {} +
chmod 0755 "$rootfs/usr/local/bin/$name"
# The dynamic loader is exec'd by the kernel (it needs the x bit), the
# libraries keep Debian's mode.
for lib in $libs; do chmod 0755 "$rootfs$lib"; done
chmod 1777 "$rootfs/tmp" # an emptyDir may be mounted here; the image writes nothing
find "$rootfs" -exec touch -h -d "@$epoch" {} +

# The layer: a sorted tar with fixed owners and times (the reproducible-builds.org recipe).
tar --sort=name --format=posix --numeric-owner --owner=0 --group=0 --mtime="@$epoch" \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$rootfs" -cf "$work/layer.tar" .
diff_id=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
gzip -n -9 <"$work/layer.tar" >"$work/layer.tar.gz"

blob() { # blob FILE — move FILE into the blobs; print "DIGEST SIZE"
  local d s
  d=$(sha256sum "$1" | cut -d' ' -f1)
  s=$(stat -c %s "$1")
  mv "$1" "$blobs/$d"
  echo "$d $s"
}
read -r layer_digest layer_size < <(blob "$work/layer.tar.gz")
version=$tag
[ "$name" != slicectl ] || version=$("$rootfs/usr/local/bin/slicectl" --version | head -n1)

jq -cnS --arg diff "sha256:$diff_id" --arg version "$version" --arg name "$name" '{
  architecture: "amd64", os: "linux",
  config: {
    User: "65532:65532",
    Entrypoint: ["/usr/local/bin/" + $name],
    Env: ["PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"],
    WorkingDir: "/",
    Labels: {"org.opencontainers.image.title": $name, "org.opencontainers.image.version": $version}
  },
  rootfs: {type: "layers", diff_ids: [$diff]}
}' >"$work/config.json"
read -r config_digest config_size < <(blob "$work/config.json")

jq -cnS --arg c "sha256:$config_digest" --argjson cs "$config_size" \
  --arg l "sha256:$layer_digest" --argjson ls "$layer_size" '{
  schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
  config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $c, size: $cs},
  layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $l, size: $ls}]
}' >"$work/manifest.json"
read -r manifest_digest manifest_size < <(blob "$work/manifest.json")

jq -cnS --arg m "sha256:$manifest_digest" --argjson ms "$manifest_size" --arg tag "$tag" --arg name "$name" '{
  schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
  manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $m, size: $ms,
    platform: {architecture: "amd64", os: "linux"},
    annotations: {"org.opencontainers.image.ref.name": $tag,
                  "io.containerd.image.name": ("localhost/" + $name + ":" + $tag)}}]
}' >"$work/layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$work/layout/oci-layout"
find "$work/layout" -exec touch -h -d "@$epoch" {} +
find "$work/layout" -type d -exec chmod 0755 {} +
find "$work/layout" -type f -exec chmod 0644 {} +

mkdir -p "$(dirname "$out")"
tar --sort=name --format=posix --numeric-owner --owner=0 --group=0 --mtime="@$epoch" \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$work/layout" -cf "$out.tmp" oci-layout index.json blobs
mv -f "$out.tmp" "$out"

log "image localhost/$name:$tag ($version)"
log "digest sha256:$manifest_digest"
log "compressed layer $((layer_size / 1024)) KiB; archive $(($(stat -c %s "$out") / 1024)) KiB: $out"
# stdout: the manifest digest and the archive, for scripts.
printf 'sha256:%s %s\n' "$manifest_digest" "$out"
