package web

import (
	"strings"
	"sync"

	"github.com/casbin/casbin/v2"
	"github.com/go-chi/chi/v5"
)

// authorizer answers the console's RBAC questions (SPEC CON K6) from the
// casbin policy, once per role × route pattern × action: a path is first
// reduced to the pattern of the console route it matches ("/keys/42" →
// "/keys/:id"), so the cache holds at most roles × routes × methods
// entries, and casbin (whose keyMatch2 compiles a regular expression per
// policy row) runs once per entry instead of on every request. A path that
// matches no route, and an object that is not a path ("response"), is
// asked of casbin as it is; only the latter is cached (a bounded set of
// names the code uses). Deny by default: whatever casbin refuses or fails
// on is refused.
//
// The policy is read as it is when first asked: an enforcer whose policy
// changes afterwards needs a new handler.
type authorizer struct {
	enf    *casbin.Enforcer
	routes chi.Routes // set once NewHandler has registered every route
	cache  sync.Map   // role\x00object\x00action → bool
}

// can reports whether role may do act on obj, a URL path (escaped, as
// r.URL.EscapedPath) or a capability name.
func (a *authorizer) can(role, obj, act string) bool {
	if strings.HasPrefix(obj, "/") {
		if a.routes == nil {
			return a.enforce(role, obj, act)
		}
		pattern := a.routes.Find(chi.NewRouteContext(), act, obj)
		if pattern == "" {
			return a.enforce(role, obj, act)
		}
		return a.canPattern(role, pattern, act)
	}
	return a.cached(role, obj, act)
}

// canPattern is can for a chi route pattern ("/keys/{id}"), as the
// request's route context gives it.
func (a *authorizer) canPattern(role, pattern, act string) bool {
	return a.cached(role, casbinPattern(pattern), act)
}

func (a *authorizer) cached(role, obj, act string) bool {
	k := role + "\x00" + obj + "\x00" + act
	if v, ok := a.cache.Load(k); ok {
		return v.(bool)
	}
	allowed := a.enforce(role, obj, act)
	a.cache.Store(k, allowed)
	return allowed
}

func (a *authorizer) enforce(role, obj, act string) bool {
	allowed, err := a.enf.Enforce(role, obj, act)
	return err == nil && allowed
}

// casbinPattern turns a chi route pattern into the keyMatch2 form of the
// policy: "/keys/{id}" → "/keys/:id", "/x/{n:[0-9]+}" → "/x/:n". Matched
// by keyMatch2, ":id" stands for one path segment, as "{id}" does in chi.
func casbinPattern(pattern string) string {
	if !strings.Contains(pattern, "{") {
		return pattern
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(pattern, '{')
		if i < 0 {
			b.WriteString(pattern)
			return b.String()
		}
		j := strings.IndexByte(pattern[i:], '}')
		if j < 0 {
			b.WriteString(pattern)
			return b.String()
		}
		name, _, _ := strings.Cut(pattern[i+1:i+j], ":")
		b.WriteString(pattern[:i])
		b.WriteString(":")
		b.WriteString(name)
		pattern = pattern[i+j+1:]
	}
}
