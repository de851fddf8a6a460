import javax.jms.*;
import org.apache.activemq.ActiveMQConnectionFactory;

/**
 * A JMS producer and consumer on ActiveMQ's own OpenWire client, for tests
 * of what JMS applications see across a brokernet link.
 *
 *   java Jms produce URL DEST N [persistent|nonpersistent]
 *       sends N text messages "body I" with int property "i" = I, prints
 *       "ID <JMSMessageID>" for each, then "SENT N".
 *   java Jms consume URL DEST SELECTOR IDLE_MS [N]
 *       prints "MSG id=<JMSMessageID> i=<i> dest=<JMSDestination>" for each
 *       message, then "COUNT n" once N messages arrived, or (fewer) once no
 *       message arrived for IDLE_MS (after the first "READY" line, printed
 *       once the consumer exists). A test that knows how many to expect
 *       gives N and a long IDLE_MS: it waits for the messages, not for a
 *       silence that a slow machine can break.
 *
 * DEST is "queue://NAME" or "topic://NAME" (a bare NAME is a queue); an
 * empty SELECTOR is none.
 */
public class Jms {
    static Destination dest(Session s, String d) throws JMSException {
        if (d.startsWith("topic://")) return s.createTopic(d.substring(8));
        if (d.startsWith("queue://")) return s.createQueue(d.substring(8));
        return s.createQueue(d);
    }

    public static void main(String[] args) throws Exception {
        ConnectionFactory cf = new ActiveMQConnectionFactory(args[1]);
        Connection conn = cf.createConnection();
        conn.start();
        Session s = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Destination d = dest(s, args[2]);
        try {
            if (args[0].equals("produce")) {
                MessageProducer p = s.createProducer(d);
                boolean persistent = args.length < 5 || !args[4].equals("nonpersistent");
                p.setDeliveryMode(persistent ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT);
                int n = Integer.parseInt(args[3]);
                for (int i = 0; i < n; i++) {
                    TextMessage m = s.createTextMessage("body " + i);
                    m.setIntProperty("i", i);
                    p.send(m);
                    System.out.println("ID " + m.getJMSMessageID());
                }
                System.out.println("SENT " + n);
            } else if (args[0].equals("consume")) {
                String sel = args[3].isEmpty() ? null : args[3];
                MessageConsumer c = s.createConsumer(d, sel);
                System.out.println("READY");
                System.out.flush();
                long idle = Long.parseLong(args[4]);
                int want = args.length > 5 ? Integer.parseInt(args[5]) : Integer.MAX_VALUE;
                int count = 0;
                Message m;
                while (count < want && (m = c.receive(idle)) != null) {
                    count++;
                    System.out.println("MSG id=" + m.getJMSMessageID() + " i=" + m.getObjectProperty("i") + " dest=" + m.getJMSDestination());
                }
                System.out.println("COUNT " + count);
            } else {
                throw new IllegalArgumentException("unknown command " + args[0]);
            }
        } finally {
            conn.close();
        }
    }
}
