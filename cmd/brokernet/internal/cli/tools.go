package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport/stomp"
)

const sendUsage = `Usage: brokernet send [flags] BROKER DESTINATION

Sends --count messages to DESTINATION (queue://NAME or topic://NAME) and waits until
the broker confirmed each of them. BROKER is a STOMP URI (stomp:// or stomp+ssl://):
this test tool speaks STOMP only.

Flags:
`

func runSend(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet("send")
	count := fs.Int("count", 10, "number of messages")
	size := fs.Int("size", 0, "body size in bytes (0: a short text body)")
	persistent := fs.Bool("persistent", false, "send persistent messages")
	var headers stringList
	fs.Var(&headers, "header", "extra header key=value (repeatable)")
	pos, err := parseFlags(e, fs, sendUsage, args)
	if err != nil {
		return err
	}
	uri, dest, err := brokerAndDestination(pos)
	if err != nil {
		return err
	}
	extra := make([]string, 0, 2*len(headers))
	for _, h := range headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return usagef("--header %q: want key=value", h)
		}
		extra = append(extra, k, v)
	}
	c, err := stomp.Dial(ctx, uri, stomp.Options{})
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))

	const inFlight = 1000
	sem := make(chan struct{}, inFlight)
	errs := make(chan error, inFlight)
	start := time.Now()
	for i := 1; i <= *count; i++ {
		body := []byte(fmt.Sprintf("message %d", i))
		if *size > 0 {
			body = make([]byte, *size)
			copy(body, fmt.Sprintf("message %d ", i))
		}
		f := frame.New(frame.SEND, frame.Destination, dest.StompPath(),
			frame.ContentLength, strconv.Itoa(len(body)),
			"seq", strconv.Itoa(i), "persistent", strconv.FormatBool(*persistent))
		for j := 0; j < len(extra); j += 2 {
			f.Header.Add(extra[j], extra[j+1])
		}
		f.Body = body
		select {
		case sem <- struct{}{}:
		case err := <-errs:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := c.WriteReceipt(ctx, f, func(err error) {
			if err != nil {
				errs <- err
			}
			<-sem
		}); err != nil {
			return err
		}
	}
	for i := 0; i < inFlight; i++ {
		select {
		case sem <- struct{}{}:
		case err := <-errs:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	el := time.Since(start)
	fmt.Fprintf(e.stdout, "sent %d messages to %s in %s (%.0f msg/s)\n", *count, dest, el.Round(time.Millisecond), float64(*count)/el.Seconds())
	return nil
}

const receiveUsage = `Usage: brokernet receive [flags] BROKER DESTINATION

Consumes from DESTINATION (queue://NAME or topic://NAME) until --count messages
arrived or nothing arrived for --idle, and prints what it got. BROKER is a STOMP URI
(stomp:// or stomp+ssl://): this test tool speaks STOMP only.

Flags:
`

func runReceive(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet("receive")
	count := fs.Int("count", 0, "stop after this many messages (0: no limit)")
	idle := fs.Duration("idle", 10*time.Second, "stop after this long without a message")
	verbose := fs.Bool("print", false, "print each message's seq header and body start")
	pos, err := parseFlags(e, fs, receiveUsage, args)
	if err != nil {
		return err
	}
	uri, dest, err := brokerAndDestination(pos)
	if err != nil {
		return err
	}
	c, err := stomp.Dial(ctx, uri, stomp.Options{})
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	if err := c.Subscribe(ctx, "receive", dest.StompPath(), "auto"); err != nil {
		return err
	}
	got := 0
	t := time.NewTimer(*idle)
	defer t.Stop()
	for *count == 0 || got < *count {
		select {
		case f, ok := <-c.Deliveries():
			if !ok {
				return c.Err()
			}
			got++
			if *verbose {
				body := string(f.Body)
				if len(body) > 40 {
					body = body[:40]
				}
				fmt.Fprintf(e.stdout, "received seq=%s %q\n", f.Header.Get("seq"), body)
			}
			t.Reset(*idle)
		case <-t.C:
			fmt.Fprintf(e.stdout, "received %d messages from %s (idle for %s)\n", got, dest, *idle)
			return nil
		case <-ctx.Done():
			fmt.Fprintf(e.stdout, "received %d messages from %s\n", got, dest)
			return nil
		}
	}
	fmt.Fprintf(e.stdout, "received %d messages from %s\n", got, dest)
	return nil
}

func brokerAndDestination(pos []string) (stomp.URI, destination.Destination, error) {
	if len(pos) != 2 {
		return stomp.URI{}, destination.Destination{}, usagef("want BROKER and DESTINATION, got %d argument(s)", len(pos))
	}
	uri, err := stomp.ParseURI(pos[0])
	if err != nil {
		return uri, destination.Destination{}, usagef("%v", err)
	}
	dest, err := destination.Parse(pos[1])
	if err != nil {
		return uri, dest, usagef("%v", err)
	}
	return uri, dest, nil
}
