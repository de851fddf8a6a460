package discovery

import (
	"net"
	"strconv"

	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/amqp"
	"github.com/brokernet/brokernet/transport/openwire"
	"github.com/brokernet/brokernet/transport/stomp"
)

// credentialsOf returns the login and passcode of a broker URI of any protocol.
func credentialsOf(u transport.URI) (login, pass string) {
	switch u := u.(type) {
	case stomp.URI:
		return u.Login, u.Passcode
	case amqp.URI:
		return u.User, u.Password
	case openwire.URI:
		return u.User, u.Password
	}
	return "", ""
}

// portOf returns the port of a broker URI.
func portOf(u transport.URI) int {
	_, p, _ := net.SplitHostPort(u.Addr())
	n, _ := strconv.Atoi(p)
	return n
}
