import java.lang.reflect.*;
import java.util.*;

// Prints, as one line of JSON, the dynamic broker config sets of the Kafka jars on the classpath
// (read by reflection, so they are exactly what that Kafka build uses). Run by capture.py:
//   java -cp "$HOME/.cache/strand/kafka-4.4.0/libs/*" DumpDynamicConfigs.java
public class DumpDynamicConfigs {
    static Object stat(String cls, String field) throws Exception {
        Field f = Class.forName(cls).getDeclaredField(field);
        f.setAccessible(true);
        return f.get(null);
    }
    static String q(String s) { return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\""; }
    static String arr(Collection<?> c) {
        List<String> l = new ArrayList<>();
        for (Object o : c) l.add(String.valueOf(o));
        Collections.sort(l);
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < l.size(); i++) { if (i > 0) b.append(","); b.append(q(l.get(i))); }
        return b.append("]").toString();
    }
    @SuppressWarnings("unchecked")
    public static void main(String[] a) throws Exception {
        String D = "org.apache.kafka.server.config.DynamicBrokerConfig";
        String[][] sets = {
            {"DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS", D, "ALL_DYNAMIC_CONFIGS"},
            {"DynamicBrokerConfig.PER_BROKER_CONFIGS", D, "PER_BROKER_CONFIGS"},
            {"DynamicBrokerConfig.CLUSTER_LEVEL_LISTENER_CONFIGS", D, "CLUSTER_LEVEL_LISTENER_CONFIGS"},
            {"DynamicBrokerConfig.DYNAMIC_SECURITY_CONFIGS (SslConfigs.RECONFIGURABLE_CONFIGS)", D, "DYNAMIC_SECURITY_CONFIGS"},
            {"DynamicBrokerConfig.DYNAMIC_PRODUCER_STATE_MANAGER_CONFIGS", D, "DYNAMIC_PRODUCER_STATE_MANAGER_CONFIGS"},
            {"DynamicBrokerConfig.LISTENER_MECHANISM_CONFIGS", D, "LISTENER_MECHANISM_CONFIGS"},
            {"DynamicBrokerConfig.DynamicLogConfig.RECONFIGURABLE_CONFIGS", D + "$DynamicLogConfig", "RECONFIGURABLE_CONFIGS"},
            {"DynamicBrokerConfig.DynamicReplicationConfig.RECONFIGURABLE_CONFIGS", D + "$DynamicReplicationConfig", "RECONFIGURABLE_CONFIGS"},
            {"DynamicBrokerConfig.DynamicQuotaConfig.RECONFIGURABLE_CONFIGS", D + "$DynamicQuotaConfig", "RECONFIGURABLE_CONFIGS"},
            {"DynamicBrokerConfig.DynamicListenerConfig.RECONFIGURABLE_CONFIGS", D + "$DynamicListenerConfig", "RECONFIGURABLE_CONFIGS"},
            {"DynamicBrokerConfig.DynamicRemoteLogConfig.RECONFIGURABLE_CONFIGS", D + "$DynamicRemoteLogConfig", "RECONFIGURABLE_CONFIGS"},
            {"LogCleaner.RECONFIGURABLE_CONFIGS", "org.apache.kafka.storage.internals.log.LogCleaner", "RECONFIGURABLE_CONFIGS"},
            {"DynamicThreadPool.RECONFIGURABLE_CONFIGS", "org.apache.kafka.server.DynamicThreadPool", "RECONFIGURABLE_CONFIGS"},
            {"SocketServer.RECONFIGURABLE_CONFIGS", "org.apache.kafka.network.SocketServer", "RECONFIGURABLE_CONFIGS"},
            {"GroupCoordinatorConfig.RECONFIGURABLE_CONFIGS", "org.apache.kafka.coordinator.group.GroupCoordinatorConfig", "RECONFIGURABLE_CONFIGS"},
            {"ShareCoordinatorConfig.RECONFIGURABLE_CONFIGS", "org.apache.kafka.coordinator.share.ShareCoordinatorConfig", "RECONFIGURABLE_CONFIGS"},
        };
        StringBuilder out = new StringBuilder("{\"sets\":{");
        boolean first = true;
        for (String[] s : sets) {
            Object v;
            try { v = stat(s[1], s[2]); } catch (Throwable t) { v = null; System.err.println(s[0] + ": " + t); }
            if (!first) out.append(",");
            first = false;
            out.append(q(s[0])).append(":").append(v == null ? "null" : arr((Collection<?>) v));
        }
        out.append("},\"dynamicConfigUpdateModes\":{");
        Map<String, String> modes = new TreeMap<>((Map<String, String>) Class.forName(D).getMethod("dynamicConfigUpdateModes").invoke(null));
        first = true;
        for (Map.Entry<String, String> e : modes.entrySet()) {
            if (!first) out.append(",");
            first = false;
            out.append(q(e.getKey())).append(":").append(q(e.getValue()));
        }
        out.append("},\"DynamicConfig.Broker.names\":");
        out.append(arr((Collection<?>) Class.forName("org.apache.kafka.server.config.DynamicConfig$Broker").getMethod("names").invoke(null)));
        out.append(",\"DynamicConfig.Broker.nonDynamicProps\":");
        out.append(arr((Collection<?>) Class.forName("org.apache.kafka.server.config.DynamicConfig$Broker").getMethod("nonDynamicProps").invoke(null)));
        out.append("}");
        System.out.println(out);
    }
}
