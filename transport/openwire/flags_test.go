package openwire

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// TestSubscribeConsumerFlags: a subscription's Exclusive and Retroactive are
// the ConsumerInfo's exclusive and retroactive, as the networkConnector
// copies them onto its demand subscriptions; noLocal stays false.
func TestSubscribeConsumerFlags(t *testing.T) {
	infos := make(chan *consumerInfo, 2)
	c := dialFake(t, func(nc net.Conn, br *bufio.Reader) {
		for {
			p, err := readFrame(br, nil, 1<<20)
			if err != nil {
				return
			}
			if cmd, _ := decodeCommand(p, false); cmd != nil {
				if ci, ok := cmd.(*consumerInfo); ok {
					infos <- ci
				}
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	q := destination.Destination{Kind: destination.Queue, Name: "q"}
	for _, s := range []transport.Subscription{
		{ID: "s1", Destination: q, Exclusive: true, Retroactive: true},
		{ID: "s2", Destination: q},
	} {
		if _, err := c.Subscribe(ctx, s); err != nil {
			t.Fatal(err)
		}
		select {
		case ci := <-infos:
			if ci.Exclusive != s.Exclusive || ci.Retroactive != s.Retroactive || ci.NoLocal {
				t.Errorf("%s: ConsumerInfo exclusive %v retroactive %v noLocal %v, want %v %v false",
					s.ID, ci.Exclusive, ci.Retroactive, ci.NoLocal, s.Exclusive, s.Retroactive)
			}
		case <-ctx.Done():
			t.Fatalf("%s: no ConsumerInfo written", s.ID)
		}
	}
}
