package dev.memoryd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.Gson;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import dev.memoryd.v1.GetRequest;
import dev.memoryd.v1.GetResponse;
import dev.memoryd.v1.Memory;
import dev.memoryd.v1.MemoryServiceGrpc;
import dev.memoryd.v1.StoreOutcome;
import dev.memoryd.v1.StoreRequest;
import dev.memoryd.v1.StoreResponse;
import dev.memoryd.v1.UpdateRequest;
import dev.memoryd.v1.UpdateResponse;
import io.grpc.Grpc;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
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

  /** A daemon that answers Store, Get and Update with one status and records the requests. */
  private static final class Fake extends MemoryServiceGrpc.MemoryServiceImplBase {
    final Status status;
    final List<Object> calls = new CopyOnWriteArrayList<>();

    Fake(Status status) {
      this.status = status;
    }

    private <T> void answer(Object request, StreamObserver<T> out) {
      calls.add(request);
      out.onError(status.withDescription("the fake daemon answers").asRuntimeException());
    }

    @Override
    public void store(StoreRequest request, StreamObserver<StoreResponse> out) {
      answer(request, out);
    }

    @Override
    public void get(GetRequest request, StreamObserver<GetResponse> out) {
      answer(request, out);
    }

    @Override
    public void update(UpdateRequest request, StreamObserver<UpdateResponse> out) {
      answer(request, out);
    }
  }

  /**
   * UNAVAILABLE answered by a daemon: a store goes on with the key of its first try (which the
   * next daemon then replays), an update is not sent again; NOT_FOUND is the answer.
   */
  @Test
  void unavailableFailsOverOnlyWhatIsSafeToSendAgain() throws Exception {
    String token = "fleet-token-for-the-tests";
    Fake down = new Fake(Status.UNAVAILABLE);
    Fake notFound = new Fake(Status.NOT_FOUND);
    Server downServer =
        Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create())
            .addService(down)
            .build()
            .start();
    Server notFoundServer =
        Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create())
            .addService(notFound)
            .build()
            .start();
    try (TestDaemon daemon = new TestDaemon(Map.of("MEMORYD_AUTH_TOKEN", token), false);
        MemorydClient direct =
            MemorydClient.builder().address(daemon.address).token(token).build()) {
      List<String> fleet = List.of("127.0.0.1:" + downServer.getPort(), daemon.address);
      String agent = agentPreferring(fleet, fleet.get(0));
      try (MemorydClient c =
          MemorydClient.builder().addresses(fleet).token(token).downFor(Duration.ZERO).build()) {
        Memory m =
            c.store(StoreRequest.newBuilder().setAgentId(agent).setText("Standup at 9:30").build())
                .getMemory();
        String key = ((StoreRequest) down.calls.get(0)).getIdempotencyKey();
        assertEquals(key, UUID.fromString(key).toString());
        StoreResponse replay =
            direct.store(
                StoreRequest.newBuilder()
                    .setAgentId(agent)
                    .setText("Standup at 9:30")
                    .setIdempotencyKey(key)
                    .build());
        assertEquals(StoreOutcome.STORE_OUTCOME_CREATED, replay.getOutcome());
        assertEquals(m.getId(), replay.getMemory().getId());
        MemorydException e =
            assertThrows(
                MemorydException.class,
                () ->
                    c.update(
                        UpdateRequest.newBuilder()
                            .setAgentId(agent)
                            .setId(m.getId())
                            .setText("Standup at 10:00")
                            .build()));
        assertEquals("UNAVAILABLE", e.codeName());
        assertEquals(2, down.calls.size()); // the store and the update, each once
        assertEquals("Standup at 9:30", direct.get(agent, m.getId()).getText());
      }

      fleet = List.of("127.0.0.1:" + notFoundServer.getPort(), daemon.address);
      String other = agentPreferring(fleet, fleet.get(0));
      Memory lunch =
          direct
              .store(StoreRequest.newBuilder().setAgentId(other).setText("Lunch at noon").build())
              .getMemory();
      try (MemorydClient c = MemorydClient.builder().addresses(fleet).token(token).build()) {
        MemorydException e =
            assertThrows(MemorydException.class, () -> c.get(other, lunch.getId()));
        assertEquals("NOT_FOUND", e.codeName());
      }
      assertEquals(1, notFound.calls.size());
    } finally {
      downServer.shutdownNow();
      notFoundServer.shutdownNow();
    }
  }
}
