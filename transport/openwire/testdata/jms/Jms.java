import javax.jms.*;
import java.util.Enumeration;
import org.apache.activemq.ActiveMQConnectionFactory;

/**
 * A JMS producer and consumer on ActiveMQ's own OpenWire client, for the
 * fidelity test of brokernet's OpenWire transport.
 *
 *   java Jms produce URL QUEUE N
 *   java Jms consume URL QUEUE SELECTOR IDLE_MS [N]
 *
 * consume prints one line per message with each property's Java type, then
 * "COUNT n" once N messages arrived, or (fewer) once no message arrived for
 * IDLE_MS: a test that knows how many to expect waits for them, not for a
 * silence that a slow machine can break.
 */
public class Jms {
    public static void main(String[] args) throws Exception {
        ConnectionFactory cf = new ActiveMQConnectionFactory(args[1]);
        Connection conn = cf.createConnection();
        conn.start();
        Session s = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = s.createQueue(args[2]);
        try {
            if (args[0].equals("produce")) {
                MessageProducer p = s.createProducer(q);
                p.setDeliveryMode(DeliveryMode.PERSISTENT);
                int n = Integer.parseInt(args[3]);
                for (int i = 0; i < n; i++) {
                    TextMessage m = s.createTextMessage("body " + i);
                    m.setIntProperty("intProp", i);
                    m.setLongProperty("longProp", 10000000000L + i);
                    m.setBooleanProperty("boolProp", i % 2 == 0);
                    m.setDoubleProperty("doubleProp", i + 0.5);
                    m.setJMSType("Quote");
                    m.setJMSCorrelationID("corr-" + i);
                    m.setJMSReplyTo(s.createQueue("replies"));
                    m.setStringProperty("JMSXGroupID", "group-" + (i % 3));
                    m.setIntProperty("JMSXGroupSeq", i + 1);
                    p.send(m, DeliveryMode.PERSISTENT, i % 10, 0);
                }
                System.out.println("SENT " + n);
            } else {
                String sel = args[3].isEmpty() ? null : args[3];
                MessageConsumer c = s.createConsumer(q, sel);
                long idle = Long.parseLong(args[4]);
                int want = args.length > 5 ? Integer.parseInt(args[5]) : Integer.MAX_VALUE;
                int count = 0;
                Message m;
                while (count < want && (m = c.receive(idle)) != null) {
                    count++;
                    StringBuilder b = new StringBuilder("MSG");
                    for (String name : new String[] {"intProp", "longProp", "boolProp", "doubleProp", "JMSXGroupID", "JMSXGroupSeq"}) {
                        Object v = m.getObjectProperty(name);
                        b.append(' ').append(name).append('=').append(v == null ? "null" : v.getClass().getSimpleName() + ":" + v);
                    }
                    b.append(" type=").append(m.getJMSType());
                    b.append(" corr=").append(m.getJMSCorrelationID());
                    b.append(" replyTo=").append(m.getJMSReplyTo());
                    b.append(" prio=").append(m.getJMSPriority());
                    b.append(" mode=").append(m.getJMSDeliveryMode());
                    b.append(" text=").append(((TextMessage) m).getText());
                    System.out.println(b);
                }
                System.out.println("COUNT " + count);
            }
        } finally {
            conn.close();
        }
    }
}
