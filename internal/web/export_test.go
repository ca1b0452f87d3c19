package web

import (
	"github.com/casbin/casbin/v2"
	"github.com/go-chi/chi/v5"
)

// NewAuthorizerForTest exposes the console's cached RBAC decisions: can
// answers as Viewer.Can does, canPattern as the authorize middleware does
// for a matched chi route.
func NewAuthorizerForTest(enf *casbin.Enforcer, routes chi.Routes) (can, canPattern func(role, obj, act string) bool) {
	a := &authorizer{enf: enf, routes: routes}
	return a.can, a.canPattern
}

// APIPermissionForTest is the console route pattern whose permission an
// API route needs (apiPermission).
func APIPermissionForTest(method, pattern string) (string, bool) {
	return apiPermission(method, pattern)
}

// OpenAPIForTest is the API's OpenAPI document.
func OpenAPIForTest() []byte { return openAPI }
