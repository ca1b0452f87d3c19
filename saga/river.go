package saga

import (
	"fmt"
	"time"

	"github.com/riverqueue/river"
)

// riverRescueDefault is River's RescueStuckJobsAfter when it is zero.
const riverRescueDefault = time.Hour

// StepLease returns the lease of the jobs of step name of operation type
// typ: how long River lets one job hold the step, twice the step's Timeout
// (a verification and the call) plus [Config.JobMargin] (its
// transactions). The job's context is cancelled at the end of its lease,
// and once it has passed River may hand the job of a process that died to
// another. It reports false for an unknown type or step.
func (r *Runner[TTx]) StepLease(typ, name string) (time.Duration, bool) {
	def, ok := r.defs[typ]
	if !ok {
		return 0, false
	}
	step, ok := def.step(name)
	if !ok {
		return 0, false
	}
	return r.jobTimeout(step), true
}

// shortestLease returns the shortest step lease of the runner's
// definitions, with its type and step, or ok false without definitions.
func (r *Runner[TTx]) shortestLease() (lease time.Duration, typ, name string, ok bool) {
	for _, d := range r.defs {
		for _, s := range d.Steps {
			if l := r.jobTimeout(s); !ok || l < lease {
				lease, typ, name, ok = l, d.Type, s.Name, true
			}
		}
	}
	return lease, typ, name, ok
}

// ConfigureRiver sets, in cfg, the knobs of the River client that works
// the runner's jobs on which recovery after a crash depends, where cfg
// leaves them zero, then checks cfg with [Runner.CheckRiver]:
//
//   - JobTimeout (River's default for workers without a Timeout of
//     their own; the engine's workers have one, their lease): River's
//     1 minute, or the shortest step lease if shorter;
//   - RescueStuckJobsAfter (River's default is 1 hour): the longer of
//     JobTimeout and the shortest step lease. River's rescuer still
//     leaves every job alone until its own timeout has passed, so a
//     running step is never taken over within its lease;
//   - Queues: the runner's queue with 10 workers, if cfg.Queues lacks it.
//
// With these, a step whose process died (SIGKILL, power loss) is taken
// over by another process within its lease plus River's rescuer period
// (30 s) and scheduler period (5 s), and, when the dead process was
// River's leader, the leadership's 15 s: within 2 × its lease + 30 s for
// any lease of 40 s or more (the default lease is 90 s). Call it on the
// config given to river.NewClient, after registering the workers.
func (r *Runner[TTx]) ConfigureRiver(cfg *river.Config) error {
	if cfg == nil {
		return fmt.Errorf("saga: ConfigureRiver: nil river.Config")
	}
	lease, _, _, ok := r.shortestLease()
	if cfg.JobTimeout == 0 {
		cfg.JobTimeout = river.JobTimeoutDefault
		if ok {
			cfg.JobTimeout = min(cfg.JobTimeout, lease)
		}
	}
	if cfg.RescueStuckJobsAfter == 0 {
		cfg.RescueStuckJobsAfter = max(cfg.JobTimeout, lease, time.Second)
	}
	if _, has := cfg.Queues[r.cfg.Queue]; !has {
		queues := make(map[string]river.QueueConfig, len(cfg.Queues)+1)
		for k, v := range cfg.Queues {
			queues[k] = v
		}
		queues[r.cfg.Queue] = river.QueueConfig{MaxWorkers: 10}
		cfg.Queues = queues
	}
	return r.CheckRiver(cfg)
}

// CheckRiver returns an error that names the knob when cfg, the config of
// the River client that works the runner's jobs, is inconsistent with the
// runner: no queue for [Config.Queue] (its jobs would never run), a
// JobTimeout longer than RescueStuckJobsAfter (River refuses it), or a
// RescueStuckJobsAfter (zero means River's 1 hour) longer than twice the
// shortest step lease, so that a step interrupted by a crash would wait
// for it instead of resuming within 2 × its lease + 30 s. A client that
// only inserts jobs (no Workers) needs no check.
func (r *Runner[TTx]) CheckRiver(cfg *river.Config) error {
	if cfg == nil {
		return fmt.Errorf("saga: CheckRiver: nil river.Config")
	}
	if q, ok := cfg.Queues[r.cfg.Queue]; !ok || q.MaxWorkers < 1 {
		return fmt.Errorf("saga: river.Config.Queues has no queue %q with workers: the saga's jobs would never run", r.cfg.Queue)
	}
	rescue := cfg.RescueStuckJobsAfter
	if rescue == 0 {
		rescue = riverRescueDefault
		if cfg.JobTimeout > riverRescueDefault {
			rescue += cfg.JobTimeout
		}
	}
	if cfg.JobTimeout > rescue {
		return fmt.Errorf("saga: river.Config.JobTimeout (%s) is longer than RescueStuckJobsAfter (%s)", cfg.JobTimeout, rescue)
	}
	lease, typ, name, ok := r.shortestLease()
	if ok && rescue > 2*lease {
		what := "River's default"
		if cfg.RescueStuckJobsAfter != 0 {
			what = "set"
		}
		return fmt.Errorf("saga: river.Config.RescueStuckJobsAfter is %s (%s): step %q of %q (lease %s) interrupted by a crash would wait that long; "+
			"set it to at most %s (twice the shortest lease), or leave it zero and call Runner.ConfigureRiver",
			rescue, what, name, typ, lease, 2*lease)
	}
	return nil
}
