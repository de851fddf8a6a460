import javax.jms.*;
import org.apache.activemq.ActiveMQConnectionFactory;

/**
 * Request/reply round trips as JMS applications make them, for the
 * request/reply benchmark.
 *
 *   java RoundTrip responder URL QUEUE
 *       answers every request on QUEUE to its JMSReplyTo, with its
 *       JMSCorrelationID (or JMSMessageID) as correlation id; prints "READY".
 *   java RoundTrip requester URL QUEUE WARMUP N STYLE TIMEOUT_MS
 *       sends WARMUP and then N requests one after the other, each waiting
 *       for its reply up to TIMEOUT_MS; prints "RTT <microseconds>" for each
 *       of the N, "TIMEOUT <i>" for a request without reply, then
 *       "DONE ok=<n> timeouts=<n>". STYLE "shared": one temporary queue for
 *       all replies, matched by correlation id (Camel's InOut); "per-request":
 *       a new temporary queue per request, deleted after its reply
 *       (Spring's JmsTemplate.sendAndReceive).
 */
public class RoundTrip {
    public static void main(String[] args) throws Exception {
        ConnectionFactory cf = new ActiveMQConnectionFactory(args[1]);
        Connection conn = cf.createConnection();
        conn.start();
        Session s = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = s.createQueue(args[2]);
        try {
            if (args[0].equals("responder")) {
                MessageConsumer c = s.createConsumer(q);
                MessageProducer p = s.createProducer(null);
                p.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
                System.out.println("READY");
                System.out.flush();
                for (;;) {
                    Message m = c.receive();
                    if (m == null) return;
                    Destination to = m.getJMSReplyTo();
                    if (to == null) continue;
                    TextMessage r = s.createTextMessage("reply to " + ((TextMessage) m).getText());
                    String corr = m.getJMSCorrelationID();
                    r.setJMSCorrelationID(corr != null ? corr : m.getJMSMessageID());
                    p.send(to, r);
                }
            }
            int warmup = Integer.parseInt(args[3]);
            int n = Integer.parseInt(args[4]);
            boolean shared = args[5].equals("shared");
            long timeout = Long.parseLong(args[6]);
            MessageProducer p = s.createProducer(q);
            p.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
            TemporaryQueue sharedQ = null;
            MessageConsumer sharedC = null;
            if (shared) {
                sharedQ = s.createTemporaryQueue();
                sharedC = s.createConsumer(sharedQ);
            }
            int ok = 0, timeouts = 0;
            for (int i = 0; i < warmup + n; i++) {
                TemporaryQueue tq = sharedQ;
                MessageConsumer c = sharedC;
                if (!shared) {
                    tq = s.createTemporaryQueue();
                    c = s.createConsumer(tq);
                }
                TextMessage m = s.createTextMessage("request " + i);
                String corr = "req-" + i;
                m.setJMSCorrelationID(corr);
                m.setJMSReplyTo(tq);
                long t0 = System.nanoTime();
                p.send(m);
                Message r = null;
                long deadline = System.currentTimeMillis() + timeout;
                for (;;) {
                    long left = deadline - System.currentTimeMillis();
                    if (left <= 0) break;
                    r = c.receive(left);
                    if (r == null || corr.equals(r.getJMSCorrelationID())) break;
                }
                long t1 = System.nanoTime();
                if (!shared) {
                    c.close();
                    tq.delete();
                }
                if (i < warmup) continue;
                if (r == null) {
                    timeouts++;
                    System.out.println("TIMEOUT " + (i - warmup));
                } else {
                    ok++;
                    System.out.println("RTT " + (t1 - t0) / 1000);
                }
            }
            System.out.println("DONE ok=" + ok + " timeouts=" + timeouts);
        } finally {
            conn.close();
        }
    }
}
