package stack

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// childAttr puts a non-detached server in its own process group (so a terminal's Ctrl-C goes to
// this process, which then stops the server through Stop) and asks the kernel to send it
// SIGTERM if this process dies without calling Stop. The kernel ties that signal to the OS
// thread that forked; the Go runtime keeps threads alive unless a goroutine exits while locked
// to one, which this module never does.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// childOwnGroup reports whether childAttr gives the child its own process group.
const childOwnGroup = true

// looksLikeServer reports whether pid is a live (non-zombie) `temporal server start-dev`
// process, so a pid file left over from before a reboot never makes us signal an unrelated
// process group.
func looksLikeServer(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	return bytes.Contains(b, []byte("server\x00start-dev"))
}
