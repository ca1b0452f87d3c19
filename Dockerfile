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

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/console /console
# The embedded SQLite default keeps its file here; PostgreSQL: set UNSTUCK_DB.
VOLUME /data
ENV UNSTUCK_DB=sqlite:/data/unstuck.db \
    UNSTUCK_ADDR=0.0.0.0:8080
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/console"]
CMD ["serve"]
