package pgtest

import "syscall"

// sysProcAttr runs a child as cred when cred is not nil.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}

// setParentDeathSignal has the kernel send sig to the child when the thread
// that started it ends.
func setParentDeathSignal(attr *syscall.SysProcAttr, sig syscall.Signal) {
	attr.Pdeathsig = sig
}
