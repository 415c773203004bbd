package dev.memoryd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.gson.Gson;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.Descriptors.MethodDescriptor;
import com.google.protobuf.Descriptors.ServiceDescriptor;
import com.google.protobuf.Message;
import com.google.protobuf.util.JsonFormat;
import dev.memoryd.v1.BuildContextRequest;
import dev.memoryd.v1.CaptureRequest;
import dev.memoryd.v1.ExportRequest;
import dev.memoryd.v1.ForgetRequest;
import dev.memoryd.v1.GetRequest;
import dev.memoryd.v1.GetResponse;
import dev.memoryd.v1.Hooks;
import dev.memoryd.v1.ImportRequest;
import dev.memoryd.v1.ListConflictsRequest;
import dev.memoryd.v1.ListRequest;
import dev.memoryd.v1.Memory;
import dev.memoryd.v1.MemoryOuterClass;
import dev.memoryd.v1.RecallRequest;
import dev.memoryd.v1.StatsRequest;
import dev.memoryd.v1.StoreRequest;
import dev.memoryd.v1.StreamRequest;
import dev.memoryd.v1.StreamResponse;
import dev.memoryd.v1.UpdateRequest;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.TestInstance;

/**
 * The conformance scenarios (../../tests/conformance/scenarios.json) through this client,
 * against a real daemon started with auth on. The interpreter of the scenario language is the
 * Java copy of tests/conformance/README.md's rules.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ConformanceTest {
  private static final Gson GSON = new Gson();
  private static final Pattern VAR = Pattern.compile("\\$\\{([A-Za-z0-9_]+)\\}");
  private static final Pattern SEGMENT = Pattern.compile("^([^\\[\\]]*)((?:\\[(?:\\d+|\\*)\\])*)$");
  private static final Pattern INDEX = Pattern.compile("\\[(\\d+|\\*)\\]");

  private Map<String, Object> doc;
  private TestDaemon daemon;
  private final Map<String, MemorydClient> clients = new HashMap<>();

  private static String fromEnv(String name, String fallback) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? fallback : v;
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> load() throws Exception {
    String path =
        fromEnv("MEMORYD_CONFORMANCE_SCENARIOS", "../../tests/conformance/scenarios.json");
    return GSON.fromJson(Files.readString(Path.of(path)), Map.class);
  }

  @SuppressWarnings("unchecked")
  private static List<Map<String, Object>> list(Object o) {
    return o == null ? List.of() : (List<Map<String, Object>>) o;
  }

  @Test
  void everyRpcOfTheProtoHasAScenario() throws Exception {
    Set<String> covered = new TreeSet<>();
    for (Map<String, Object> s : list(load().get("scenarios"))) {
      for (Map<String, Object> st : list(s.get("steps"))) {
        covered.add((String) st.get("rpc"));
      }
    }
    Set<String> rpcs = new TreeSet<>();
    for (FileDescriptor fd : List.of(MemoryOuterClass.getDescriptor(), Hooks.getDescriptor())) {
      for (ServiceDescriptor svc : fd.getServices()) {
        for (MethodDescriptor m : svc.getMethods()) {
          rpcs.add(svc.getName() + "." + m.getName());
        }
      }
    }
    assertFalse(rpcs.isEmpty());
    Set<String> missing = new TreeSet<>(rpcs);
    missing.removeAll(covered);
    assertTrue(missing.isEmpty(), "RPCs without a conformance scenario: " + missing);
    Set<String> unknown = new TreeSet<>(covered);
    unknown.removeAll(rpcs);
    assertTrue(unknown.isEmpty(), "scenarios name RPCs the proto lacks: " + unknown);
  }

  @BeforeAll
  void startDaemon() throws Exception {
    doc = load();
    String token = (String) doc.get("auth_token");
    daemon = new TestDaemon(Map.of("MEMORYD_AUTH_TOKEN", token), false);
    Map<String, String> tokens = new LinkedHashMap<>();
    tokens.put("default", token);
    tokens.put("no_token", null);
    tokens.put("wrong_token", "wrong-token");
    for (var e : tokens.entrySet()) {
      clients.put(
          e.getKey(),
          MemorydClient.builder()
              .address(daemon.address)
              .token(e.getValue())
              .timeout(Duration.ofSeconds(30))
              .build());
    }
  }

  @AfterAll
  void stopDaemon() throws Exception {
    clients.values().forEach(MemorydClient::close);
    if (daemon != null) {
      assertEquals(0, daemon.stop(), "memoryd's exit code on SIGTERM");
    }
  }

  @TestFactory
  List<DynamicTest> conformance() {
    List<DynamicTest> tests = new ArrayList<>();
    for (Map<String, Object> s : list(doc.get("scenarios"))) {
      tests.add(DynamicTest.dynamicTest((String) s.get("name"), () -> runScenario(s)));
    }
    return tests;
  }

  @SuppressWarnings("unchecked")
  private void runScenario(Map<String, Object> scenario) throws Exception {
    Map<String, Object> vars = new HashMap<>();
    int n = 0;
    for (Map<String, Object> st : list(scenario.get("steps"))) {
      String rpc = (String) st.get("rpc");
      String where = "step " + n++ + " (" + rpc + ")";
      MemorydClient c = clients.get((String) st.getOrDefault("client", "default"));
      Object result = null;
      String code = "OK";
      String message = "";
      try {
        if (st.containsKey("requests")) {
          result = streaming(c, rpc, (List<Object>) substitute(st.get("requests"), vars));
        } else {
          result = unary(c, rpc, substitute(st.get("request"), vars));
        }
      } catch (MemorydException e) {
        code = e.codeName();
        message = e.daemonMessage();
      }
      String want = (String) st.getOrDefault("code", "OK");
      assertEquals(want, code, where + ": " + message);
      String part = (String) st.get("message_contains");
      if (part != null) {
        assertTrue(
            message.toLowerCase().contains(part.toLowerCase()),
            where + ": message " + message + " lacks " + part);
      }
      for (Object spec : (List<Object>) st.getOrDefault("checks", List.of())) {
        String problem = check(result, (Map<String, Object>) substitute(spec, vars));
        if (problem != null) {
          fail(where + ": " + problem + "\n" + GSON.toJson(result));
        }
      }
      for (var save : ((Map<String, String>) st.getOrDefault("save", Map.of())).entrySet()) {
        Object v = resolve(result, save.getValue());
        assertTrue(v != null && !"".equals(v), where + ": nothing at " + save.getValue());
        vars.put(save.getKey(), v);
      }
    }
  }

  @SuppressWarnings("unchecked")
  private static <B extends Message.Builder> B parse(Object json, B builder) throws Exception {
    JsonFormat.parser().merge(GSON.toJson(json), builder);
    return builder;
  }

  private static Object toJson(Message m) throws Exception {
    String text = JsonFormat.printer().alwaysPrintFieldsWithNoPresence().print(m);
    return GSON.fromJson(text, Object.class);
  }

  private static Object unary(MemorydClient c, String rpc, Object req) throws Exception {
    switch (rpc) {
      case "MemoryService.Store":
        return toJson(c.store(parse(req, StoreRequest.newBuilder()).build()));
      case "MemoryService.Recall":
        return toJson(c.recall(parse(req, RecallRequest.newBuilder()).build()));
      case "MemoryService.Forget":
        return toJson(c.forget(parse(req, ForgetRequest.newBuilder()).build()));
      case "MemoryService.Update":
        return toJson(c.update(parse(req, UpdateRequest.newBuilder()).build()));
      case "MemoryService.Get":
        {
          GetRequest r = parse(req, GetRequest.newBuilder()).build();
          Memory m = c.get(r.getAgentId(), r.getId());
          return toJson(GetResponse.newBuilder().setMemory(m).build());
        }
      case "MemoryService.List":
        return toJson(c.list(parse(req, ListRequest.newBuilder()).build()));
      case "MemoryService.Stats":
        return toJson(c.stats(parse(req, StatsRequest.newBuilder()).getAgentId()));
      case "MemoryService.ListConflicts":
        return toJson(c.listConflicts(parse(req, ListConflictsRequest.newBuilder()).build()));
      case "MemoryService.Export":
        {
          List<Object> memories = new ArrayList<>();
          Iterator<Memory> it = c.export(parse(req, ExportRequest.newBuilder()).build());
          while (it.hasNext()) {
            memories.add(toJson(it.next()));
          }
          return Map.of("memories", memories);
        }
      case "HookService.BuildContext":
        return toJson(c.buildContext(parse(req, BuildContextRequest.newBuilder()).build()));
      case "HookService.Capture":
        return toJson(c.capture(parse(req, CaptureRequest.newBuilder()).build()));
      default:
        throw new AssertionError("the Java runner does not know " + rpc);
    }
  }

  private static Object streaming(MemorydClient c, String rpc, List<Object> reqs)
      throws Exception {
    if (rpc.equals("MemoryService.Import")) {
      String agent = null;
      List<Memory> memories = new ArrayList<>();
      for (Object r : reqs) {
        ImportRequest ir = parse(r, ImportRequest.newBuilder()).build();
        agent = ir.getAgentId();
        memories.add(ir.getMemory());
      }
      return toJson(c.importMemories(agent, memories));
    }
    if (rpc.equals("MemoryService.Stream")) {
      try (Session session = c.stream()) {
        for (Object r : reqs) {
          session.send(parse(r, StreamRequest.newBuilder()).build());
        }
        session.closeSend();
        Map<String, Object> responses = new LinkedHashMap<>();
        for (StreamResponse resp = session.recv(); resp != null; resp = session.recv()) {
          responses.put(resp.getRequestId(), toJson(resp));
        }
        return Map.of("responses", responses);
      }
    }
    throw new AssertionError("the Java runner does not know " + rpc);
  }

  @SuppressWarnings("unchecked")
  private static Object substitute(Object value, Map<String, Object> vars) {
    if (value instanceof String s) {
      Matcher m = VAR.matcher(s);
      StringBuilder out = new StringBuilder();
      while (m.find()) {
        Object v = vars.get(m.group(1));
        if (v == null) {
          throw new AssertionError("${" + m.group(1) + "} was never saved");
        }
        m.appendReplacement(out, Matcher.quoteReplacement(String.valueOf(v)));
      }
      m.appendTail(out);
      return out.toString();
    }
    if (value instanceof List<?> l) {
      List<Object> out = new ArrayList<>();
      l.forEach(v -> out.add(substitute(v, vars)));
      return out;
    }
    if (value instanceof Map<?, ?> mp) {
      Map<String, Object> out = new LinkedHashMap<>();
      ((Map<String, Object>) mp).forEach((k, v) -> out.put(k, substitute(v, vars)));
      return out;
    }
    return value;
  }

  /** The value at path; null when absent; a list when the path has [*]. */
  static Object resolve(Object doc, String path) {
    List<Object> values = new ArrayList<>();
    values.add(doc);
    boolean wild = false;
    for (String part : path.split("\\.")) {
      Matcher m = SEGMENT.matcher(part);
      if (!m.matches()) {
        throw new AssertionError("bad path " + path);
      }
      List<Object> next = new ArrayList<>();
      for (Object v : values) {
        if (!m.group(1).isEmpty()) {
          v = v instanceof Map<?, ?> mp ? mp.get(m.group(1)) : null;
        }
        next.add(v);
      }
      Matcher idx = INDEX.matcher(m.group(2));
      while (idx.find()) {
        List<Object> expanded = new ArrayList<>();
        for (Object v : next) {
          if (!(v instanceof List<?> l)) {
            expanded.add(null);
          } else if (idx.group(1).equals("*")) {
            wild = true;
            expanded.addAll(l);
          } else {
            int i = Integer.parseInt(idx.group(1));
            expanded.add(i < l.size() ? l.get(i) : null);
          }
        }
        next = expanded;
      }
      values = next;
    }
    if (wild) {
      values.removeIf(v -> v == null);
      return values;
    }
    return values.get(0);
  }

  private static Double number(Object v) {
    if (v == null) {
      return 0.0;
    }
    if (v instanceof Number n) {
      return n.doubleValue();
    }
    if (v instanceof String s) {
      try {
        return Double.parseDouble(s);
      } catch (NumberFormatException e) {
        return null;
      }
    }
    return null;
  }

  static boolean same(Object actual, Object expected) {
    if (expected == null) {
      return actual == null;
    }
    if (expected instanceof Boolean e) {
      return e.equals(actual == null ? Boolean.FALSE : actual);
    }
    if (expected instanceof Number e) {
      Double a = number(actual);
      double x = e.doubleValue();
      return a != null && Math.abs(a - x) <= 1e-6 + 1e-5 * Math.abs(x);
    }
    if (expected instanceof String e) {
      return actual == null ? e.isEmpty() : e.equals(actual);
    }
    if (expected instanceof List<?> e) {
      Object a0 = actual == null ? List.of() : actual;
      if (!(a0 instanceof List<?> a) || a.size() != e.size()) {
        return false;
      }
      for (int i = 0; i < e.size(); i++) {
        if (!same(a.get(i), e.get(i))) {
          return false;
        }
      }
      return true;
    }
    if (expected instanceof Map<?, ?> e) {
      Object a0 = actual == null ? Map.of() : actual;
      if (!(a0 instanceof Map<?, ?> a) || a.size() != e.size()) {
        return false;
      }
      for (var entry : e.entrySet()) {
        if (!same(a.get(entry.getKey()), entry.getValue())) {
          return false;
        }
      }
      return true;
    }
    return expected.equals(actual);
  }

  private static boolean contains(Object actual, Object expected) {
    if (actual instanceof String a) {
      return expected instanceof String e && a.contains(e);
    }
    if (actual instanceof List<?> a) {
      return a.stream().anyMatch(v -> same(v, expected));
    }
    return false;
  }

  private static int length(Object v) {
    if (v instanceof List<?> l) {
      return l.size();
    }
    if (v instanceof Map<?, ?> m) {
      return m.size();
    }
    if (v instanceof String s) {
      return s.length();
    }
    return 0;
  }

  /** null when spec holds on result, else what is wrong. */
  static String check(Object result, Map<String, Object> spec) {
    String path = (String) spec.get("path");
    Object actual = resolve(result, path);
    for (var e : spec.entrySet()) {
      Object want = e.getValue();
      boolean ok;
      switch (e.getKey()) {
        case "path":
          continue;
        case "eq":
          ok = same(actual, want);
          break;
        case "ne":
          ok = !same(actual, want);
          break;
        case "len":
          ok = length(actual) == ((Number) want).intValue();
          break;
        case "contains":
          ok = contains(actual, want);
          break;
        case "excludes":
          ok = !contains(actual, want);
          break;
        case "gte":
        case "lte":
          {
            Double a = number(actual);
            double w = ((Number) want).doubleValue();
            ok = a != null && (e.getKey().equals("gte") ? a >= w : a <= w);
            break;
          }
        default:
          return "unknown check operator " + e.getKey();
      }
      if (!ok) {
        return path + " " + e.getKey() + " " + GSON.toJson(want) + " failed: got "
            + GSON.toJson(actual);
      }
    }
    return null;
  }
}
