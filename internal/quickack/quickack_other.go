//go:build !linux

package quickack

import "net"

// Wrap returns nc: TCP_QUICKACK does not exist here.
func Wrap(nc net.Conn) net.Conn { return nc }
