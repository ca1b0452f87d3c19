#!/usr/bin/env bash
# playwright-setup.sh — idempotent, download-free setup for the browser tests
# (internal/consolecmd/consoletest/chromium). Playwright's own installers fetch from CDNs
# this project's machines cannot reach, so:
#   1. Chromium is Debian's (/usr/bin/chromium), installed with apt when missing.
#   2. The playwright-go driver directory is built with npm from the npm registry:
#        $PLAYWRIGHT_DRIVER_PATH/package/cli.js   the playwright-core tarball
#        $PLAYWRIGHT_DRIVER_PATH/node             a symlink to the system node
#      playwright-go only checks that `node package/cli.js --version` prints the
#      version it pins, so this is all it needs.
#   3. The coreBundle.js patch that playwright-go's own Install() applies.
# Every step is skipped when already done.
#
# The playwright-core version must equal the one pinned by the Go module
# github.com/mxschmitt/playwright-go in go.mod (v0.6401.0 pins 1.64.1). It is
# read from that module, or taken from $PLAYWRIGHT_CORE_VERSION, else 1.64.1.
#
# Usage:   eval "$(bash scripts/playwright-setup.sh)"   # logs on stderr, exports on stdout
# Env in:  PLAYWRIGHT_CORE_VERSION, PLAYWRIGHT_DRIVER_PATH, CHROMIUM_BIN (default /usr/bin/chromium)
# Env out: PLAYWRIGHT_DRIVER_PATH, PLAYWRIGHT_NODEJS_PATH, PLAYWRIGHT_CHROMIUM_PATH
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[playwright-setup] %s\n' "$*" >&2; }
t_start=$(date +%s)
step_t=$t_start
step_done() { local now; now=$(date +%s); log "$1 ($((now - step_t))s)"; step_t=$now; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# ---------------------------------------------------------------- node
NODE_BIN=$(command -v node || true)
if [ -z "$NODE_BIN" ]; then
  log "node not found: install Node.js >= 20 (npm is needed too)"; exit 1
fi
NODE_BIN=$(readlink -f "$NODE_BIN")
node_major=$("$NODE_BIN" -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  log "node $("$NODE_BIN" --version) is too old; playwright-core 1.6x needs node >= 20"; exit 1
fi
command -v npm >/dev/null || { log "npm not found"; exit 1; }

# ---------------------------------------------------------------- version
# playwrightCliVersion in the module's run.go is what playwright-go checks.
detect_version() {
  local mod=github.com/mxschmitt/playwright-go dir v
  command -v go >/dev/null || return 1
  go list -m "$mod" >/dev/null 2>&1 || return 1
  dir=$(go list -m -f '{{.Dir}}' "$mod" 2>/dev/null || true)
  if [ -z "$dir" ]; then
    go mod download "$mod" >/dev/null 2>&1 || true
    dir=$(go list -m -f '{{.Dir}}' "$mod" 2>/dev/null || true)
  fi
  [ -n "$dir" ] && [ -f "$dir/run.go" ] || return 1
  v=$(sed -n 's/.*playwrightCliVersion *= *"\([^"]*\)".*/\1/p' "$dir/run.go" | head -1)
  [ -n "$v" ] || return 1
  echo "$v"
}
PW_VERSION=${PLAYWRIGHT_CORE_VERSION:-}
if [ -z "$PW_VERSION" ]; then PW_VERSION=$(detect_version || true); fi
PW_VERSION=${PW_VERSION:-1.64.1}
log "playwright-core version: $PW_VERSION"

# ---------------------------------------------------------------- chromium
CHROMIUM_BIN=${CHROMIUM_BIN:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM_BIN" ]; then
  log "installing Debian chromium (about 120 MB, 20-30 s)"
  export DEBIAN_FRONTEND=noninteractive
  # apt lists may be missing or stale on a fresh machine
  $SUDO apt-get update -qq >&2
  $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-liberation >&2
fi
"$CHROMIUM_BIN" --version >&2 2>/dev/null || { log "chromium at $CHROMIUM_BIN does not run"; exit 1; }
step_done "chromium ready"

# ---------------------------------------------------------------- driver dir
DRIVER_DIR=${PLAYWRIGHT_DRIVER_PATH:-${XDG_CACHE_HOME:-$HOME/.cache}/ms-playwright-go/$PW_VERSION}
mkdir -p "$DRIVER_DIR"
have=""
if [ -f "$DRIVER_DIR/package/cli.js" ]; then
  have=$("$NODE_BIN" "$DRIVER_DIR/package/cli.js" --version 2>/dev/null || true)
fi
if [ "$have" != "Version $PW_VERSION" ]; then
  log "building driver dir $DRIVER_DIR from npm playwright-core@$PW_VERSION (was: ${have:-none})"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack "playwright-core@$PW_VERSION" --silent >/dev/null)
  rm -rf "$DRIVER_DIR/package"
  # npm tarballs unpack into package/, the layout playwright-go expects
  tar -xzf "$tmp/playwright-core-$PW_VERSION.tgz" -C "$DRIVER_DIR"
  have=$("$NODE_BIN" "$DRIVER_DIR/package/cli.js" --version)
  [ "$have" = "Version $PW_VERSION" ] || { log "unexpected driver version: $have"; exit 1; }
fi
ln -sfn "$NODE_BIN" "$DRIVER_DIR/node"
# The patch playwright-go applies in Install()/DownloadDriver() (Run() does not).
bundle="$DRIVER_DIR/package/lib/coreBundle.js"
if [ -f "$bundle" ] && grep -q 'pageError\.location\.' "$bundle"; then
  sed -i \
    -e 's/pageError\.location\.url/pageError.location?.url || ""/g' \
    -e 's/pageError\.location\.lineNumber/pageError.location?.lineNumber || 0/g' \
    -e 's/pageError\.location\.columnNumber/pageError.location?.columnNumber || 0/g' \
    "$bundle"
  log "patched $bundle (pageError.location)"
fi
step_done "driver ready: $have"

log "done in $(( $(date +%s) - t_start ))s"
cat <<EOF
export PLAYWRIGHT_DRIVER_PATH='$DRIVER_DIR'
export PLAYWRIGHT_NODEJS_PATH='$NODE_BIN'
export PLAYWRIGHT_CHROMIUM_PATH='$CHROMIUM_BIN'
EOF
