package discovery

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/brokernet/brokernet/transport/stomp"
)

// ErrInsecureGossip is matched (errors.Is) by NewGossip's error when gossip would
// listen beyond this machine without encryption.
var ErrInsecureGossip = errors.New("gossip is not encrypted")

// CheckGossipExposure refuses unencrypted gossip on an address other machines
// can reach: whoever can send to it can join and advertise brokers, and
// everyone on the path reads the membership. Loopback binds, a secret key, or
// insecure (an explicit choice) pass. The error is one line naming the options.
func CheckGossipExposure(bind string, key []byte, insecure bool) error {
	if len(key) > 0 || insecure {
		return nil
	}
	host, _, err := net.SplitHostPort(bind)
	if err != nil {
		host = bind
	}
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: bind %s is reachable from other machines; set a secret key (secretKeyFile, --secret-key-file) or, to run unencrypted on purpose, insecure = true (--gossip-insecure)", ErrInsecureGossip, bind)
}

// AllowList limits which brokers gossip peers may be (allowedBrokers): host
// names (matched exactly, case-insensitively), IP addresses and CIDR networks.
// The empty list allows every broker. A name is not resolved: list the names
// members advertise, or networks for members that advertise addresses.
type AllowList struct {
	names    []string
	prefixes []netip.Prefix
}

// ParseAllowList parses entries; errors name the bad entry.
func ParseAllowList(entries []string) (AllowList, error) {
	var a AllowList
	for _, e := range entries {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
			return AllowList{}, errors.New("allowed broker: empty entry")
		case strings.Contains(e, "/"):
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return AllowList{}, fmt.Errorf("allowed broker %q: not a CIDR network (want e.g. 10.0.0.0/8)", e)
			}
			a.prefixes = append(a.prefixes, p.Masked())
		default:
			if ip, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
				a.prefixes = append(a.prefixes, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
				continue
			}
			if strings.ContainsAny(e, " \t:@?#") {
				return AllowList{}, fmt.Errorf("allowed broker %q: want a host name, an IP address or a CIDR network", e)
			}
			a.names = append(a.names, strings.ToLower(strings.TrimSuffix(e, ".")))
		}
	}
	return a, nil
}

// Empty reports whether the list allows everything.
func (a AllowList) Empty() bool { return len(a.names) == 0 && len(a.prefixes) == 0 }

// Allows reports whether u's host is on the list.
func (a AllowList) Allows(u stomp.URI) bool {
	if a.Empty() {
		return true
	}
	if ip, err := netip.ParseAddr(u.Host); err == nil {
		ip = ip.Unmap()
		for _, p := range a.prefixes {
			if p.Contains(ip) {
				return true
			}
		}
		return false
	}
	host := strings.ToLower(strings.TrimSuffix(u.Host, "."))
	for _, n := range a.names {
		if n == host {
			return true
		}
	}
	return false
}

// publicURI is what a member may learn of a broker URI: where it is and how to
// verify it, never how to log in or which local files to use. Peers bring their
// own credentials and TLS files from their local configuration, as ActiveMQ's
// networkConnector userName/password apply to every discovered broker.
func publicURI(u stomp.URI) stomp.URI {
	u.Login, u.Passcode = "", ""
	u.CAFile, u.CertFile, u.KeyFile = "", "", ""
	u.ClientID = ""
	// The management API is where a RabbitMQ broker's id is asked, with the
	// broker credentials: only the advertised broker's own host (the default)
	// may get them.
	u.Management = ""
	return u
}

// isLoopbackHost reports whether host is a loopback IP.
func isLoopbackHost(host string) bool {
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}
