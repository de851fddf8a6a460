package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
	"github.com/brokernet/brokernet/transport"
)

// Durable demand must outlive the bridge without leaking (issue 8, defect 2b).
// ActiveMQ's advisory replay lists consumers, and an offline durable subscriber
// is not one, so a bridge that (re)starts cannot see the remote durable
// subscriptions whose subscribers are offline; and the RemoveSubscriptionInfo
// of one destroyed while the bridge was away is gone (advisories are not kept:
// ActiveMQ refuses a durable subscription on an advisory topic, measured on
// 5.17). So:
//
//   - the bridge keeps a ledger, a persistent queue on the local broker that it
//     owns, holding the remote durable subscriptions its durable demand serves
//     (demand.Table Durables) and since when each has been offline. A new
//     session restores them (Table.Restore), so an offline durable
//     subscriber's demand stays kept with its messages, and destroys the
//     demand names that none of them produces any more (Table.StaleDurables);
//   - a remote broker that lists its durable subscriptions, online or offline
//     (transport.DurableLister whose ListsDurables is true: OpenWire to
//     ActiveMQ 5.15+, the exchange behind a networkConnector's
//     syncDurableSubs; or STOMP to such a broker with its OpenWire port named,
//     ?openwirePort=, listed over OpenWire), is asked at each session start: a
//     restored one it no longer holds was destroyed while the bridge was away,
//     and is forgotten with its demand (forgetDestroyedDurables);
//   - a remote durable subscription offline longer than
//     Config.DurableOfflineTimeout is forgotten (Table.Forget) and its demand
//     destroyed, like ActiveMQ's offlineDurableSubscriberTimeout; without a
//     timeout or a listing remote (STOMP without openwirePort, or a broker
//     that does not answer), the demand of one destroyed while the bridge was
//     away is kept for good (never lose a message owed, at the price of that
//     leak).

// ledgerQueue is the local queue holding the ledger of the bridge with the
// durable connection's client-id.
func ledgerQueue(clientID string) destination.Destination {
	return destination.Destination{Kind: destination.Queue, Name: "brokernet.durables." + clientID}
}

// ledgerHops are the hop headers of a ledger record: it looks as if it had come
// from the remote broker and spent every hop, so that no demand subscription's
// hop filter lets it through — not this bridge's (its path holds the remote),
// nor another bridge's with a finite message TTL. Package demand also never
// permits a "brokernet." destination.
func ledgerHops(remoteID string) []transport.Property {
	return []transport.Property{
		{Name: hop.PathHeader, Value: hop.FormatPath([]string{remoteID})},
		{Name: hop.HopsHeader, Value: "1000000"},
	}
}

// ledgerRecord is one version of the ledger, a message body.
type ledgerRecord struct {
	Version  int64         `json:"version"`
	Durables []ledgerEntry `json:"durables"`
}

// ledgerEntry is one remote durable subscription in the ledger.
type ledgerEntry struct {
	demand.RemoteDurable
	// OfflineSince is when its last subscriber was seen leaving (zero while
	// one is online).
	OfflineSince time.Time `json:"offline_since,omitzero"`
}

// durableKeyOf identifies a remote durable subscription for offlineSince, as
// the demand table does.
func durableKeyOf(rd demand.RemoteDurable) string {
	c := rd.Consumer
	return c.ClientID + "\x00" + c.SubscriptionName + "\x00" + hop.FormatPath(c.Path)
}

// ledgerMarkerProp marks the message a loading session sends itself to know it
// has read everything before it (a queue keeps its order for one consumer).
const ledgerMarkerProp = "bn_ledger_marker"

// ledgerTimeout bounds loading the ledger.
const ledgerTimeout = 15 * time.Second

