# The console as a static binary on a distroless base, run as a non-root
# user. Built the way .ci/run builds it: CGO_ENABLED=0 go build -trimpath.
#   docker build -t unstuck .
#   docker run -p 8080:8080 -e UNSTUCK_SECRET=... -e UNSTUCK_AUDIT_KEY=... -v unstuck-data:/data unstuck
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/console ./cmd/console
# /data for the runtime user (nonroot is 65532 in distroless): the image has
# no shell to mkdir there, so the directory is made here and copied with
# its owner. A fresh named volume on /data starts as a copy of it, owned by
# 65532, so the embedded SQLite default can create its file.
RUN mkdir -p /out/data && chown 65532:65532 /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/console /console
COPY --from=build --chown=65532:65532 /out/data /data
# The embedded SQLite default keeps its file here; PostgreSQL: set UNSTUCK_DB.
# Declared after /data exists with its owner: a volume takes both from it.
VOLUME /data
ENV UNSTUCK_DB=sqlite:/data/unstuck.db \
    UNSTUCK_ADDR=0.0.0.0:8080
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/console"]
CMD ["serve"]
