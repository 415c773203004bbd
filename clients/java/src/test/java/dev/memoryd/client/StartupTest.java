package dev.memoryd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.memoryd.v1.StoreRequest;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** While memoryd loads it answers UNAVAILABLE; idempotent calls ride that out with retries. */
class StartupTest {
  private static final String TOKEN = "startup-token-for-the-tests";

  @Test
  void retriesOutlastADaemonThatIsStarting() throws Exception {
    try (TestDaemon daemon = new TestDaemon(Map.of("MEMORYD_AUTH_TOKEN", TOKEN), true)) {
      try (MemorydClient impatient =
          MemorydClient.builder().address(daemon.address).token(TOKEN).retries(0).build()) {
        MemorydException e =
            assertThrows(
                MemorydException.class,
                () ->
                    impatient.store(
                        StoreRequest.newBuilder()
                            .setAgentId("boot")
                            .setText("written during start-up")
                            .build()));
        assertEquals("UNAVAILABLE", e.codeName(), e.getMessage());
      }
      try (MemorydClient patient =
          MemorydClient.builder()
              .address(daemon.address)
              .token(TOKEN)
              .retries(1000)
              .maxBackoff(Duration.ofMillis(500))
              .timeout(Duration.ofSeconds(120))
              .build()) {
        assertEquals(0, patient.stats("boot").getTotal(), "the Store during start-up wrote nothing");
      }
      assertEquals(0, daemon.stop(), "memoryd's exit code on SIGTERM");
    }
  }

  @Test
  void theDeadlineBoundsRetries() {
    try (MemorydClient c =
        MemorydClient.builder()
            .address("127.0.0.1:1")
            .retries(1000)
            .timeout(Duration.ofMillis(700))
            .build()) {
      long start = System.nanoTime();
      MemorydException e = assertThrows(MemorydException.class, () -> c.stats("main"));
      assertTrue(System.nanoTime() - start < 5_000_000_000L, "took past the 700 ms deadline");
      assertTrue(
          e.codeName().equals("UNAVAILABLE") || e.codeName().equals("DEADLINE_EXCEEDED"),
          e.getMessage());
    }
  }
}
