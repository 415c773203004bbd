package dev.memoryd.client;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * Routing over a fleet of daemons ({@link MemorydClient.Builder#addresses}): which daemon serves
 * an agent.
 *
 * <p>Agent affinity is rendezvous (highest random weight) hashing, the same rule in every memoryd
 * client (Python, TypeScript, Go, Rust, Java; checked against tests/data/routing_vectors.json),
 * so a host mixing languages sends one agent to one daemon and that daemon's caches stay warm:
 *
 * <ul>
 *   <li>an address is taken as given, without a leading {@code http://} or {@code https://} and
 *       a trailing {@code /};
 *   <li>its weight for an agent is the first 8 bytes of SHA-256(address UTF-8 || 0x00 || agentId
 *       UTF-8), a big-endian unsigned 64-bit integer;
 *   <li>the agent's order is every address by weight, highest first (ties: the smaller address
 *       first, by bytes).
 * </ul>
 */
public final class Routing {
  private Routing() {}

  /** The address as hashed: without an http:// or https:// prefix or a trailing "/". */
  public static String normalAddress(String address) {
    String rest = address;
    for (String scheme : new String[] {"http://", "https://"}) {
      if (rest.regionMatches(true, 0, scheme, 0, scheme.length())) {
        rest = rest.substring(scheme.length());
        break;
      }
    }
    int end = rest.length();
    while (end > 0 && rest.charAt(end - 1) == '/') {
      end--;
    }
    return rest.substring(0, end);
  }

  /** The 8-byte rendezvous weight of {@code address} for {@code agentId} (compare as bytes). */
  public static byte[] weight(String address, String agentId) {
    MessageDigest sha;
    try {
      sha = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JVM has SHA-256", e);
    }
    sha.update(normalAddress(address).getBytes(StandardCharsets.UTF_8));
    sha.update((byte) 0);
    sha.update(agentId.getBytes(StandardCharsets.UTF_8));
    return Arrays.copyOf(sha.digest(), 8);
  }

  /** Indexes into {@code addresses}: the agent's order, first choice first. */
  public static int[] rendezvousOrder(List<String> addresses, String agentId) {
    List<Integer> order = new ArrayList<>();
    byte[][] weights = new byte[addresses.size()][];
    byte[][] names = new byte[addresses.size()][];
    for (int i = 0; i < addresses.size(); i++) {
      order.add(i);
      weights[i] = weight(addresses.get(i), agentId);
      names[i] = normalAddress(addresses.get(i)).getBytes(StandardCharsets.UTF_8);
    }
    Comparator<Integer> byWeight =
        (a, b) -> Arrays.compareUnsigned(weights[b], weights[a]); // highest first
    order.sort(byWeight.thenComparing((a, b) -> Arrays.compareUnsigned(names[a], names[b])));
    return order.stream().mapToInt(Integer::intValue).toArray();
  }

  /** A fresh key for a store or capture that has none: a random UUID. */
  static String newIdempotencyKey() {
    return UUID.randomUUID().toString();
  }

  /** Refuses two entries that name one daemon. */
  static void checkAddresses(List<String> addresses) {
    Map<String, String> seen = new HashMap<>();
    for (String a : addresses) {
      String before = seen.putIfAbsent(normalAddress(a), a);
      if (before != null) {
        throw new IllegalArgumentException(
            "addresses " + before + " and " + a + " name the same daemon");
      }
    }
  }

  /** Which daemons failed lately. */
  static final class Fleet {
    private final List<String> addresses;
    private final long downForNanos;
    private final long[] downUntil; // System.nanoTime() values, where down[i]
    private final boolean[] down;

    Fleet(List<String> addresses, long downForNanos) {
      this.addresses = addresses;
      this.downForNanos = downForNanos;
      this.downUntil = new long[addresses.size()];
      this.down = new boolean[addresses.size()];
    }

    private boolean isDown(int i, long now) {
      return down[i] && downUntil[i] - now > 0;
    }

    /** The agent's order with the daemons marked down moved to the end. */
    synchronized int[] order(String agentId) {
      int[] order = rendezvousOrder(addresses, agentId);
      long now = System.nanoTime();
      int[] out = new int[order.length];
      int n = 0;
      for (int i : order) {
        if (!isDown(i, now)) {
          out[n++] = i;
        }
      }
      for (int i : order) {
        if (isDown(i, now)) {
          out[n++] = i;
        }
      }
      return out;
    }

    synchronized void markDown(int i) {
      down[i] = true;
      downUntil[i] = System.nanoTime() + downForNanos;
    }

    synchronized void markUp(int i) {
      down[i] = false;
    }
  }
}
