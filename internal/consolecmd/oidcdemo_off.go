//go:build !oidcdemo

package consolecmd

import (
	"errors"
	"log/slog"

	"github.com/unstuckhq/unstuck/internal/web"
)

// errNoOIDCDemo is what --oidc-demo answers in a console built without
// the oidcdemo tag, which leaves the demo's OpenID provider out of the
// binary.
var errNoOIDCDemo = errors.New("--oidc-demo needs the demo identity provider, which this build leaves out: run go run -tags oidcdemo ./cmd/console demo --oidc-demo")

// startDemoSSO returns errNoOIDCDemo: the demo's identity provider is
// built with the oidcdemo tag only.
func startDemoSSO(string, string, *slog.Logger) (*demoIdP, *web.SSO, error) {
	return nil, nil, errNoOIDCDemo
}