// loadLedger reads the newest ledger record on a connection of its own and
// leaves only that one in the queue. It returns nil when there is none.
func (s *session) loadLedger(ctx context.Context) (*ledgerRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	c, _, err := dialAny(ctx, s.cfg.Local, s.cfg.LocalFailover, transport.DialOptions{})
	if err != nil {
		return nil, err
	}
	defer c.Abort()
	const subID = "bn-ledger"
	q := ledgerQueue(durableClientID(s.localID, s.remoteID))
	if _, err := c.Subscribe(ctx, transport.Subscription{ID: subID, Destination: q, Prefetch: 1000, Ack: transport.Individual}); err != nil {
		return nil, err
	}
	var rnd [8]byte
	rand.Read(rnd[:]) //nolint:errcheck // never fails
	marker := hex.EncodeToString(rnd[:])
	// Persistent like the records: ActiveMQ keeps a queue's persistent and
	// non-persistent messages in two cursors and dispatches from the one it
	// used last while that one has messages buffered
	// (StoreQueueCursor.getNextCursor, 5.17), so a non-persistent marker can
	// overtake the records and the ledger reads as empty (measured: 2 times in
	// 10 after an earlier read that saw only its marker; never with a
	// persistent marker).
	if err := c.Send(ctx, &transport.Message{Destination: q, Priority: -1, Persistent: true,
		Props: []transport.Property{{Name: ledgerMarkerProp, Value: marker}}}); err != nil {
		return nil, err
	}
	if _, err := c.Commit(ctx); err != nil {
		return nil, err
	}
	var newest *ledgerRecord
	var newestRef transport.Ref
	var done []transport.Ref // settled: older records, markers, unreadable bodies
	for found := false; !found; {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reading %s: %w", q, ctx.Err())
		case ev, ok := <-c.Events():
			if !ok {
				return nil, fmt.Errorf("reading %s: %w", q, c.Err())
			}
			switch {
			case ev.Kind == transport.Refused:
				return nil, fmt.Errorf("reading %s: %w", q, ev.Err)
			case ev.Kind != transport.Delivery || ev.Sub != subID:
				continue
			}
			if m := ev.Msg.PropString(ledgerMarkerProp); m != "" {
				done = append(done, ev.Ref)
				found = m == marker
				continue
			}
			var rec ledgerRecord
			if err := json.Unmarshal(ev.Msg.Body, &rec); err != nil {
				s.log.Warn().Err(err).Str("queue", q.String()).Msg("dropping an unreadable ledger record")
				done = append(done, ev.Ref)
				continue
			}
			if newest != nil && newest.Version > rec.Version {
				done = append(done, ev.Ref)
				continue
			}
			if newest != nil {
				done = append(done, newestRef)
			}
			newest, newestRef = &rec, ev.Ref
		}
	}
	if err := c.Settle(ctx, subID, done, transport.Accepted); err != nil {
		return nil, err
	}
	// The newest record, unsettled, goes back to the queue as the connection closes.
	if err := c.Close(ctx); err != nil {
		return nil, err
	}
	return newest, nil
}

// restoreDurables loads the ledger, restores its remote durable subscriptions
// into the table and destroys durable demand none of them produces. Failing to
// read the ledger is logged, not fatal: the session then works without it,
// keeping every durable subscription it finds and leaving the ledger as it is.
func (s *session) restoreDurables(ctx context.Context, remote transport.Endpoint) error {
	rec, err := s.loadLedger(ctx)
	if err != nil {
		// Not overwritten either: the next session may read it.
		s.ledgerOn = false
		s.log.Warn().Err(err).Msg("durable ledger unreadable; offline durable demand is not restored this session")
		return nil
	}
	if rec == nil {
		return nil
	}
	s.ledgerVersion = rec.Version
	restored := make([]demand.RemoteDurable, len(rec.Durables))
	now := time.Now()
	for i, e := range rec.Durables {
		restored[i] = e.RemoteDurable
		since := e.OfflineSince
		if since.IsZero() || since.After(now) {
			since = now // online when recorded: offline since the bridge went away at most
		}
		s.offlineSince[durableKeyOf(e.RemoteDurable)] = since
	}
	s.ledger = rec.Durables
	if skipped := s.table.Restore(restored); skipped > 0 {
		s.log.Warn().Int("skipped", skipped).Msg("durable ledger entries this bridge does not serve")
	}
	for _, d := range s.table.InactiveDurables() {
		// Assumed to exist on the local broker; not confirmed.
		s.uncertain[d.DurableName] = true
	}
	var held []demand.Subscription
	for _, d := range restored {
		if d.DemandName != "" {
			s.uncertain[d.DemandName] = true
			held = append(held, demand.Subscription{Destination: d.Consumer.Destination, DurableName: d.DemandName})
		}
	}
	s.log.Info().Int("remote_durables", len(rec.Durables)).Int64("version", rec.Version).Msg("durable ledger restored")
	if err := s.apply(ctx, s.table.StaleDurables(held)); err != nil {
		return err
	}
	if dl, ok := transport.ListsDurables(remote); ok {
		return s.forgetDestroyedDurables(ctx, dl)
	}
	return nil
}

// forgetDestroyedDurables asks the remote broker which durable subscriptions it
// holds and forgets, with their demand, the restored ones it no longer holds:
// they were destroyed while the bridge was away. Not knowing is logged, not
// fatal: the demand is then kept (or left to DurableOfflineTimeout).
func (s *session) forgetDestroyedDurables(ctx context.Context, dl transport.DurableLister) error {
	durables := s.table.Durables()
	if len(durables) == 0 {
		return nil
	}
	held, err := dl.DurableSubscriptions(ctx, s.remoteID, []destination.Destination{{Kind: destination.Topic, Name: ">"}})
	if err != nil {
		s.log.Warn().Err(err).Msg("remote durable subscriptions unknown; durable demand is kept")
		return nil
	}
	// A durable subscription is its client id and name; ActiveMQ's consumer
	// advisories of STOMP subscribers carry no client id (measured, 5.17), so
	// those are matched by name and topic: another client's subscription of
	// the same name on the same topic keeps the demand (kept, never lost).
	exists := make(map[string]bool, 2*len(held))
	for _, h := range held {
		exists[h.ClientID+"\x00"+h.Name] = true
		exists["\x00"+h.Name+"\x00"+h.Destination.String()] = true
	}
	for _, d := range durables {
		c := d.Consumer
		key := c.ClientID + "\x00" + c.SubscriptionName
		if c.ClientID == "" {
			key = "\x00" + c.SubscriptionName + "\x00" + c.Destination.String()
		}
		if d.Online || exists[key] {
			continue
		}
		changes, forgotten := s.table.Forget(d.Consumer)
		if !forgotten {
			continue
		}
		s.log.Info().Str("destination", d.Consumer.Destination.String()).Str("subscription", d.Consumer.SubscriptionName).
			Msg("remote durable subscription destroyed while the bridge was away; its demand goes")
		if err := s.apply(ctx, changes); err != nil {
			return err
		}
	}
	return nil
}

