# syntax=docker/dockerfile:1
#
# One image per example, built from this repository:
#
#   docker build --build-arg EXAMPLE=edi-as2  -t floodgate-edi-as2 .
#   docker build --build-arg EXAMPLE=geofence -t floodgate-geofence .
#
# The image runs the example (ENTRYPOINT; pass its flags as the command) and
# also holds the floodgate CLI (/usr/local/bin/floodgate) for operations:
#
#   docker compose exec edi-as2 floodgate backlog -nats-url nats://nats:4222
#
# docker-compose.yml builds both examples with this file.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# Dependencies first, so a code change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# EXAMPLE names a directory under examples/.
ARG EXAMPLE=edi-as2
RUN test -d "examples/${EXAMPLE}" || { echo "no examples/${EXAMPLE}" >&2; exit 1; }
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/example "./examples/${EXAMPLE}" \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/floodgate ./cmd/floodgate

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/example /usr/local/bin/example
COPY --from=build /out/floodgate /usr/local/bin/floodgate
# /metrics, when the example runs with -metrics-addr :9090.
EXPOSE 9090
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/example"]
