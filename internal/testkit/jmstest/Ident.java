import javax.jms.*;
import org.apache.activemq.ActiveMQConnectionFactory;

/**
 * A JMS consumer for tests of message identity across a brokernet link.
 *
 *   java Ident consume URL DEST SELECTOR N MAX_MS
 *       prints "READY" once the consumer exists, then
 *       "MSG id=<JMSMessageID> i=<i> orig=<BrokernetID>" for each message
 *       until N messages arrived (N = 0: never) or MAX_MS passed since READY,
 *       then "COUNT n". BrokernetID is the property in which brokernet
 *       carries a message's original id over STOMP ("-" when absent).
 *
 * DEST is "queue://NAME" or "topic://NAME"; an empty SELECTOR is none. The
 * client's own duplicate detection (its connection's audit) is on, as it is by
 * default: what it prints is what an application sees.
 */
public class Ident {
    public static void main(String[] args) throws Exception {
        if (!args[0].equals("consume")) {
            throw new IllegalArgumentException("unknown command " + args[0]);
        }
        ConnectionFactory cf = new ActiveMQConnectionFactory(args[1]);
        Connection conn = cf.createConnection();
        conn.start();
        Session s = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
        try {
            Destination d = args[2].startsWith("topic://") ? s.createTopic(args[2].substring(8))
                    : s.createQueue(args[2].startsWith("queue://") ? args[2].substring(8) : args[2]);
            MessageConsumer c = s.createConsumer(d, args[3].isEmpty() ? null : args[3]);
            System.out.println("READY");
            System.out.flush();
            int n = Integer.parseInt(args[4]);
            long end = System.currentTimeMillis() + Long.parseLong(args[5]);
            int count = 0;
            StringBuilder b = new StringBuilder();
            while (n == 0 || count < n) {
                long left = end - System.currentTimeMillis();
                if (left <= 0) break;
                Message m = c.receive(left);
                if (m == null) break;
                count++;
                Object orig = m.getObjectProperty("BrokernetID");
                b.setLength(0);
                b.append("MSG id=").append(m.getJMSMessageID()).append(" i=").append(m.getObjectProperty("i"))
                        .append(" orig=").append(orig == null ? "-" : orig);
                System.out.println(b);
            }
            System.out.println("COUNT " + count);
        } finally {
            conn.close();
        }
    }
}
