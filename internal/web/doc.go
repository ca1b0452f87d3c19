// Package web is the operations console's HTTP handler: sign-in and
// sessions, the overview, the lists and detail pages of idempotency keys and
// saga operations, operator decisions, users and the audit trail, rendered
// server-side with the templ components of internal/views (HTMX swaps are
// fragments of the same components).
//
// [NewHandler] builds the whole handler from a [Config]; routes.go lists
// every route it serves. Handlers are makers that take what they need and
// declare the small interface they use next to them. The console's routes
// carry sessions ([NewSessionManager]), cross-origin protection on unsafe
// methods and the casbin RBAC policy ([NewEnforcer]); the health, metrics
// and static routes, the identity provider's back-channel logout endpoint
// (SSO.BackChannelLogout) and Config.Mount's routes carry none of them.
//
// # Errors
//
// Every handler leaves through one error exit: an [AppError] carries a code
// (EInvalid, ENotFound, EConflict, EStale, …) and a message safe to show,
// which choose the status and the page or problem+json body; any other
// error is logged and shown as "Internal error".
//
// # Decisions
//
// Operator decisions (Config.Keys, Config.Operations) are applied by
// package ops, which writes the decision and its audit entry in one
// transaction; each rendered form carries an idempotency key, so a double
// submit applies once. Without them the console is read-only.
package web
