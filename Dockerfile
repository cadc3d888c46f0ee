# Plain Dockerfile syntax only: no BuildKit features (RUN --mount, heredocs,
# a # syntax line), so that `docker build` without BuildKit, `podman build`
# and an OpenShift Docker-strategy build all take it. The module download has
# its own layer instead of a cache mount.

# The base images are pinned by digest, so a rebuild starts from the same
# bytes and a new base is a reviewed change. scripts/refresh-base-images.sh
# resolves the tags again (skopeo) and rewrites these two lines: run it for a
# Go patch release (with go.mod's go line), a UBI errata release or a CVE.
# An OpenShift build may override them with --build-arg.
ARG BUILDER_IMAGE=docker.io/library/golang:1.26.8@sha256:9d2f36f06329b2a141b9db99ffa32765cf695ee57b813ca29e245e8670bcbfff
ARG RUNTIME_IMAGE=registry.access.redhat.com/ubi9/ubi-minimal:9.7@sha256:161a4e29ea482bab6048c2b36031b4f302ae81e4ff18b83e61785f40dc576f5d

# Builder: the upstream Go image rather than ubi9/go-toolset, because go.mod
# asks for go 1.26.8 and the Go image of that exact patch exists on the day
# it ships, while the RHEL toolset trails patch releases and pins
# GOTOOLCHAIN=local, so it would refuse the module until it caught up. The
# binary is static (CGO_ENABLED=0), so the builder's libc never reaches the
# runtime image.
FROM ${BUILDER_IMAGE} AS builder

# Never fetch a different toolchain in the middle of a build.
ENV GOTOOLCHAIN=local \
    GOMODCACHE=/go/pkg/mod \
    GOCACHE=/root/.cache/go-build

WORKDIR /src

# Modules first, in their own layer: a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download

# .dockerignore keeps this to go.mod, go.sum, cmd/, internal/, pkg/ and
# openapi/ (whose specs are embedded into the binary).
COPY . .

ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/fleetmanager/fleet-manager/internal/version.Version=${VERSION} -X github.com/fleetmanager/fleet-manager/internal/version.Commit=${COMMIT}" \
      -o /out/fleet-manager ./cmd/fleet-manager && \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/fleetmanager/fleet-manager/internal/version.Version=${VERSION} -X github.com/fleetmanager/fleet-manager/internal/version.Commit=${COMMIT}" \
      -o /out/fleetshard-sync ./cmd/fleetshard-sync && \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/fleetmanager/fleet-manager/internal/version.Version=${VERSION} -X github.com/fleetmanager/fleet-manager/internal/version.Commit=${COMMIT}" \
      -o /out/fleetctl ./cmd/fleetctl

# Runtime: ubi-minimal rather than distroless, for Red Hat's errata and CVE
# scanning, and because it still has a shell and `sleep`, which the template's
# preStop hook and OpenShift CI's container tests run.
FROM ${RUNTIME_IMAGE}

ARG VERSION=dev
ARG COMMIT=unknown
# The ubi labels would otherwise describe the base image, not this one.
LABEL org.opencontainers.image.title="fleet-manager" \
      org.opencontainers.image.description="Fleet Manager: the inventory of a fleet of clusters across RHACM hubs" \
      org.opencontainers.image.source="https://github.com/fleetmanager/fleet-manager" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      name="fleet-manager" \
      summary="Fleet Manager service" \
      description="Fleet Manager: the inventory of a fleet of clusters across RHACM hubs" \
      io.k8s.display-name="Fleet Manager" \
      io.k8s.description="Fleet Manager: the inventory of a fleet of clusters across RHACM hubs" \
      io.openshift.tags="fleet-manager,rhacm"

# One image, three binaries: the service, fleetshard-sync, the agent each
# hub runs (templates/agent-template.yml sets its command), and fleetctl, the
# command line (`oc exec` or `podman run --entrypoint fleetctl` to use it).
COPY --from=builder /out/fleet-manager /out/fleetshard-sync /out/fleetctl /usr/local/bin/

# OpenShift runs the container under an arbitrary UID anyway; 1001 keeps it
# non-root everywhere else.
USER 1001

# API, metrics (/metrics), health (/healthz, /readyz).
EXPOSE 8000 8080 8083

ENTRYPOINT ["/usr/local/bin/fleet-manager"]
CMD ["serve"]
