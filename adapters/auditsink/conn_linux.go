package auditsink

import (
	"net"
	"syscall"
	"unsafe"
)

// unsent is how many bytes the connection's send queue holds that the peer has not
// acknowledged (SIOCOUTQ).
func unsent(c *net.TCPConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// peek says how many bytes wait to be read (0: none), or errClosed when the peer closed
// the connection, without blocking or consuming anything.
func peek(c *net.TCPConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var b [1]byte
	var n int
	var rerr error
	if err := rc.Control(func(fd uintptr) {
		n, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return 0, err
	}
	switch {
	case rerr == syscall.EAGAIN:
		return 0, nil
	case rerr != nil:
		return 0, rerr
	case n == 0:
		return 0, errClosed
	}
	return n, nil
}
