import java.io.File;
import javax.jms.*;
import org.apache.activemq.ActiveMQConnectionFactory;

/**
 * JMS consumers with ActiveMQ's consumer flags, and a producer of message
 * groups, on ActiveMQ's own OpenWire client: tests of what a JMS application
 * sees of exclusive, noLocal and retroactive consumers, message groups and
 * virtual topics across brokers.
 *
 *   java Flags produce URL DEST N [from=K] [groups=G] [nonpersistent]
 *       sends N text messages with int property "i" = K..K+N-1 (K defaults
 *       to 0), JMSXGroupID "g<i mod G>" when groups is given, then prints
 *       "SENT N".
 *   java Flags consume URL DEST [exclusive] [nolocal] [retroactive]
 *                               [selector=S] [idle=MS] [stop=FILE] [self=N]
 *       prints "READY" once the consumer exists, then for each message
 *       "MSG i=<i> group=<JMSXGroupID> id=<JMSMessageID>", and "COUNT n" when
 *       it stops: once FILE exists (checked every 50 ms), or once no message
 *       arrived for MS (default 3000) when no FILE is given. exclusive and
 *       retroactive are the destination options consumer.exclusive and
 *       consumer.retroactive; nolocal is createConsumer's noLocal. self=N
 *       makes the consumer's own connection send N messages to DEST after
 *       READY (i = 1000000..), which a noLocal consumer must not receive; it
 *       prints "SELF N" after them.
 *
 * DEST is "queue://NAME" or "topic://NAME" (a bare NAME is a queue).
 */
public class Flags {
    static Destination dest(Session s, String d, String options) throws JMSException {
        boolean topic = d.startsWith("topic://");
        String name = d.startsWith("topic://") || d.startsWith("queue://") ? d.substring(8) : d;
        if (!options.isEmpty()) name += "?" + options;
        return topic ? s.createTopic(name) : s.createQueue(name);
    }

    static String opt(String[] args, int from, String key, String def) {
        for (int i = from; i < args.length; i++) {
            if (args[i].equals(key)) return "true";
            if (args[i].startsWith(key + "=")) return args[i].substring(key.length() + 1);
        }
        return def;
    }

    public static void main(String[] args) throws Exception {
        ConnectionFactory cf = new ActiveMQConnectionFactory(args[1]);
        Connection conn = cf.createConnection();
        conn.start();
        try {
            if (args[0].equals("produce")) {
                produce(conn, args);
            } else if (args[0].equals("consume")) {
                consume(conn, args);
            } else {
                throw new IllegalArgumentException("unknown command " + args[0]);
            }
        } finally {
            conn.close();
        }
    }

    static void produce(Connection conn, String[] args) throws JMSException {
        Session s = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageProducer p = s.createProducer(dest(s, args[2], ""));
        p.setDeliveryMode(opt(args, 4, "nonpersistent", null) != null ? DeliveryMode.NON_PERSISTENT : DeliveryMode.PERSISTENT);
        int n = Integer.parseInt(args[3]);
        int from = Integer.parseInt(opt(args, 4, "from", "0"));
        int groups = Integer.parseInt(opt(args, 4, "groups", "0"));
        for (int i = from; i < from + n; i++) {
            TextMessage m = s.createTextMessage("body " + i);
            m.setIntProperty("i", i);
            if (groups > 0) m.setStringProperty("JMSXGroupID", "g" + (i % groups));
            p.send(m);
        }
        System.out.println("SENT " + n);
    }

    static void consume(Connection conn, String[] args) throws Exception {
        Session s = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
        StringBuilder options = new StringBuilder();
        if (opt(args, 3, "exclusive", null) != null) options.append("consumer.exclusive=true");
        if (opt(args, 3, "retroactive", null) != null) {
            if (options.length() > 0) options.append("&");
            options.append("consumer.retroactive=true");
        }
        Destination d = dest(s, args[2], options.toString());
        String sel = opt(args, 3, "selector", null);
        boolean noLocal = opt(args, 3, "nolocal", null) != null;
        MessageConsumer c = s.createConsumer(d, sel, noLocal);
        System.out.println("READY");
        System.out.flush();
        int self = Integer.parseInt(opt(args, 3, "self", "0"));
        if (self > 0) {
            Session ps = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer p = ps.createProducer(dest(ps, args[2], ""));
            for (int i = 0; i < self; i++) {
                TextMessage m = ps.createTextMessage("self " + i);
                m.setIntProperty("i", 1000000 + i);
                p.send(m);
            }
            System.out.println("SELF " + self);
            System.out.flush();
        }
        String stop = opt(args, 3, "stop", null);
        long idle = Long.parseLong(opt(args, 3, "idle", "3000"));
        long last = System.currentTimeMillis();
        int count = 0;
        while (true) {
            Message m = c.receive(50);
            if (m != null) {
                count++;
                last = System.currentTimeMillis();
                System.out.println("MSG i=" + m.getObjectProperty("i") + " group=" + m.getStringProperty("JMSXGroupID") + " id=" + m.getJMSMessageID());
                System.out.flush();
                continue;
            }
            if (stop != null ? new File(stop).exists() : System.currentTimeMillis() - last > idle) break;
        }
        c.close();
        System.out.println("COUNT " + count);
    }
}
