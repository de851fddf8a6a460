//go:build !linux

package stomp

import "net"

// withQuickAck is a no-op where TCP_QUICKACK does not exist.
func withQuickAck(nc net.Conn) net.Conn { return nc }
