package openwire

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/transporttest"
)

// jmsJars are the Debian activemq package's jars a JMS client needs
// (verified-here.md, "A real JMS client for tests").
var jmsJars = []string{"activemq-client.jar", "geronimo-jms_1.1_spec.jar", "geronimo-j2ee-management-1.1-spec.jar", "hawtbuf.jar", "slf4j-api.jar"}

// javaClasspath is set by javaClient for tests that start the client themselves.
var javaClasspath string

// javaClient compiles testdata/jms/Jms.java and returns a function running it.
func javaClient(t *testing.T) func(args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("javac"); err != nil {
		t.Skip("javac not installed")
	}
	var cp []string
	for _, j := range jmsJars {
		cp = append(cp, filepath.Join("/usr/share/activemq/lib", j))
	}
	dir := t.TempDir()
	out, err := exec.Command("javac", "-cp", strings.Join(cp, ":"), "-d", dir, "testdata/jms/Jms.java").CombinedOutput()
	if err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	classpath := strings.Join(append(cp, dir), ":")
	javaClasspath = classpath
	return func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "java", append([]string{"-cp", classpath, "Jms"}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("java Jms %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}

// TestJMSFidelityAcrossTwoBrokers forwards JMS messages from broker A to
// broker B through this transport, as the bridge does, and checks with
// ActiveMQ's own JMS client on B that a typed selector matches and every
// header and property type survived.
func TestJMSFidelityAcrossTwoBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs ActiveMQ and a JDK")
	}
	java := javaClient(t)
	a := testbroker.StartActiveMQ(t, testbroker.Options{})
	b := testbroker.StartActiveMQ(t, testbroker.Options{})
	const n = 20
	if out := java("produce", a.OpenWireURI(), "jms.fidelity", fmt.Sprint(n)); !strings.Contains(out, "SENT 20") {
		t.Fatalf("producer: %s", out)
	}

	ctx := context.Background()
	src := dial(t, a.OpenWireURI())
	dst := dial(t, b.OpenWireURI())
	q := destination.Destination{Kind: destination.Queue, Name: "jms.fidelity"}
	tok, err := src.Subscribe(ctx, transport.Subscription{ID: "fwd", Destination: q, Prefetch: 100})
	if err != nil {
		t.Fatal(err)
	}
	var refs []transport.Ref
	for len(refs) < n {
		ev := transporttest.Next(t, src, 10*time.Second)
		switch ev.Kind {
		case transport.Confirmed:
			if ev.Token != tok {
				t.Fatalf("unexpected confirmation %d", ev.Token)
			}
		case transport.Delivery:
			if v, _ := ev.Msg.Prop("intProp"); fmt.Sprintf("%T", v) != "int32" {
				t.Fatalf("intProp arrived as %T", v)
			}
			if err := dst.Send(ctx, ev.Msg); err != nil {
				t.Fatal(err)
			}
			refs = append(refs, ev.Ref)
		default:
			t.Fatalf("unexpected event %+v", ev)
		}
	}
	ctok, err := dst.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev, _ := transporttest.WaitToken(t, dst, ctok); ev.Kind != transport.Confirmed {
		t.Fatalf("commit on B: %+v", ev)
	}
	// Acknowledge on A only after B confirmed.
	if err := src.Settle(ctx, "fwd", refs, transport.Accepted); err != nil {
		t.Fatal(err)
	}
	stok, _ := src.Sync(ctx)
	transporttest.WaitToken(t, src, stok)
	queueDrained(t, a, q.Name, n)

	// The consumer stops at the 7 its selector matches; the 13 others stay on B.
	out := java("consume", b.OpenWireURI(), "jms.fidelity", "intProp > 5 AND boolProp = TRUE", "60000", "7")
	t.Logf("JMS consumer on B:\n%s", out)
	if !strings.Contains(out, "COUNT 7\n") {
		t.Fatalf("selector on B matched wrongly:\n%s", out)
	}
	want := "MSG intProp=Integer:6 longProp=Long:10000000006 boolProp=Boolean:true doubleProp=Double:6.5 " +
		"JMSXGroupID=String:group-0 JMSXGroupSeq=Integer:7 type=Quote corr=corr-6 replyTo=queue://replies prio=6 mode=2 text=body 6"
	if !strings.Contains(out, want+"\n") {
		t.Fatalf("message 6 on B is not the JMS message sent on A; want\n%s\ngot\n%s", want, out)
	}
	// The 13 the selector does not match are still on B: it matched no more.
	stomptest.Eventually(t, 10*time.Second, func() error {
		st, err := b.QueueStats(context.Background(), "jms.fidelity")
		if err != nil {
			return err
		}
		if st.Size != 13 {
			return fmt.Errorf("B holds %d, want 13", st.Size)
		}
		return nil
	})
}
