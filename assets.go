// Package unstuck holds the files the console binary embeds from the
// repository root: the casbin model and default policy, and the static
// assets (htmx, CSS, the small script for copy buttons).
package unstuck

import (
	"embed"
	_ "embed" // the policy files below
)

// RBACModel is the casbin model of the console (rbac_model.conf).
//
//go:embed rbac_model.conf
var RBACModel string

// RBACPolicy is the console's default casbin policy (rbac_policy.csv).
//
//go:embed rbac_policy.csv
var RBACPolicy string

// OIDCRoles is the example mapping of an identity provider's groups to
// console roles (oidc_roles.csv), which "console demo --oidc-demo" uses.
//
//go:embed oidc_roles.csv
var OIDCRoles string

// Static holds static/: served under /static/.
//
//go:embed static
var Static embed.FS
