#!/usr/bin/env bash
# Regenerates committed code: templ components. The templ CLI runs at
# exactly the runtime library's version in go.mod (not a go.mod tool line,
# so users of the public packages do not inherit its dependencies).
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(go list -m -f '{{.Version}}' github.com/a-h/templ)
go run "github.com/a-h/templ/cmd/templ@${version}" generate -path internal/views >/dev/null
