package dev.memoryd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.Gson;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import dev.memoryd.v1.Memory;
import dev.memoryd.v1.StoreRequest;
import dev.memoryd.v1.UpdateRequest;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/** The routing rule every memoryd client shares (tests/data/routing_vectors.json), and a fleet. */
class RoutingTest {
  private static JsonObject vectors() throws Exception {
    String text = Files.readString(Path.of("../../tests/data/routing_vectors.json"));
    return new Gson().fromJson(text, JsonObject.class);
  }

  private static List<String> strings(JsonElement array) {
    List<String> out = new ArrayList<>();
    array.getAsJsonArray().forEach(e -> out.add(e.getAsString()));
    return out;
  }

  @Test
  void weightsMatchTheSharedVectors() throws Exception {
    var weights = vectors().getAsJsonArray("weights");
    assertTrue(weights.size() >= 5);
    for (JsonElement e : weights) {
      JsonObject v = e.getAsJsonObject();
      String address = v.get("address").getAsString();
      String agent = v.get("agent_id").getAsString();
      assertEquals(
          v.get("weight").getAsString(),
          HexFormat.of().formatHex(Routing.weight(address, agent)),
          address + " / " + agent);
    }
  }

  @Test
  void ordersMatchTheSharedVectors() throws Exception {
    var orders = vectors().getAsJsonArray("orders");
    assertTrue(orders.size() >= 20);
    for (JsonElement e : orders) {
      JsonObject v = e.getAsJsonObject();
      List<String> addresses = strings(v.get("addresses"));
      String agent = v.get("agent_id").getAsString();
      List<String> got = new ArrayList<>();
      for (int i : Routing.rendezvousOrder(addresses, agent)) {
        got.add(addresses.get(i));
      }
      assertEquals(strings(v.get("order")), got, agent + " over " + addresses);
    }
  }

  @Test
  void theReadmeExampleRoutesMainToTheSecondDaemonAndOneDaemonTwiceIsRefused() {
    assertEquals("10.0.0.5:50051", Routing.normalAddress("HTTP://10.0.0.5:50051/"));
    try (MemorydClient c =
        MemorydClient.builder().addresses(List.of("10.0.0.1:50051", "10.0.0.2:50051")).build()) {
      assertEquals(List.of("10.0.0.2:50051", "10.0.0.1:50051"), c.daemonsFor("main"));
    }
    MemorydException twice =
        assertThrows(
            MemorydException.class,
            () ->
                MemorydClient.builder()
                    .addresses(List.of("10.0.0.1:50051", "http://10.0.0.1:50051/"))
                    .build());
    assertEquals("INVALID_ARGUMENT", twice.codeName());
  }

  private static String closedPort() throws Exception {
    try (ServerSocket s = new ServerSocket(0)) {
      return "127.0.0.1:" + s.getLocalPort();
    }
  }

  private static String agentPreferring(List<String> fleet, String first) {
    while (true) {
      String agent = "fleet-java-" + UUID.randomUUID().toString().substring(0, 8);
      if (fleet.get(Routing.rendezvousOrder(fleet, agent)[0]).equals(first)) {
        return agent;
      }
    }
  }

  /**
   * A fleet whose first daemon refuses connections: nothing was sent there, so a store and an
   * update (which may not be sent twice once it may have reached a daemon) both go on to the
   * next daemon.
   */
  @Test
  void aRefusedConnectionFailsEveryCallOver() throws Exception {
    String token = "fleet-token-for-the-tests";
    try (TestDaemon daemon = new TestDaemon(Map.of("MEMORYD_AUTH_TOKEN", token), false)) {
      String refused = closedPort();
      List<String> fleet = List.of(refused, daemon.address);
      String agent = agentPreferring(fleet, refused);
      try (MemorydClient c =
              MemorydClient.builder()
                  .addresses(fleet)
                  .token(token)
                  .downFor(Duration.ZERO)
                  .build();
          MemorydClient direct =
              MemorydClient.builder().address(daemon.address).token(token).build()) {
        assertEquals(fleet, c.daemonsFor(agent));
        Memory m =
            c.store(
                    StoreRequest.newBuilder()
                        .setAgentId(agent)
                        .setText("The wifi password is on the fridge")
                        .build())
                .getMemory();
        c.update(
            UpdateRequest.newBuilder()
                .setAgentId(agent)
                .setId(m.getId())
                .setText("The wifi password is in the drawer")
                .build());
        assertEquals("The wifi password is in the drawer", direct.get(agent, m.getId()).getText());
      }
    }
  }
}
