// Package examples holds complete programs an application can copy, one
// main package per directory, each running on a temporary SQLite file:
//
//   - middleware: a net/http server with the idem HTTP middleware
//   - run: idem.Run with a key
//   - transport: the HTTP client transport that sets Idempotency-Key and retries
//   - riverjob: a River job at most once per key (idemriver), with a verifier
//   - saga: a three-step saga on River with a compensation
//
// docs/getting-started.md walks through them. The test in this directory
// builds and runs each one.
package examples
