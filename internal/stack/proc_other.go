//go:build unix && !linux

package stack

import "syscall"

// childAttr leaves a non-detached server in this process's group: without Linux's parent-death
// signal, sharing the terminal's Ctrl-C is what keeps it from outliving this process.
func childAttr() *syscall.SysProcAttr { return nil }

// childOwnGroup reports whether childAttr gives the child its own process group.
const childOwnGroup = false

// looksLikeServer reports whether pid is alive; without /proc the command line is not checked.
func looksLikeServer(pid int) bool { return syscall.Kill(pid, 0) == nil }
