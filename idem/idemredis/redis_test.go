package idemredis_test

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemredis"
	"github.com/unstuckhq/unstuck/idem/idemtest"
	"github.com/unstuckhq/unstuck/internal/redistest"
)

func TestMain(m *testing.M) { redistest.RunMain(m) }

// prefix returns a key prefix no other test uses.
func prefix() string { return "t" + rand.Text()[:12] + ":" }

// singleClient returns a client of the process's throwaway server.
func singleClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: redistest.Server(t)})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// clusterClient returns a client of the process's throwaway 3-master
// cluster.
func clusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.SharedCluster(t).Addrs()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newStore returns a store under a fresh prefix on c.
func newStore(t testing.TB, c redis.UniversalClient, opts ...idemredis.Option) *idemredis.Store {
	t.Helper()
	s, err := idemredis.New(context.Background(), c, append([]idemredis.Option{idemredis.WithPrefix(prefix())}, opts...)...)
	require.NoError(t, err)
	return s
}

func TestConformanceSingle(t *testing.T) {
	t.Parallel()
	c := singleClient(t)
	idemtest.Run(t, func(t *testing.T) idemdriver.Store { return newStore(t, c) })
}

func TestAdminConformanceSingle(t *testing.T) {
	t.Parallel()
	c := singleClient(t)
	idemtest.RunAdmin(t, func(t *testing.T) idemtest.AdminHarness {
		s := newStore(t, c)
		return idemtest.AdminHarness{Store: s, Admin: s, Seeder: s}
	})
}

func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	c := clusterClient(t)
	idemtest.Run(t, func(t *testing.T) idemdriver.Store {
		s := newStore(t, c)
		require.True(t, s.Cluster())
		return s
	})
}

func TestAdminConformanceCluster(t *testing.T) {
	t.Parallel()
	c := clusterClient(t)
	idemtest.RunAdmin(t, func(t *testing.T) idemtest.AdminHarness {
		s := newStore(t, c)
		return idemtest.AdminHarness{Store: s, Admin: s, Seeder: s}
	})
}
