//go:build unix && !linux

package pgtest

import "syscall"

// sysProcAttr runs a child as cred when cred is not nil.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}

// setParentDeathSignal does nothing: only Linux has a parent death signal,
// so elsewhere a cluster outlives a test binary that dies before RunMain
// stops it.
func setParentDeathSignal(*syscall.SysProcAttr, syscall.Signal) {}
