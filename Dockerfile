# Plain Dockerfile syntax only: no BuildKit features (RUN --mount, heredocs,
# a # syntax line), so that `docker build` without BuildKit, `podman build`
# and an OpenShift Docker-strategy build all take it. The module download has
# its own layer instead of a cache mount.

# Builder: the upstream Go image rather than ubi9/go-toolset, because go.mod
# asks for go 1.26.8 and golang:1.26 always carries the newest 1.26 patch,
# while the RHEL toolset trails patch releases and pins GOTOOLCHAIN=local, so
# it would refuse the module until it caught up. The binary is static
# (CGO_ENABLED=0), so the builder's libc never reaches the runtime image.
FROM docker.io/library/golang:1.26 AS builder

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
      -o /out/fleetshard-sync ./cmd/fleetshard-sync

# Runtime: ubi-minimal rather than distroless, for Red Hat's errata and CVE
# scanning, and because it still has a shell and `sleep`, which the template's
# preStop hook and OpenShift CI's container tests run.
FROM registry.access.redhat.com/ubi9/ubi-minimal:latest

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

# One image, two binaries: the service, and fleetshard-sync, the agent each
# hub runs (templates/agent-template.yml sets its command).
COPY --from=builder /out/fleet-manager /out/fleetshard-sync /usr/local/bin/

# OpenShift runs the container under an arbitrary UID anyway; 1001 keeps it
# non-root everywhere else.
USER 1001

# API, metrics (/metrics), health (/healthz, /readyz).
EXPOSE 8000 8080 8083

ENTRYPOINT ["/usr/local/bin/fleet-manager"]
CMD ["serve"]
