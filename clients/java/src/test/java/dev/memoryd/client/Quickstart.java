package dev.memoryd.client;

import dev.memoryd.v1.RecallRequest;
import dev.memoryd.v1.ScoredMemory;
import dev.memoryd.v1.StoreRequest;
import dev.memoryd.v1.StoreResponse;
import dev.memoryd.v1.StreamRequest;
import dev.memoryd.v1.StreamResponse;
import dev.memoryd.v1.UpdateRequest;

/**
 * The README's example: store, recall, update, forget, a Stream session and an error, against
 * a running memoryd (MEMORYD_ADDRESS, default 127.0.0.1:50051; MEMORYD_AUTH_TOKEN if set).
 */
public final class Quickstart {
  public static void main(String[] args) throws InterruptedException {
    String address = System.getenv().getOrDefault("MEMORYD_ADDRESS", "127.0.0.1:50051");
    try (MemorydClient c =
        MemorydClient.builder()
            .address(address)
            .token(System.getenv("MEMORYD_AUTH_TOKEN"))
            .build()) {
      StoreResponse r =
          c.store(
              StoreRequest.newBuilder()
                  .setAgentId("main")
                  .setText("Deploys happen on Fridays at 5pm")
                  .setImportance(0.9f)
                  .putMetadata("source", "chat")
                  .setIdempotencyKey("msg-1842")
                  .build());
      System.out.println(r.getOutcome() + " " + r.getMemory().getId());

      RecallRequest query =
          RecallRequest.newBuilder()
              .setAgentId("main")
              .setQuery("when do we deploy?")
              .setLimit(3)
              .build();
      for (ScoredMemory hit : c.recall(query).getResultsList()) {
        System.out.printf("%.2f %s%n", hit.getScore(), hit.getMemory().getText());
      }

      c.update(
          UpdateRequest.newBuilder()
              .setAgentId("main")
              .setId(r.getMemory().getId())
              .setText("Deploys happen on Thursdays at 5pm")
              .build());

      // A Stream session: ops run concurrently, answers come back by request id.
      try (Session session = c.stream()) {
        session.send(
            StreamRequest.newBuilder()
                .setRequestId("1")
                .setRecall(RecallRequest.newBuilder().setAgentId("main").setQuery("deploy day"))
                .build());
        session.send(
            StreamRequest.newBuilder()
                .setRequestId("2")
                .setStore(StoreRequest.newBuilder().setAgentId("main").setText(""))
                .build());
        session.closeSend();
        for (StreamResponse a = session.recv(); a != null; a = session.recv()) {
          System.out.println(
              a.hasError()
                  ? a.getRequestId() + " failed: " + a.getError().getCodeName()
                  : a.getRequestId() + " ok");
        }
      }

      c.forgetId("main", r.getMemory().getId());

      try {
        c.store(StoreRequest.newBuilder().setAgentId("main").setText("").build());
      } catch (MemorydException e) {
        System.out.println(e.codeName() + " " + e.daemonMessage()); // INVALID_ARGUMENT text is empty
      }
    }
  }
}
