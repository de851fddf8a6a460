package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"

	"github.com/brokernet/brokernet/discovery"
)

// Equal reports whether a and b are configured identically, so that a reload
// can leave a running connector alone. Line is ignored (moving a connector in
// the file changes nothing), and so are the differences between an empty
// and an absent list. Changes of the connector's [[broker]] are not seen
// here; Config.Changes takes them into account.
func (a NetworkConnector) Equal(b NetworkConnector) bool {
	return reflect.DeepEqual(a.canonical(), b.canonical())
}

// Fingerprint is a digest of the connector's configuration: equal for
// connectors that are Equal, different otherwise (barring hash collisions).
// It reveals nothing of passcodes or keys, so it may be logged.
func (a NetworkConnector) Fingerprint() string {
	c := a.canonical()
	// The digest may be logged: a known configuration must not let anyone test
	// password guesses against it. Only whether one is set counts.
	if c.Password != "" {
		c.Password = "set"
	}
	var g Gossip
	if c.Gossip != nil {
		g = *c.Gossip
	}
	c.Gossip = nil
	// %#v prints every field, unexported ones included (the words of a
	// destination.Pattern), in declaration order, with types.
	sum := sha256.Sum256(fmt.Appendf(nil, "%#v\n%t %#v", c, a.Gossip != nil, g))
	return hex.EncodeToString(sum[:16])
}

// canonical returns a copy without Line and with empty lists made nil.
func (a NetworkConnector) canonical() NetworkConnector {
	a.Line = 0
	a.URI = canonicalSpec(a.URI)
	a.StaticallyIncludedDestinations = nilIfEmpty(a.StaticallyIncludedDestinations)
	a.DynamicallyIncludedDestinations = nilIfEmpty(a.DynamicallyIncludedDestinations)
	a.ExcludedDestinations = nilIfEmpty(a.ExcludedDestinations)
	a.Renames = nilIfEmpty(a.Renames)
	a.DestinationRateLimits = nilIfEmpty(a.DestinationRateLimits)
	a.DestinationFilters = nilIfEmpty(a.DestinationFilters)
	if a.Gossip != nil {
		g := *a.Gossip
		g.Join = nilIfEmpty(g.Join)
		g.SecretKey = nilIfEmpty(g.SecretKey)
		a.Gossip = &g
	}
	return a
}

// Equal reports whether two brokers are configured identically.
func (b Broker) Equal(o Broker) bool {
	b.URI, o.URI = canonicalSpec(b.URI), canonicalSpec(o.URI)
	return reflect.DeepEqual(b, o)
}

func canonicalSpec(s discovery.Spec) discovery.Spec {
	s.URIs = nilIfEmpty(s.URIs)
	return s
}

func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return slices.Clip(s)
}
