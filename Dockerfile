# One Dockerfile, two images: `--target manager` and `--target registrar`.
# They share the builder stage (one module download, one compile cache) but
# ship apart: the registrar runs in every registered pod, so its image holds
# only its own ~10 MB static binary, and the manager's rollout never changes
# what runs beside the apps.
#
#   docker build --target manager   -t eurekube/manager:dev .
#   docker build --target registrar -t eurekube/registrar:dev .

FROM golang:1.26 AS builder
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The same command as `make build`, which the tests exercise outside Docker.
ENV CGO_ENABLED=0
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags='-s -w' -o /out/ ./cmd/manager ./cmd/registrar
# The manager is also the eurekube command line when called eurekube (the
# Helm chart's pre-delete hook runs /eurekube uninstall).
# Relative, so it resolves in both stages (a copy, if COPY follows it).
RUN ln -s manager /out/eurekube

# distroless/static:nonroot: no shell, no package manager, uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot AS registrar
COPY --from=builder /out/registrar /registrar
USER 65532:65532
EXPOSE 9901
ENTRYPOINT ["/registrar"]

FROM gcr.io/distroless/static-debian12:nonroot AS manager
COPY --from=builder /out/eurekube /eurekube
COPY --from=builder /out/manager /manager
USER 65532:65532
EXPOSE 9443 8443 8081
ENTRYPOINT ["/manager"]
