//go:build !unix

package pgtest

import "context"

// cluster is never started on this system.
type cluster struct{ url, dir string }

// startCluster reports that throwaway clusters need a Unix system (initdb
// run as another user, a Unix socket directory).
func startCluster(context.Context) (*cluster, error) {
	return nil, &unavailableError{reason: "throwaway clusters are supported on Unix systems only; set TEST_DATABASE_URL"}
}

func (c *cluster) stop() error { return nil }
