#!/usr/bin/env bash
# Pins the Dockerfile's base images to the digests their tags name today:
# rewrites the ARG BUILDER_IMAGE and ARG RUNTIME_IMAGE lines as
# <repository>:<tag>@sha256:<digest>. The builder's tag follows go.mod's go
# line (golang:<version>); the runtime keeps its tag (ubi-minimal:<minor>),
# or takes RUNTIME_TAG. Needs skopeo and access to both registries; review
# the diff and commit it.
#   scripts/refresh-base-images.sh               # both images
#   RUNTIME_TAG=9.8 scripts/refresh-base-images.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dockerfile=${DOCKERFILE:-Dockerfile}
command -v skopeo >/dev/null || { echo "refresh-base-images: skopeo is needed (apt-get install skopeo)" >&2; exit 1; }

go_version=$(sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' go.mod)
[ -n "$go_version" ] || { echo "refresh-base-images: no go line in go.mod" >&2; exit 1; }

# current NAME prints the image reference of ARG NAME, without its digest.
current() { sed -n "s/^ARG $1=\([^@]*\).*/\1/p" "$dockerfile"; }

# digest REF prints REF's digest as the registry names it today.
digest() {
  local d
  d=$(skopeo inspect --format '{{.Digest}}' "docker://$1")
  [[ $d =~ ^sha256:[0-9a-f]{64}$ ]] || { echo "refresh-base-images: $1: no digest ($d)" >&2; return 1; }
  echo "$d"
}

builder=$(current BUILDER_IMAGE)
runtime=$(current RUNTIME_IMAGE)
[ -n "$builder" ] && [ -n "$runtime" ] || { echo "refresh-base-images: $dockerfile lacks ARG BUILDER_IMAGE or RUNTIME_IMAGE" >&2; exit 1; }
builder="${builder%:*}:$go_version"
runtime="${runtime%:*}:${RUNTIME_TAG:-${runtime##*:}}"
# Both digests first: a failed look-up leaves the Dockerfile as it was.
builder_digest=$(digest "$builder")
runtime_digest=$(digest "$runtime")
sed -i -e "s|^ARG BUILDER_IMAGE=.*|ARG BUILDER_IMAGE=$builder@$builder_digest|" \
       -e "s|^ARG RUNTIME_IMAGE=.*|ARG RUNTIME_IMAGE=$runtime@$runtime_digest|" "$dockerfile"
echo "BUILDER_IMAGE=$builder@$builder_digest"
echo "RUNTIME_IMAGE=$runtime@$runtime_digest"
