import javax.jms.*;
import org.apache.activemq.ActiveMQConnectionFactory;

/**
 * Request/reply with temporary destinations on ActiveMQ's own JMS client, as
 * JmsTemplate.sendAndReceive or a Camel InOut exchange does it (persistent
 * messages, JMS's default), for tests of request/reply across a network of
 * brokers.
 *
 *   java RequestReply respond URL QUEUE IDLE_MS [N]
 *       answers every request on QUEUE (printing "REQUEST replyTo=<JMSReplyTo>")
 *       with "reply to BODY" sent to its
 *       JMSReplyTo (JMSCorrelationID = the request's JMSCorrelationID, or
 *       its JMSMessageID if it has none); prints
 *       "READY" once the consumer exists, "FAIL <error>" for each reply that
 *       could not be sent, and "RESPONDED n FAILED f" once no request came
 *       for IDLE_MS after the last one (or for 60 s before the first), or
 *       once N requests came: a test that knows how many to expect waits
 *       for them, not for a silence that a slow machine can break.
 *   java RequestReply request URL QUEUE N TIMEOUT_MS MODE
 *       sends N requests "request I" to QUEUE, each waiting up to TIMEOUT_MS
 *       for its reply on a temporary destination, and prints "REPLIES r
 *       TIMEOUTS t" (then "OK") at the end. Each request carries
 *       JMSCorrelationID "req-I", which its reply must carry back. It stops early after 5 timeouts
 *       in a row. MODE says where replies go:
 *         shared      one temporary queue for all requests;
 *         perrequest  a temporary queue per request on one connection,
 *                     deleted after its reply (JmsTemplate on a caching
 *                     connection factory);
 *         connection  a new connection, session and temporary queue per
 *                     request, closed after its reply (JmsTemplate on a
 *                     plain connection factory);
 *         topic       a temporary topic per request, deleted after.
 */
public class RequestReply {
    public static void main(String[] args) throws Exception {
        ConnectionFactory cf = new ActiveMQConnectionFactory(args[1]);
        if (args[0].equals("respond")) {
            respond(cf, args[2], Long.parseLong(args[3]), args.length > 4 ? Integer.parseInt(args[4]) : Integer.MAX_VALUE);
        } else if (args[0].equals("request")) {
            request(cf, args[2], Integer.parseInt(args[3]), Long.parseLong(args[4]), args[5]);
        } else {
            throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    static void respond(ConnectionFactory cf, String queue, long idle, int want) throws Exception {
        Connection conn = cf.createConnection();
        conn.start();
        try {
            Session s = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer c = s.createConsumer(s.createQueue(queue));
            MessageProducer p = s.createProducer(null);
            System.out.println("READY");
            System.out.flush();
            int responded = 0, failed = 0;
            Message m;
            // The first request may take a while (the requester's JVM
            // starts after READY); the idle time counts after it.
            long wait = Math.max(idle, 60000);
            while (responded + failed < want && (m = c.receive(wait)) != null) {
                wait = idle;
                System.out.println("REQUEST replyTo=" + m.getJMSReplyTo());
                String body = m instanceof TextMessage ? ((TextMessage) m).getText() : m.getClass().getSimpleName();
                TextMessage r = s.createTextMessage("reply to " + body);
                // The request's own correlation id if it has one, else its id.
                r.setJMSCorrelationID(m.getJMSCorrelationID() != null ? m.getJMSCorrelationID() : m.getJMSMessageID());
                try {
                    p.send(m.getJMSReplyTo(), r);
                    responded++;
                } catch (JMSException | RuntimeException e) {
                    failed++;
                    System.out.println("FAIL " + e.getMessage());
                }
                System.out.flush();
            }
            System.out.println("RESPONDED " + responded + " FAILED " + failed);
        } finally {
            conn.close();
        }
    }

    static void request(ConnectionFactory cf, String queue, int n, long timeout, String mode) throws Exception {
        Connection shared = null;
        Session ss = null;
        Destination sharedReply = null;
        MessageConsumer sharedConsumer = null;
        if (!mode.equals("connection")) {
            shared = cf.createConnection();
            shared.start();
            ss = shared.createSession(false, Session.AUTO_ACKNOWLEDGE);
            if (mode.equals("shared")) {
                sharedReply = ss.createTemporaryQueue();
                sharedConsumer = ss.createConsumer(sharedReply);
            }
        }
        int replies = 0, timeouts = 0, inARow = 0;
        try {
            for (int i = 0; i < n && inARow < 5; i++) {
                Connection conn = shared;
                Session s = ss;
                if (mode.equals("connection")) {
                    conn = cf.createConnection();
                    conn.start();
                    s = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
                }
                Destination reply = sharedReply;
                MessageConsumer c = sharedConsumer;
                if (reply == null) {
                    reply = mode.equals("topic") ? s.createTemporaryTopic() : s.createTemporaryQueue();
                    c = s.createConsumer(reply);
                }
                MessageProducer p = s.createProducer(s.createQueue(queue));
                TextMessage req = s.createTextMessage("request " + i);
                req.setJMSReplyTo(reply);
                String want = "req-" + i;
                req.setJMSCorrelationID(want);
                p.send(req);
                Message r;
                // A late reply to an earlier request on a shared queue is skipped.
                while ((r = c.receive(timeout)) != null && !want.equals(r.getJMSCorrelationID())) {
                }
                if (r != null) {
                    replies++;
                    inARow = 0;
                } else {
                    timeouts++;
                    inARow++;
                    System.out.println("TIMEOUT request " + i);
                    System.out.flush();
                }
                p.close();
                if (reply != sharedReply) {
                    c.close();
                    if (reply instanceof TemporaryQueue) {
                        ((TemporaryQueue) reply).delete();
                    } else {
                        ((TemporaryTopic) reply).delete();
                    }
                }
                if (conn != shared) {
                    conn.close();
                }
            }
        } finally {
            if (shared != null) {
                shared.close();
            }
        }
        System.out.println("REPLIES " + replies + " TIMEOUTS " + timeouts);
        System.out.println("OK");
    }
}
