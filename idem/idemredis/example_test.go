package idemredis_test

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemredis"
)

// A store on a Redis Cluster, whose writes wait for one replica, under an
// engine. New checks the servers first and refuses, naming what to change,
// a configuration that could lose or evict records silently.
func ExampleNew() {
	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}})
	store, err := idemredis.New(ctx, rdb, idemredis.Config{Prefix: "payments:", WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond})
	if err != nil {
		log.Fatal(err) // e.g. maxmemory-policy allkeys-lru: set noeviction
	}
	engine, err := idem.New(store, idem.Config{Secret: []byte(os.Getenv("UNSTUCK_SECRET"))})
	if err != nil {
		log.Fatal(err)
	}
	res, err := idem.Run(ctx, engine, "order-42", "tenant:7", func(ctx context.Context) (string, error) {
		return "charged", nil
	}, nil)
	_, _ = res, err
}
