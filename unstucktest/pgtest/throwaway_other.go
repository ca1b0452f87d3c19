//go:build !unix

package pgtest

import (
	"context"
	"errors"
	"time"
)

// Cluster is a throwaway cluster; it cannot be started on this system.
type Cluster struct{}

// How [Cluster.Restart] brings the postmaster down.
const (
	StopFast      = "fast"
	StopImmediate = "immediate"
	StopKill      = "kill"
)

var errNoCluster = &unavailableError{reason: "throwaway clusters are supported on Unix systems only"}

// BinDir reports that throwaway clusters need a Unix system.
func BinDir() (string, error) { return "", errNoCluster }

// IsUnavailable reports whether err says that this machine cannot run a
// throwaway cluster at all.
func IsUnavailable(err error) bool {
	var u *unavailableError
	return errors.As(err, &u)
}

// StartCluster reports that throwaway clusters need a Unix system.
func StartCluster(context.Context, string) (*Cluster, error) { return nil, errNoCluster }

func (*Cluster) URL() string                                          { return "" }
func (*Cluster) Addr() string                                         { return "" }
func (*Cluster) Down(string) error                                    { return errNoCluster }
func (*Cluster) Up(context.Context) error                             { return errNoCluster }
func (*Cluster) Restart(context.Context, string, time.Duration) error { return errNoCluster }
func (*Cluster) Stop() error                                          { return nil }
func (*Cluster) LogPath() string                                      { return "" }