// saveLedger writes a new ledger record when the remote durable subscriptions
// the table serves, or whether they are online, changed. It is written on the
// durable connection before the changes that follow from it, so that a durable
// demand subscription is recorded before it is made; old records are compacted
// by the next session.
func (s *session) saveLedger(ctx context.Context) error {
	if !s.ledgerOn {
		return nil
	}
	now := time.Now()
	durables := s.table.Durables()
	entries := make([]ledgerEntry, len(durables))
	keep := make(map[string]bool, len(durables))
	for i, d := range durables {
		k := durableKeyOf(d)
		keep[k] = true
		e := ledgerEntry{RemoteDurable: d}
		if d.Online {
			delete(s.offlineSince, k)
		} else {
			if _, ok := s.offlineSince[k]; !ok {
				s.offlineSince[k] = now
			}
			e.OfflineSince = s.offlineSince[k]
		}
		entries[i] = e
	}
	for k := range s.offlineSince {
		if !keep[k] {
			delete(s.offlineSince, k)
		}
	}
	if slices.EqualFunc(entries, s.ledger, sameLedgerEntry) {
		return nil
	}
	p, err := s.durablePeer(ctx)
	if err != nil {
		return err
	}
	rec := ledgerRecord{Version: max(s.ledgerVersion+1, now.UnixNano()), Durables: entries}
	body, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("durable ledger: %w", err)
	}
	q := ledgerQueue(durableClientID(s.localID, s.remoteID))
	if err := p.conn.Send(ctx, &transport.Message{Destination: q, Persistent: true, Priority: -1,
		ContentType: "application/json", Body: body, Props: ledgerHops(s.remoteID)}); err != nil {
		return p.errorf(err)
	}
	tok, err := p.conn.Commit(ctx)
	if err != nil {
		return p.errorf(err)
	}
	p.await(tok, func(ev transport.Event) error {
		if ev.Kind == transport.Refused {
			s.log.Error().Err(ev.Err).Str("queue", q.String()).Msg("durable ledger not saved")
		}
		return nil
	})
	s.ledgerVersion, s.ledger = rec.Version, entries
	return nil
}

// sameLedgerEntry compares ledger entries.
func sameLedgerEntry(a, b ledgerEntry) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// expireDurables forgets the remote durable subscriptions offline longer than
// Config.DurableOfflineTimeout and destroys their demand.
func (s *session) expireDurables(ctx context.Context) error {
	limit := s.cfg.DurableOfflineTimeout
	if limit <= 0 {
		return nil
	}
	now := time.Now()
	for _, d := range s.table.Durables() {
		since, ok := s.offlineSince[durableKeyOf(d)]
		if d.Online || !ok || now.Sub(since) < limit {
			continue
		}
		changes, forgotten := s.table.Forget(d.Consumer)
		if !forgotten {
			continue
		}
		s.log.Info().Str("destination", d.Consumer.Destination.String()).Str("subscription", d.Consumer.SubscriptionName).
			Dur("offline", now.Sub(since)).Msg("remote durable subscription offline too long; its demand goes")
		if err := s.apply(ctx, changes); err != nil {
			return err
		}
	}
	return nil
}

// destroyUncertain destroys a durable demand subscription that the ledger says
// exists but this session never saw: ActiveMQ answers the destruction of a
// durable subscription that does not exist with an ERROR, which ends the
// connection, so the subscription is first activated (made if missing) and
// deactivated, in order on one connection.
func (s *session) destroyUncertain(ctx context.Context, p *peer, sub demand.Subscription) error {
	ts := transport.Subscription{ID: sub.ID, Destination: sub.Destination, Selector: sub.Selector,
		Prefetch: 1, Priority: sub.Priority, DurableName: sub.DurableName}
	if _, err := p.conn.Subscribe(ctx, ts); err != nil {
		return p.errorf(err)
	}
	// Deliveries to it before the unsubscription are not ours (onLocalMessage
	// ignores unknown subscriptions) and return to the broker, then go with it.
	if err := p.conn.Unsubscribe(ctx, sub.ID); err != nil {
		return p.errorf(err)
	}
	delete(s.uncertain, sub.DurableName)
	return nil
}
