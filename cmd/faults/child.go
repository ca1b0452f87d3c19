package main

import (
	"context"
	"errors"
)

const childEnv = "UNSTUCK_FAULTS_CHILD"

func childMain() int { return 2 }

func sqliteKillExperiment(ctx context.Context, sc scale) ([]row, error) {
	return nil, errors.New("todo")
}

func crashRecoveryExperiment(ctx context.Context, env *pgEnv, sc scale) ([]row, error) {
	return nil, errors.New("todo")
}
