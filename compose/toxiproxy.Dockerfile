# Toxiproxy for the compose stack: the pinned release (TOXIPROXY_VERSION) built with `go install` as
# scripts/setup.sh does, by the Go toolchain GO_TOOLCHAIN_VERSION fetched from the Go module proxy.
FROM debian:bookworm-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl unzip \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY versions.env ./
RUN set -a && . ./versions.env && set +a \
    && curl -fsSL -o go.zip "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go${GO_TOOLCHAIN_VERSION}.linux-amd64.zip" \
    && unzip -q go.zip && mv "golang.org/toolchain@v0.0.1-go${GO_TOOLCHAIN_VERSION}.linux-amd64" /usr/local/go && rm go.zip \
    && GOBIN=/out GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0 \
       /usr/local/go/bin/go install "github.com/Shopify/toxiproxy/v2/cmd/server@${TOXIPROXY_VERSION}" \
    && rm -rf /root/go /root/.cache

FROM debian:bookworm-slim
COPY --from=build /out/server /usr/local/bin/toxiproxy-server
USER nobody
ENTRYPOINT ["/usr/local/bin/toxiproxy-server"]
