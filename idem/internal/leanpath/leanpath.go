// Package leanpath chooses the way of a store's lean Reserve:
// write first (the insert, which meets an existing record and then reads
// it) or read first (the insert only on a miss), from the outcomes of the
// Reserves before it. Both ways give the same outcome and guarantees; which
// one costs less depends on how many keys are new, and each driver weighs
// the two mistakes by what they cost on its database.
package leanpath

import "sync/atomic"

// Costs weighs a Path: a Reserve that found a record raises the score by
// Hit, one that created a record lowers it by Miss, within [0, Max], and
// Reserves read first while the score is at least At. The score rises
// while more than Miss/(Miss+Hit) of the Reserves find a record.
type Costs struct {
	Hit, Miss, Max, At int32
}

// Way is a way of a lean Reserve that a test forces on a Path.
type Way int

const (
	// Adaptive follows the score: the zero Way.
	Adaptive Way = iota
	// WriteFirst always writes first.
	WriteFirst
	// ReadFirst always reads first.
	ReadFirst
)

// Path is the score of one store. A Path with zero score writes first.
// It is safe for concurrent use; updates that race may be lost, since the
// score is a hint and both ways are correct. A Path must not be copied
// after first use.
type Path struct {
	Costs Costs
	// Force, set by tests only, fixes the way.
	Force Way
	score atomic.Int32
}

// ReadFirst reports whether the next lean Reserve reads first.
func (p *Path) ReadFirst() bool {
	switch p.Force {
	case WriteFirst:
		return false
	case ReadFirst:
		return true
	}
	return p.score.Load() >= p.Costs.At
}

// Record counts the outcome of a lean Reserve: created or found. It writes
// only when the score changes, so a steady traffic does not bounce a cache
// line between cores.
func (p *Path) Record(created bool) {
	old := p.score.Load()
	next := old + p.Costs.Hit
	if created {
		next = old - p.Costs.Miss
	}
	next = max(0, min(p.Costs.Max, next))
	if next != old {
		p.score.CompareAndSwap(old, next)
	}
}

// Score returns the current score, for tests.
func (p *Path) Score() int32 { return p.score.Load() }
